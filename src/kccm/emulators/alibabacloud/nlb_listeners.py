"""NLB listeners (``TCP``, ``UDP``, ``TCPSSL``) and their additional certificates.

A listener forwards one port (or, ``ListenerPort`` 0 with ``StartPort``/``EndPort``, a range: its
server group must have ``AnyPortEnabled``) of its balancer to a server group of the balancer's
VPC whose protocol carries it (``TCP``/``TCPSSL`` on a ``TCP`` or ``TCPUDP`` group, ``UDP`` on a
``UDP`` or ``TCPUDP`` one; else ``IllegalParam.ServerGroupId``). ``TCP`` and ``TCPSSL`` share a
port space, ``UDP`` has its own (``Conflict.Port``). ``TCPSSL`` needs ``CertificateIds.1``.
``CreateListener`` answers a ``ListenerId`` and a ``JobId``: the listener is ``Provisioning``,
then ``Running``; ``UpdateListenerAttribute`` leaves it ``Configuring`` meanwhile;
``StartListener``/``StopListener`` go through ``Starting``/``Stopping``; ``DeleteListener``
removes it at once (its job only reports). Every other parameter is kept as sent and read back
(``IdleTimeout`` 900 and ``Cps``/``Mss`` absent when never sent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.nlb import nlb_balancer
from kccm.emulators.alibabacloud.nlbmodel import NlbBalancer, NlbListener
from kccm.emulators.alibabacloud.nlbwire import (
    flag,
    integer,
    kept,
    not_found,
    read_jobs,
    region,
    register,
    render_tags,
    start_job,
    strings,
    tags,
)
from kccm.emulators.alibabacloud.rpc import COMMON, RpcError, required, token_listing
from kccm.emulators.alibabacloud.world import World

__all__ = ["render_nlb_listener"]

PROTOCOLS = ("TCP", "UDP", "TCPSSL")
CARRIERS = {"TCP": ("TCP", "TCPUDP"), "TCPSSL": ("TCP", "TCPUDP"), "UDP": ("UDP", "TCPUDP")}
_OWN = {
    "LoadBalancerId",
    "ListenerId",
    "ListenerProtocol",
    "ListenerPort",
    "ServerGroupId",
    "ListenerDescription",
    "StartPort",
    "EndPort",
    "RegionId",
    "ClientToken",
    "DryRun",
}
_BOOLS = ("ProxyProtocolEnabled", "CaEnabled", "AlpnEnabled", "SecSensorEnabled")
_INTS = ("IdleTimeout", "Cps", "Mss")
_LISTS = ("CertificateIds", "CaCertificateIds", "AdditionalCertificateIds")


def _listener(world: World, listener_id: str) -> NlbListener:
    found = world.nlb.listeners.get(listener_id)
    if found is None:
        raise not_found("listener", listener_id)
    return found


def _kept(item: NlbListener, name: str) -> Any:
    raw = item.fields.get(name)
    return None if raw is None else raw == "true"


def render_nlb_listener(item: NlbListener, region_id: str) -> dict[str, Any]:
    ppv2 = json.loads(item.fields.get("ProxyProtocolV2Config") or "{}")
    body: dict[str, Any] = {
        "ListenerId": item.id,
        "LoadBalancerId": item.lb,
        "RegionId": region_id,
        "ListenerProtocol": item.protocol,
        "ListenerPort": item.port,
        "ListenerDescription": item.description,
        "ServerGroupId": item.group,
        "ListenerStatus": item.status,
        "IdleTimeout": int(item.fields.get("IdleTimeout") or 900),
        "ProxyProtocolEnabled": bool(_kept(item, "ProxyProtocolEnabled")),
        "SecSensorEnabled": bool(_kept(item, "SecSensorEnabled")),
        "ProxyProtocolV2Config": {
            k: bool(ppv2.get(k))
            for k in (
                "Ppv2PrivateLinkEpIdEnabled",
                "Ppv2PrivateLinkEpsIdEnabled",
                "Ppv2VpcIdEnabled",
            )
        },
        "Tags": render_tags(item.tags),
    }
    if item.start_port:
        body["StartPort"], body["EndPort"] = str(item.start_port), str(item.end_port)
    for name in ("Cps", "Mss"):
        if item.fields.get(name):
            body[name] = int(item.fields[name])
    if item.protocol == "TCPSSL":
        body["CertificateIds"] = _list(item, "CertificateIds")
        body["CaCertificateIds"] = _list(item, "CaCertificateIds")
        body["CaEnabled"] = bool(_kept(item, "CaEnabled"))
        body["SecurityPolicyId"] = item.fields.get("SecurityPolicyId") or "tls_cipher_policy_1_0"
        body["AlpnEnabled"] = bool(_kept(item, "AlpnEnabled"))
        body["AlpnPolicy"] = item.fields.get("AlpnPolicy", "")
    return body


def _list(item: NlbListener, name: str) -> list[str]:
    return [v for k, v in sorted(item.fields.items(), key=_numbered) if k.startswith(f"{name}.")]


def _numbered(pair: tuple[str, str]) -> tuple[str, int]:
    name, _, index = pair[0].rpartition(".")
    return (name, int(index) if index.isdigit() else 0)


def _fields(params: Mapping[str, str]) -> dict[str, str]:
    """The listener's other parameters, checked."""
    for name in _BOOLS:
        flag(params, name)
    for name in _INTS:
        integer(params, name, 0, 1_000_000)
    if params.get("ProxyProtocolV2Config"):
        try:
            json.loads(params["ProxyProtocolV2Config"])
        except ValueError as err:
            raise RpcError("IllegalParam.ProxyProtocolV2Config", "not JSON") from err
    return kept(
        {
            k: v
            for k, v in params.items()
            if k not in _OWN and k not in COMMON and not k.startswith("Tag.")
        }
    )


def _group_for(world: World, b: NlbBalancer, protocol: str, group_id: str, any_port: bool) -> None:
    group = world.nlb.groups.get(group_id)
    if group is None:
        raise not_found("serverGroup", group_id)
    if group.vpc != b.vpc or group.protocol not in CARRIERS[protocol]:
        raise RpcError(
            "IllegalParam.ServerGroupId",
            f"server group {group_id} ({group.protocol}, {group.vpc}) cannot serve a {protocol} "
            f"listener of {b.id} ({b.vpc})",
        )
    if any_port != (group.fields.get("AnyPortEnabled") == "true"):
        raise RpcError(
            "IllegalParam.ServerGroupId", f"{group_id}: AnyPortEnabled must match the listener"
        )


def _space(protocol: str) -> str:
    return "udp" if protocol == "UDP" else "tcp"


def _ports(params: Mapping[str, str]) -> tuple[int, int, int]:
    port = integer(params, "ListenerPort", 0, 65535)
    start = integer(params, "StartPort", 0, 65535) or 0
    end = integer(params, "EndPort", 0, 65535) or 0
    if port is None:
        raise RpcError("MissingParameter", "The input parameter 'ListenerPort' that is mandatory")
    if (port == 0) != bool(start and end) or start > end:
        raise RpcError("IllegalParam.ListenerPort", "a port, or 0 with StartPort <= EndPort")
    return port, start, end


def _taken(world: World, lb_id: str, protocol: str, port: int, start: int) -> bool:
    return any(
        i.lb == lb_id
        and _space(i.protocol) == _space(protocol)
        and (i.port, i.start_port) == (port, start)
        for i in world.nlb.listeners.values()
    )


def _at_rest(item: NlbListener) -> str:
    return "Stopped" if item.status in ("Stopped", "Stopping") else "Running"


def _steady(world: World, item: NlbListener, action: str, transient: str, steady: str) -> str:
    item.status = transient

    def settle(succeeded: bool) -> None:
        if not succeeded and action == "CreateListener":
            world.nlb.listeners.pop(item.id, None)
        item.status = steady

    return start_job(world, action, item.id, settle).id


def create_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = nlb_balancer(world, required(params, "LoadBalancerId"))
    protocol = required(params, "ListenerProtocol")
    if protocol not in PROTOCOLS:
        raise RpcError("IllegalParam.ListenerProtocol", f"ListenerProtocol {protocol!r}")
    port, start, end = _ports(params)
    group_id = required(params, "ServerGroupId")
    _group_for(world, b, protocol, group_id, any_port=port == 0)
    if protocol == "TCPSSL" and not strings(params, "CertificateIds"):
        raise RpcError("MissingParameter", "a TCPSSL listener needs CertificateIds")
    if _taken(world, b.id, protocol, port, start):
        raise RpcError(
            "Conflict.Port", f"{b.id} already listens on {protocol} {port or start}", 409
        )
    item = NlbListener(
        id=world.new_id("lsn"),
        lb=b.id,
        protocol=protocol,
        port=port,
        group=group_id,
        description=params.get("ListenerDescription", ""),
        start_port=start,
        end_port=end,
        fields=_fields(params),
        tags=tags(params),
    )
    world.nlb.listeners[item.id] = item
    job = _steady(world, item, "CreateListener", "Provisioning", "Running")
    return {"ListenerId": item.id, "JobId": job}


def update_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    item = _listener(world, required(params, "ListenerId"))
    b = nlb_balancer(world, item.lb)
    group_id = params.get("ServerGroupId") or item.group
    if group_id != item.group:
        _group_for(world, b, item.protocol, group_id, any_port=item.port == 0)
    fields = _fields(params)
    for name in _LISTS:
        if any(k.startswith(f"{name}.") for k in fields):
            item.fields = {k: v for k, v in item.fields.items() if not k.startswith(f"{name}.")}
    item.fields.update(fields)
    item.group = group_id
    item.description = params.get("ListenerDescription", item.description)
    steady = _at_rest(item)
    return {"JobId": _steady(world, item, "UpdateListenerAttribute", "Configuring", steady)}


def _switch(action: str, transient: str, steady: str) -> Any:
    def handler(world: World, params: Mapping[str, str]) -> dict[str, Any]:
        item = _listener(world, required(params, "ListenerId"))
        return {"JobId": _steady(world, item, action, transient, steady)}

    return handler


def delete_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    item = _listener(world, required(params, "ListenerId"))
    del world.nlb.listeners[item.id]
    return {"JobId": start_job(world, "DeleteListener", item.id).id}


def list_listeners(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    lbs, ids = strings(params, "LoadBalancerIds"), strings(params, "ListenerIds")
    protocol = params.get("ListenerProtocol", "")
    found = [
        i
        for _, i in sorted(world.nlb.listeners.items())
        if (not lbs or i.lb in lbs) and (not ids or i.id in ids) and protocol in ("", i.protocol)
    ]
    where = region(world, params)

    def shown(item: Any) -> dict[str, Any]:
        read_jobs(world, item.id)
        return render_nlb_listener(item, where)

    return token_listing(params, found, "Listeners", shown)


def get_listener_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    item = _listener(world, required(params, "ListenerId"))
    read_jobs(world, item.id)
    return render_nlb_listener(item, region(world, params))


def _certificates(associate: bool) -> Any:
    def handler(world: World, params: Mapping[str, str]) -> dict[str, Any]:
        item = _listener(world, required(params, "ListenerId"))
        if item.protocol != "TCPSSL":
            raise RpcError("OperationDenied.ListenerProtocol", f"{item.id} is no TCPSSL listener")
        have = _list(item, "AdditionalCertificateIds")
        sent = strings(params, "AdditionalCertificateIds")
        kept = (
            have + [c for c in sent if c not in have]
            if associate
            else [c for c in have if c not in sent]
        )
        item.fields = {
            k: v for k, v in item.fields.items() if not k.startswith("AdditionalCertificateIds.")
        }
        item.fields.update({f"AdditionalCertificateIds.{n}": c for n, c in enumerate(kept, 1)})
        action = (
            "Associate" if associate else "Disassociate"
        ) + "AdditionalCertificatesWithListener"
        return {"JobId": _steady(world, item, action, "Configuring", _at_rest(item))}

    return handler


def list_listener_certificates(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    item = _listener(world, required(params, "ListenerId"))
    wanted = params.get("CertType", "")
    certs = [
        {
            "CertificateId": c,
            "CertificateType": kind,
            "IsDefault": kind == "Server" and n == 0,
            "Status": "Associated",
        }
        for kind, names in (
            ("Server", ("CertificateIds", "AdditionalCertificateIds")),
            ("Ca", ("CaCertificateIds",)),
        )
        for n, c in enumerate(c for name in names for c in _list(item, name))
        if wanted in ("", kind)
    ]
    return {
        "Certificates": certs,
        "CertificateIds": [c["CertificateId"] for c in certs],
        "TotalCount": len(certs),
        "MaxResults": len(certs),
        "NextToken": "",
    }


register(
    {
        "CreateListener": create_listener,
        "UpdateListenerAttribute": update_listener,
        "DeleteListener": delete_listener,
        "StartListener": _switch("StartListener", "Starting", "Running"),
        "StopListener": _switch("StopListener", "Stopping", "Stopped"),
        "ListListeners": list_listeners,
        "GetListenerAttribute": get_listener_attribute,
        "AssociateAdditionalCertificatesWithListener": _certificates(associate=True),
        "DisassociateAdditionalCertificatesWithListener": _certificates(associate=False),
        "ListListenerCertificates": list_listener_certificates,
    }
)
