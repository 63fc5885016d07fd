"""Octavia's objects, their defaults and views, and the provisioning state machine.

Mirrors octavia/db/prepare.py (new objects are ``PENDING_CREATE``/``OFFLINE``, members
``NO_MONITOR`` without a health monitor), octavia/api/v2/types/*.py (the views: ``name`` and
``description`` never null, ``listeners``/``pools``/``members`` as id-only lists, the
``*FullResponse`` of the fully populated create without back references, ``allowed_cidrs``
null when empty), octavia/db/repositories.py (``test_and_set_provisioning_status``: a change
is accepted only while the balancer is ``ACTIVE``, deletion also from ``ERROR``) and
octavia/common/exceptions.py for the texts.

Where a real provider's worker moves a balancer on, a timer on the server's loop does after
``World.lb_active_delay`` seconds: ``PENDING_CREATE``/``PENDING_UPDATE`` become ``ACTIVE``
(operating status ``ONLINE``, members ``NO_MONITOR`` without a monitor), ``PENDING_DELETE``
objects go, and a deleted balancer takes its children and its Octavia-owned VIP port along.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from typing import Any

from kccm.testing.openstack.errors import EmuError
from kccm.testing.openstack.world import Obj, World, new_id, now_iso

__all__ = [
    "LISTENER_POOL_PROTOCOLS",
    "check_mutable",
    "immutable",
    "lock",
    "new_healthmonitor",
    "new_listener",
    "new_member",
    "new_pool",
    "not_found",
    "settle",
    "settle_later",
    "settle_now",
    "validation",
    "view",
]

PENDING = ("PENDING_CREATE", "PENDING_UPDATE", "PENDING_DELETE")
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


def _base(body: Obj, project_id: str) -> Obj:
    return {
        "id": new_id(),
        "name": body.get("name") or "",
        "description": body.get("description") or "",
        "admin_state_up": body.get("admin_state_up", True),
        "project_id": project_id,
        "provisioning_status": "PENDING_CREATE",
        "operating_status": "OFFLINE",
        "created_at": now_iso(zulu=False),
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
    import ipaddress

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


def _ip_address(name: str, value: Any) -> str:
    """``types.IPAddressType`` (octavia/api/common/types.py): an IPv4 or IPv6 address, else
    wsme's 400. OCCM's serial member path (``getNodeAddressForLB``) sends a Node's first
    address, its host name when the Node has no InternalIP yet, which Octavia refuses."""
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        raise EmuError(
            400,
            f"Invalid input for field/attribute {name}. Value: '{value}'. "
            "Value should be IPv4 or IPv6 format",
        ) from None
    return str(value)


def new_member(body: Obj, pool: Obj, *, monitored: bool) -> Obj:
    address = body.get("address") or body.get("ip_address")
    if address is None:
        raise mandatory("address")
    address = _ip_address("address", address)
    if body.get("monitor_address") is not None:
        _ip_address("monitor_address", body["monitor_address"])
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
    body["healthmonitor_id"] = monitors[0]["id"] if monitors else None
    body["members"] = _ids(members)


# -- the state machine ---------------------------------------------------------------------


def lock(
    world: World,
    lb: Obj,
    *,
    resource_error: bool = True,
    lb_status: str = "PENDING_UPDATE",
    touched: Iterable[tuple[Obj, str]] = (),
) -> None:
    """``test_and_set_lb_and_listeners_prov_status``: refuse unless the balancer is
    ``ACTIVE`` (``ERROR`` too for a delete), then set it and ``touched`` objects pending and
    start the timer that settles them."""
    check_mutable(lb, resource_error=resource_error, lb_status=lb_status)
    lb["provisioning_status"] = lb_status
    lb["updated_at"] = now_iso(zulu=False)
    for obj, status in touched:
        obj["provisioning_status"] = status
        if status != "PENDING_CREATE":
            obj["updated_at"] = now_iso(zulu=False)
    settle_later(world, lb["id"])


def check_mutable(
    lb: Obj,
    *,
    resource_error: bool = True,
    lb_status: str = "PENDING_UPDATE",
    pool: Obj | None = None,
) -> None:
    """Raise what Octavia answers a change of a balancer that is not ``ACTIVE`` with:
    ``ImmutableObject`` for a child (``Pool <id>`` first when the pool itself is pending,
    as member and monitor changes check it), ``LBPendingStateError`` for the balancer."""
    if pool is not None and pool["provisioning_status"] != "ACTIVE":
        raise immutable("Pool", pool["id"])
    allowed = ("ACTIVE", "ERROR") if lb_status == "PENDING_DELETE" else ("ACTIVE",)
    if lb["provisioning_status"] in allowed:
        return
    if resource_error:
        raise immutable("Load Balancer", lb["id"])
    raise EmuError(
        409, f"Invalid state {lb['provisioning_status']} of loadbalancer resource {lb['id']}"
    )


def settle_later(world: World, lb_id: str) -> None:
    """Start (or restart) the balancer's timer on the running loop."""
    old = world.timers.pop(lb_id, None)
    if old is not None:
        old.cancel()

    def fire() -> None:
        world.timers.pop(lb_id, None)
        settle(world, lb_id)

    loop = asyncio.get_running_loop()
    world.timers[lb_id] = loop.call_later(max(world.lb_active_delay, 0.0), fire)


def settle_now(world: World) -> list[str]:
    """Settle every balancer whose timer runs, at once (``POST /_emu/settle``); the ids."""
    settled = list(world.timers)
    for lb_id in settled:
        world.timers.pop(lb_id).cancel()
        settle(world, lb_id)
    return settled


def _tree(world: World, lb_id: str) -> list[tuple[str, Obj]]:
    pools = children(world, "pools", "_lb", lb_id)
    found: list[tuple[str, Obj]] = [
        ("listeners", li) for li in children(world, "listeners", "_lb", lb_id)
    ]
    found += [("pools", p) for p in pools]
    for pool in pools:
        found += [("members", m) for m in children(world, "members", "_pool", pool["id"])]
        found += [
            ("healthmonitors", h) for h in children(world, "healthmonitors", "_pool", pool["id"])
        ]
    return found


def remove(world: World, kind: str, obj: Obj) -> None:
    """Drop ``obj`` and what hangs below it (a pool's members and monitor; a listener's
    default pool link)."""
    store: dict[str, Obj] = getattr(world, kind)
    store.pop(obj["id"], None)
    if kind == "pools":
        for child_kind in ("members", "healthmonitors"):
            for child in children(world, child_kind, "_pool", obj["id"]):
                getattr(world, child_kind).pop(child["id"], None)
        for listener in world.listeners.values():
            if listener["default_pool_id"] == obj["id"]:
                listener["default_pool_id"] = None


def _online(world: World, kind: str, obj: Obj) -> str:
    if not obj.get("admin_state_up", True):
        return "OFFLINE"
    if kind == "members":
        pool_monitors = children(world, "healthmonitors", "_pool", obj["_pool"])
        return "ONLINE" if pool_monitors else "NO_MONITOR"
    return "ONLINE"


def _delete_vip_port(world: World, port_id: str) -> None:
    """Octavia deletes the VIP port it allocated; Neutron's port delete disassociates the
    port's floating IPs (neutron/db/l3_db.py, ``disassociate_floatingips``), so a floating IP
    the user kept (OCCM's ``loadBalancerIP``) is left unassociated, not pointing at a port
    that is gone."""
    if world.ports.pop(port_id, None) is None:
        return
    for fip in world.floatingips.values():
        if fip["port_id"] == port_id:
            fip.update(
                port_id=None,
                fixed_ip_address=None,
                router_id=None,
                status="DOWN",
                port_details=None,
            )


def settle(world: World, lb_id: str) -> None:
    """What the provider's worker does when it finishes: pending objects become ACTIVE,
    pending deletes go (a deleted balancer takes its tree and VIP port)."""
    lb = world.loadbalancers.get(lb_id)
    if lb is None:
        return
    if lb["provisioning_status"] == "PENDING_DELETE":
        for kind, obj in _tree(world, lb_id):
            getattr(world, kind).pop(obj["id"], None)
        del world.loadbalancers[lb_id]
        if lb.get("_vip_owned"):
            _delete_vip_port(world, lb["vip_port_id"])
        return
    for kind, obj in _tree(world, lb_id):
        if obj["provisioning_status"] == "PENDING_DELETE":
            remove(world, kind, obj)
    for kind, obj in [("loadbalancers", lb), *_tree(world, lb_id)]:
        if obj["provisioning_status"] in PENDING:
            obj["provisioning_status"] = "ACTIVE"
        obj["operating_status"] = _online(world, kind, obj)
