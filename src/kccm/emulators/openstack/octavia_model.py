"""Octavia's objects: their attributes, defaults and views.

Mirrors octavia/db/prepare.py (new objects are ``PENDING_CREATE``/``OFFLINE``, members
``NO_MONITOR`` without a health monitor), octavia/api/v2/types/*.py (the attributes each
body may carry, and the views: ``name`` and ``description`` never null,
``listeners``/``pools``/``members`` as id-only lists, the ``*FullResponse`` of the fully
populated create without back references, ``allowed_cidrs`` null when empty) and
octavia/common/exceptions.py for the texts. The provisioning states are
:mod:`kccm.emulators.openstack.octavia_state`'s.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from kccm.emulators.openstack import octavia_wsme as wsme
from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = [
    "LISTENER_POOL_PROTOCOLS",
    "POST_ATTRS",
    "children",
    "immutable",
    "known_attributes",
    "new_healthmonitor",
    "new_listener",
    "new_member",
    "new_pool",
    "not_found",
    "validation",
    "view",
]

LISTENER_POOL_PROTOCOLS = {  # octavia/common/constants.py VALID_LISTENER_POOL_PROTOCOL_MAP
    "TCP": ("HTTP", "HTTPS", "PROXY", "PROXYV2", "TCP"),
    "HTTP": ("HTTP", "PROXY", "PROXYV2"),
    "HTTPS": ("HTTPS", "PROXY", "PROXYV2", "TCP"),
    "TERMINATED_HTTPS": ("HTTP", "PROXY", "PROXYV2"),
    "UDP": ("UDP",),
    "SCTP": ("SCTP",),
    "PROMETHEUS": (),
}
POOL_PROTOCOLS = ("HTTP", "HTTPS", "PROXY", "PROXYV2", "TCP", "UDP", "SCTP")
ALGORITHMS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
HM_TYPES = ("HTTP", "HTTPS", "PING", "TCP", "TLS-HELLO", "UDP-CONNECT", "SCTP")
RESOURCE_NAMES = {  # data_models.<X>._name()
    "loadbalancers": "Load Balancer",
    "listeners": "Listener",
    "pools": "Pool",
    "members": "Member",
    "healthmonitors": "Health Monitor",
}


def validation(detail: str) -> EmuError:
    """``ValidationException``: 400 ``Validation failure: <detail>``."""
    return EmuError(400, f"Validation failure: {detail}")


def not_found(kind: str, ident: str, status: int = 404) -> EmuError:
    """``NotFound`` (404) or ``InvalidSubresource`` (400): ``<Resource> <id> not found.``"""
    return EmuError(status, f"{RESOURCE_NAMES.get(kind, kind)} {ident} not found.")


def immutable(resource: str, ident: str) -> EmuError:
    """``ImmutableObject``: 409 ``<resource> <id> is immutable and cannot be updated.``"""
    return EmuError(409, f"{resource} {ident} is immutable and cannot be updated.")


def mandatory(name: str, value: Any = None) -> EmuError:
    """wsme's answer for a missing mandatory attribute."""
    return EmuError(
        400, f"Invalid input for field/attribute {name}. Value: '{value}'. Mandatory field missing."
    )


def enum_error(name: str, value: Any, allowed: Iterable[str]) -> EmuError:
    return EmuError(
        400,
        f"Invalid input for field/attribute {name}. Value: '{value}'. Value should be one "
        f"of: {', '.join(sorted(allowed))}",
    )


_LISTENER = {
    "name",
    "description",
    "admin_state_up",
    "protocol",
    "protocol_port",
    "connection_limit",
    "default_tls_container_ref",
    "sni_container_refs",
    "default_pool_id",
    "default_pool",
    "l7policies",
    "insert_headers",
    "timeout_client_data",
    "timeout_member_connect",
    "timeout_member_data",
    "timeout_tcp_inspect",
    "tags",
    "client_ca_tls_container_ref",
    "client_authentication",
    "client_crl_container_ref",
    "allowed_cidrs",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
    "hsts_max_age",
    "hsts_include_subdomains",
    "hsts_preload",
}
_POOL = {
    "name",
    "description",
    "admin_state_up",
    "protocol",
    "lb_algorithm",
    "session_persistence",
    "healthmonitor",
    "members",
    "tags",
    "tls_container_ref",
    "ca_tls_container_ref",
    "crl_container_ref",
    "tls_enabled",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
}
_MEMBER = {
    "name",
    "admin_state_up",
    "address",
    "protocol_port",
    "weight",
    "backup",
    "subnet_id",
    "monitor_port",
    "monitor_address",
    "tags",
    "request_sriov",
}
_MONITOR = {
    "name",
    "type",
    "delay",
    "timeout",
    "max_retries_down",
    "max_retries",
    "http_method",
    "url_path",
    "expected_codes",
    "admin_state_up",
    "tags",
    "http_version",
    "domain_name",
}
POST_ATTRS = {  # the wsme types of octavia/api/v2/types: *POST and *SingleCreate
    "loadbalancer": {
        "name",
        "description",
        "admin_state_up",
        "vip_address",
        "vip_port_id",
        "vip_subnet_id",
        "vip_network_id",
        "vip_qos_policy_id",
        "vip_sg_ids",
        "additional_vips",
        "project_id",
        "listeners",
        "pools",
        "provider",
        "tags",
        "flavor_id",
        "availability_zone",
    },
    "listener": _LISTENER | {"loadbalancer_id", "project_id"},
    "listener_single": _LISTENER,
    "pool": _POOL | {"listener_id", "loadbalancer_id", "project_id"},
    "pool_single": _POOL,
    "member": _MEMBER | {"project_id"},
    "member_single": _MEMBER,
    "healthmonitor": _MONITOR | {"pool_id", "project_id"},
    "healthmonitor_single": _MONITOR,
}
ARGUMENTS = {  # the controllers' argument names, as wsme prefixes them
    "members": "members_.members",
    "loadbalancer": "load_balancer.loadbalancer",
    "listener": "listener_.listener",
    "pool": "pool_.pool",
    "member": "member_.member",
    "healthmonitor": "health_monitor_.healthmonitor",
}


def known_attributes(
    body: Obj, kind: str, allowed: set[str] | None = None, *, max_minor: int = 30
) -> None:
    """wsme's ``UnknownAttribute``: 400 ``Unknown attribute for argument <arg>: <names>``;
    ``allowed_cidrs`` is unknown below API v2.12 (an older Octavia)."""
    known = set(POST_ATTRS[kind] if allowed is None else allowed)
    if max_minor < 12:
        known.discard("allowed_cidrs")
    extra = sorted(set(body) - known)
    if not extra:
        return
    argument = ARGUMENTS.get(kind.removesuffix("_single"), ARGUMENTS["loadbalancer"])
    if kind.endswith("_single"):
        argument = ARGUMENTS["loadbalancer"]
    plural = "s" if len(extra) > 1 else ""
    raise EmuError(400, f"Unknown attribute{plural} for argument {argument}: {', '.join(extra)}")


def _base(body: Obj, project_id: str) -> Obj:
    return {
        "id": new_id(),
        "name": body.get("name") or "",
        "description": body.get("description") or "",
        "admin_state_up": body.get("admin_state_up", True),
        "project_id": project_id,
        "provisioning_status": "PENDING_CREATE",
        "operating_status": "OFFLINE",
        "created_at": now_iso(zulu=False, micro=True),
        "updated_at": None,
        "tags": list(body.get("tags") or []),
    }


def _port(body: Obj, key: str, *, required: bool = True) -> int | None:
    value = body.get(key)
    if value is None:
        if required:
            raise mandatory(key)
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        bound = (
            "lower or equal to 65535"
            if isinstance(value, int) and value > 0
            else ("greater or equal to 1")
        )
        raise EmuError(
            400,
            f"Invalid input for field/attribute {key}. Value: '{value}'. Value should be {bound}",
        )
    return value


def new_listener(body: Obj, lb: Obj) -> Obj:
    protocol = body.get("protocol")
    if protocol is None:
        raise mandatory("protocol")
    if protocol not in LISTENER_POOL_PROTOCOLS:
        raise enum_error("protocol", protocol, LISTENER_POOL_PROTOCOLS)
    wsme.check_bounds(body, wsme.LISTENER_BOUNDS)
    listener = _base(body, lb["project_id"])
    listener.update(
        {
            "protocol": protocol,
            "protocol_port": _port(body, "protocol_port"),
            "connection_limit": body.get("connection_limit", -1),
            "default_tls_container_ref": body.get("default_tls_container_ref"),
            "sni_container_refs": list(body.get("sni_container_refs") or []),
            "default_pool_id": body.get("default_pool_id"),
            "insert_headers": dict(body.get("insert_headers") or {}),
            "timeout_client_data": body.get("timeout_client_data") or 50000,
            "timeout_member_connect": body.get("timeout_member_connect") or 5000,
            "timeout_member_data": body.get("timeout_member_data") or 50000,
            "timeout_tcp_inspect": body.get("timeout_tcp_inspect") or 0,
            "client_ca_tls_container_ref": body.get("client_ca_tls_container_ref"),
            "client_authentication": body.get("client_authentication") or "NONE",
            "client_crl_container_ref": body.get("client_crl_container_ref"),
            "allowed_cidrs": check_cidrs(body.get("allowed_cidrs"), lb),
            "tls_ciphers": body.get("tls_ciphers"),
            "tls_versions": body.get("tls_versions"),
            "alpn_protocols": body.get("alpn_protocols"),
            "hsts_max_age": body.get("hsts_max_age"),
            "hsts_include_subdomains": bool(body.get("hsts_include_subdomains", False)),
            "hsts_preload": bool(body.get("hsts_preload", False)),
            "_lb": lb["id"],
        }
    )
    return listener


def check_cidrs(cidrs: Any, lb: Obj) -> list[str]:
    """``allowed_cidrs``: valid CIDRs of the VIP's IP version (listener.py
    ``_validate_cidr_compatible_with_vip``), duplicates dropped."""
    result: list[str] = []
    vip_v6 = ":" in str(lb.get("vip_address") or "")
    for cidr in cidrs or ():
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise EmuError(
                400,
                f"Invalid input for field/attribute allowed_cidrs. Value: '{cidrs}'. "
                f"Value should be IPv4 or IPv6 CIDR format",
            ) from exc
        if (network.version == 6) != vip_v6:
            raise validation(
                f"CIDR {cidr} IP version incompatible with all VIPs "
                f"{[lb.get('vip_address')]} IP version."
            )
        if str(cidr) not in result:
            result.append(str(cidr))
    return result


def new_pool(body: Obj, lb: Obj) -> Obj:
    for key, allowed in (("protocol", POOL_PROTOCOLS), ("lb_algorithm", ALGORITHMS)):
        if body.get(key) is None:
            raise mandatory(key)
        if body[key] not in allowed:
            raise enum_error(key, body[key], allowed)
    pool = _base(body, lb["project_id"])
    pool.update(
        {
            "protocol": body["protocol"],
            "lb_algorithm": body["lb_algorithm"],
            "session_persistence": body.get("session_persistence"),
            "tls_enabled": bool(body.get("tls_enabled", False)),
            "tls_container_ref": body.get("tls_container_ref"),
            "ca_tls_container_ref": body.get("ca_tls_container_ref"),
            "crl_container_ref": body.get("crl_container_ref"),
            "tls_ciphers": body.get("tls_ciphers"),
            "tls_versions": body.get("tls_versions"),
            "alpn_protocols": body.get("alpn_protocols"),
            "_lb": lb["id"],
        }
    )
    return pool


def new_member(body: Obj, pool: Obj, *, monitored: bool) -> Obj:
    address = body.get("address") or body.get("ip_address")
    if address is None:
        raise mandatory("address")
    wsme.check_ips({**body, "address": address}, "address", "monitor_address")
    wsme.check_bounds(body, wsme.MEMBER_BOUNDS)
    member = _base(body, pool["project_id"])
    member.update(
        {
            "operating_status": "OFFLINE" if monitored else "NO_MONITOR",
            "address": str(address),
            "protocol_port": _port(body, "protocol_port"),
            "weight": body.get("weight", 1) if body.get("weight") is not None else 1,
            "backup": bool(body.get("backup", False)),
            "subnet_id": body.get("subnet_id"),
            "monitor_address": body.get("monitor_address"),
            "monitor_port": _port(body, "monitor_port", required=False),
            "vnic_type": "normal",
            "_pool": pool["id"],
        }
    )
    return member


def new_healthmonitor(body: Obj, pool: Obj) -> Obj:
    kind = body.get("type")
    if kind is None:
        raise mandatory("type")
    if kind not in HM_TYPES:
        raise enum_error("type", kind, HM_TYPES)
    for key in ("delay", "timeout", "max_retries"):
        if body.get(key) is None:
            raise mandatory(key)
    http = kind in ("HTTP", "HTTPS")
    if not http:
        for key in ("http_method", "url_path", "expected_codes"):
            if body.get(key) is not None:
                raise EmuError(400, f"{body[key]} is not a valid option for {key}")
    hm = _base(body, pool["project_id"])
    hm.update(
        {
            "type": kind,
            "delay": body["delay"],
            "timeout": body["timeout"],
            "max_retries": body["max_retries"],
            "max_retries_down": body.get("max_retries_down") or 3,
            "http_method": (body.get("http_method") or "GET") if http else None,
            "url_path": (body.get("url_path") or "/") if http else None,
            "expected_codes": (body.get("expected_codes") or "200") if http else None,
            "http_version": body.get("http_version"),
            "domain_name": body.get("domain_name"),
            "_pool": pool["id"],
        }
    )
    return hm


# -- views -------------------------------------------------------------------------------


def _public(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def _ids(items: Iterable[Obj]) -> list[Obj]:
    return [{"id": item["id"]} for item in items]


def children(world: World, kind: str, key: str, parent: str) -> list[Obj]:
    store: dict[str, Obj] = getattr(world, kind)
    return [obj for obj in store.values() if obj.get(key) == parent]


def view(world: World, kind: str, obj: Obj, *, full: bool = False) -> Obj:
    """The API view of ``obj`` (a ``*Response``, or ``*FullResponse`` when ``full``)."""
    body = _public(obj)
    wsme.response_fields(kind, obj, body)
    if kind == "loadbalancers":
        body["listeners"] = (
            [
                view(world, "listeners", li, full=full)
                for li in children(world, "listeners", "_lb", obj["id"])
            ]
            if full
            else _ids(children(world, "listeners", "_lb", obj["id"]))
        )
        body["pools"] = (
            [view(world, "pools", p, full=full) for p in children(world, "pools", "_lb", obj["id"])]
            if full
            else _ids(children(world, "pools", "_lb", obj["id"]))
        )
    elif kind == "listeners":
        body["allowed_cidrs"] = list(obj["allowed_cidrs"]) or None
        body["l7policies"] = []
        if not full:
            body["loadbalancers"] = [{"id": obj["_lb"]}]
    elif kind == "pools":
        _pool_view(world, obj, body, full)
    elif kind == "healthmonitors" and not full:
        body["pools"] = [{"id": obj["_pool"]}]
    return body


def _pool_view(world: World, pool: Obj, body: Obj, full: bool) -> None:
    body["listeners"] = _ids(
        li for li in world.listeners.values() if li["default_pool_id"] == pool["id"]
    )
    members = children(world, "members", "_pool", pool["id"])
    monitors = children(world, "healthmonitors", "_pool", pool["id"])
    if full:
        body["members"] = [view(world, "members", m, full=True) for m in members]
        if monitors:
            body["healthmonitor"] = view(world, "healthmonitors", monitors[0], full=True)
        return
    body["loadbalancers"] = [{"id": pool["_lb"]}]
    body.update({"healthmonitor_id": monitors[0]["id"]} if monitors else {})  # else absent
    body["members"] = _ids(members)
