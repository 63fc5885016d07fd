"""SLB listeners (TCP, UDP, HTTP, HTTPS), the HTTPS listeners' domain extensions and the
members' health.

A new listener is ``stopped`` until ``StartLoadBalancerListener``; TCP, HTTP and HTTPS share one
port space and UDP has its own (``ListenerAlreadyExists``). ``DescribeLoadBalancerListeners``
(``LoadBalancerId.N``, paged by ``NextToken``/``MaxResults``) gives each listener's own fields
at the top and the rest in its protocol's ``<PROTOCOL>ListenerConfig``, with the defaults the
API reference states for what was never sent (TCP: health check on, ``tcp``, 2 s interval,
5 s timeout, 3/3 thresholds, 900 s idle; HTTP(S): health check off, ``X-Forwarded-For`` on,
15 s idle, 60 s request timeout). The TCP and UDP create calls spell the interval
``healthCheckInterval`` (the Go SDK's ``CreateLoadBalancerTCPListenerRequest``); it reads back
as ``HealthCheckInterval``. A listener's vServer group must be one of its balancer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.rpc import ACTIONS, COMMON, RpcError, page, repeated, required
from kccm.emulators.alibabacloud.slb import VERSION, balancer
from kccm.emulators.alibabacloud.slbmodel import Balancer, DomainExtension, Listener
from kccm.emulators.alibabacloud.world import World

__all__ = ["listener", "render_listener"]

PROTOCOLS = ("tcp", "udp", "http", "https")
SCHEDULERS = ("wrr", "rr", "wlc", "sch", "tch", "qch")
_NOT_FIELDS = COMMON | {"RegionId", "LoadBalancerId", "ListenerPort", "VServerGroup"}
_TOP = {"VServerGroupId", "Scheduler", "Bandwidth", "Description", "AclId", "AclStatus", "AclType"}
_INTS = {
    "Bandwidth",
    "BackendServerPort",
    "HealthCheckInterval",
    "HealthCheckConnectPort",
    "HealthCheckConnectTimeout",
    "HealthCheckTimeout",
    "HealthyThreshold",
    "UnhealthyThreshold",
    "PersistenceTimeout",
    "EstablishedTimeout",
    "ConnectionDrainTimeout",
    "CookieTimeout",
    "ForwardPort",
    "IdleTimeout",
    "RequestTimeout",
    "MaxConnection",
}
_CHECKS = {"HealthyThreshold": "3", "UnhealthyThreshold": "3", "HealthCheckInterval": "2"}
_HTTP = {
    **_CHECKS,
    "HealthCheck": "off",
    "HealthCheckTimeout": "5",
    "StickySession": "off",
    "XForwardedFor": "on",
    "XForwardedFor_SLBIP": "off",
    "XForwardedFor_SLBID": "off",
    "XForwardedFor_proto": "off",
    "XForwardedFor_SLBPORT": "off",
    "XForwardedFor_ClientSrcPort": "off",
    "Gzip": "on",
    "IdleTimeout": "15",
    "RequestTimeout": "60",
}
DEFAULTS: dict[str, dict[str, str]] = {
    "tcp": {
        **_CHECKS,
        "HealthCheck": "on",
        "HealthCheckType": "tcp",
        "HealthCheckConnectTimeout": "5",
        "PersistenceTimeout": "0",
        "EstablishedTimeout": "900",
        "ConnectionDrain": "off",
    },
    "udp": {**_CHECKS, "HealthCheck": "on", "HealthCheckConnectTimeout": "5"},
    "http": {**_HTTP, "ListenerForward": "off"},
    "https": {**_HTTP, "EnableHttp2": "on", "TLSCipherPolicy": "tls_cipher_policy_1_0"},
}


def _typed(name: str, value: str) -> Any:
    if name in _INTS and value.lstrip("-").isdigit():
        return int(value)
    return value


def render_listener(lb_id: str, item: Listener) -> dict[str, Any]:
    fields = {"Scheduler": "wrr", "Bandwidth": "-1", "Description": "", "AclStatus": "off"}
    fields.update(item.fields)
    top = {k: _typed(k, v) for k, v in fields.items() if k in _TOP}
    config = {**DEFAULTS[item.protocol], **{k: v for k, v in fields.items() if k not in _TOP}}
    return {
        "LoadBalancerId": lb_id,
        "ListenerPort": item.port,
        "ListenerProtocol": item.protocol,
        "Status": item.status,
        **top,
        f"{item.protocol.upper()}ListenerConfig": {k: _typed(k, v) for k, v in config.items()},
    }


def _port(params: Mapping[str, str]) -> int:
    text = required(params, "ListenerPort")
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise RpcError("InvalidParameter.ListenerPort", f"ListenerPort {text!r} is not 1-65535")
    return int(text)


def listener(b: Balancer, port: int, protocol: str = "") -> Listener:
    found = [v for (p, proto), v in b.listeners.items() if p == port and protocol in ("", proto)]
    if len(found) != 1:
        what = f"{port}/{protocol}" if protocol else str(port)
        raise RpcError(
            "InvalidParameter" if found else "ListenerNotFound",
            f"The specified listener {what} of {b.id} does not exist or is ambiguous.",
        )
    return found[0]


def _fields(world: World, b: Balancer, protocol: str, params: Mapping[str, str]) -> dict[str, str]:
    fields = {k: v for k, v in params.items() if k not in _NOT_FIELDS}
    if "healthCheckInterval" in fields:
        fields["HealthCheckInterval"] = fields.pop("healthCheckInterval")
    if fields.get("Scheduler", "wrr") not in SCHEDULERS:
        raise RpcError("InvalidParameter.Scheduler", f"Scheduler {fields['Scheduler']!r}")
    bandwidth = fields.get("Bandwidth", "-1")
    if bandwidth != "-1" and not (bandwidth.isdigit() and 1 <= int(bandwidth) <= 5120):
        raise RpcError("InvalidParameter.Bandwidth", f"Bandwidth {bandwidth!r}")
    group = fields.get("VServerGroupId")
    if group and getattr(world.slb.vgroups.get(group), "lb", "") != b.id:
        raise RpcError("InvalidParameter.VServerGroupId", f"{group} is no vServer group of {b.id}")
    return fields


def _space(protocol: str) -> str:
    return "udp" if protocol == "udp" else "tcp"


def create_listener(world: World, params: Mapping[str, str], protocol: str) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    port = _port(params)
    if any(p == port and _space(proto) == _space(protocol) for p, proto in b.listeners):
        raise RpcError("ListenerAlreadyExists", f"The listener {port} of {b.id} already exists.")
    if protocol == "https":
        required(params, "ServerCertificateId")
    b.listeners[(port, protocol)] = Listener(port, protocol, _fields(world, b, protocol, params))
    return {}


def set_listener(world: World, params: Mapping[str, str], protocol: str) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    item = listener(b, _port(params), protocol)
    item.fields.update(_fields(world, b, protocol, params))
    return {}


def _listener_call(world: World, params: Mapping[str, str]) -> tuple[Balancer, Listener]:
    b = balancer(world, required(params, "LoadBalancerId"))
    protocol = params.get("ListenerProtocol", "")
    if protocol and protocol not in PROTOCOLS:
        raise RpcError("InvalidParameter.ListenerProtocol", f"ListenerProtocol {protocol!r}")
    return b, listener(b, _port(params), protocol)


def start_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    _listener_call(world, params)[1].status = "running"
    return {}


def stop_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    _listener_call(world, params)[1].status = "stopped"
    return {}


def delete_listener(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b, item = _listener_call(world, params)
    del b.listeners[(item.port, item.protocol)]
    for gone in [k for k, d in world.slb.domains.items() if (d.lb, d.port) == (b.id, item.port)]:
        del world.slb.domains[gone]
    return {}


def describe_listeners(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    required(params, "RegionId")
    ids = repeated(params, "LoadBalancerId")
    protocol, port = params.get("ListenerProtocol", ""), params.get("ListenerPort", "")
    found = [
        render_listener(lb_id, item)
        for lb_id in ids
        for (p, proto), item in sorted(balancer(world, lb_id).listeners.items())
        if protocol in ("", proto) and port in ("", str(p))
    ]
    chunk, following = page(params, found, 20)
    return {
        "Listeners": chunk,
        "NextToken": following,
        "TotalCount": len(found),
        "MaxResults": len(chunk),
    }


def _health(world: World, b: Balancer, item: Listener) -> list[dict[str, Any]]:
    group = world.slb.vgroups.get(item.fields.get("VServerGroupId", ""))
    members = group.members if group is not None else []
    return [
        {
            "ListenerPort": item.port,
            "Protocol": item.protocol,
            "ServerId": m.server_id,
            "ServerIp": m.server_ip,
            "Port": m.port,
            "ServerHealthStatus": (
                world.slb.health.get(m.server_id, "normal")
                if item.status == "running"
                else "unavailable"
            ),
        }
        for m in members
    ]


def describe_health_status(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    port = params.get("ListenerPort", "")
    items = [
        entry
        for (p, _), item in sorted(b.listeners.items())
        if port in ("", str(p))
        for entry in _health(world, b, item)
    ]
    return {"BackendServers": {"BackendServer": items}}


def _domain(world: World, params: Mapping[str, str]) -> DomainExtension:
    extension_id = required(params, "DomainExtensionId")
    found = world.slb.domains.get(extension_id)
    if found is None:
        raise RpcError(
            "InvalidParameter.DomainExtensionId", f"domain extension {extension_id} not found"
        )
    return found


def describe_domain_extensions(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    port = _port(params)
    items = [
        {"DomainExtensionId": d.id, "Domain": d.domain, "ServerCertificateId": d.cert}
        for _, d in sorted(world.slb.domains.items())
        if (d.lb, d.port) == (b.id, port) and params.get("DomainExtensionId") in (None, "", d.id)
    ]
    return {"DomainExtensions": {"DomainExtension": items}}


def create_domain_extension(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    port = _port(params)
    listener(b, port, "https")
    domain = required(params, "Domain")
    if any((d.lb, d.port, d.domain) == (b.id, port, domain) for d in world.slb.domains.values()):
        raise RpcError("DomainExtensionAlreadyExists", f"{domain} is already on {b.id}:{port}")
    made = DomainExtension(
        world.new_id("de"), b.id, port, domain, required(params, "ServerCertificateId")
    )
    world.slb.domains[made.id] = made
    return {"DomainExtensionId": made.id, "ListenerPort": port}


def set_domain_extension(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    _domain(world, params).cert = required(params, "ServerCertificateId")
    return {}


def delete_domain_extension(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    del world.slb.domains[_domain(world, params).id]
    return {}


def _register() -> None:
    for protocol in PROTOCOLS:
        name = protocol.upper()

        def create(w: World, p: Mapping[str, str], proto: str = protocol) -> dict[str, Any]:
            return create_listener(w, p, proto)

        def update(w: World, p: Mapping[str, str], proto: str = protocol) -> dict[str, Any]:
            return set_listener(w, p, proto)

        ACTIONS[(VERSION, f"CreateLoadBalancer{name}Listener")] = create
        ACTIONS[(VERSION, f"SetLoadBalancer{name}ListenerAttribute")] = update
    for action, handler in {
        "StartLoadBalancerListener": start_listener,
        "StopLoadBalancerListener": stop_listener,
        "DeleteLoadBalancerListener": delete_listener,
        "DescribeLoadBalancerListeners": describe_listeners,
        "DescribeHealthStatus": describe_health_status,
        "DescribeDomainExtensions": describe_domain_extensions,
        "CreateDomainExtension": create_domain_extension,
        "SetDomainExtensionAttribute": set_domain_extension,
        "DeleteDomainExtension": delete_domain_extension,
    }.items():
        ACTIONS[(VERSION, action)] = handler


_register()
