"""What the local provider reads from Kubernetes objects, and the ``load_balancers`` row a
Service asks for (:func:`desired_load_balancer`): ports with nodePorts, backends (the nodes'
InternalIPs), the health check the config's ``health-check-mode`` selects, source ranges and
session affinity."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    InstanceMetadata,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerIPMode,
    LoadBalancerStatus,
    Node,
    NodeAddress,
    PortStatus,
    QuotaExceeded,
    Service,
    default_load_balancer_name,
)
from kccm.cloudprovider.annotations import OnInvalid, annotations_of, bool_annotation
from kccm.cloudprovider.nodes import node_name
from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord

__all__ = [
    "ANNOTATION_RETAIN_IP",
    "ANNOTATION_SOURCE_RANGES",
    "HEALTHZ",
    "KUBE_PROXY_HEALTH_PORT",
    "SERVED_PROTOCOLS",
    "LocalInvalidService",
    "LocalLoadBalancerError",
    "LocalPoolExhausted",
    "backends_of",
    "desired_load_balancer",
    "instance_metadata_of",
    "meta_of",
    "node_addresses_of",
    "retains_ip",
    "service_key_of",
    "spec_of",
    "status_of",
]

ANNOTATION_RETAIN_IP = "local.kccm.io/retain-ip"
ANNOTATION_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"
KUBE_PROXY_HEALTH_PORT = 10256
HEALTHZ = "/healthz"


class LocalLoadBalancerError(CloudProviderError):
    """A Service the local provider cannot serve (the message ends up in a Warning event)."""


class LocalInvalidService(LocalLoadBalancerError, InvalidServiceConfig):
    """The Service's ``key`` (a spec field or an annotation) asks for what the local provider
    cannot do."""

    def __init__(self, key: str, message: str) -> None:
        InvalidServiceConfig.__init__(self, key, message)


class LocalPoolExhausted(LocalLoadBalancerError, QuotaExceeded):
    """Every address of the VIP pool is claimed (the local cloud's quota)."""


# -- reading Kubernetes objects --------------------------------------------------------------


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def service_key_of(service: Service) -> str:
    meta = meta_of(service)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _annotation(service: Service, key: str) -> str:
    return str((meta_of(service).get("annotations") or {}).get(key, ""))


def retains_ip(service: Service) -> bool:
    """``local.kccm.io/retain-ip`` (Go ``ParseBool``, default false); any other value fails
    the call with the annotation named, so it never reads as "release" by accident."""
    return bool_annotation(
        annotations_of(service),
        ANNOTATION_RETAIN_IP,
        False,
        on_invalid=OnInvalid.REFUSE,
        error=LocalInvalidService,
    )


def node_addresses_of(node: Node) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(a.get("type", "")), str(a.get("address", "")))
        for a in (node.get("status") or {}).get("addresses") or ()
    )


def _internal_ip(node: Node) -> str | None:
    return next((addr for kind, addr in node_addresses_of(node) if kind == "InternalIP"), None)


# -- the desired load balancer -----------------------------------------------------------------


SERVED_PROTOCOLS = ("TCP", "UDP")


def _ports(service: Service) -> tuple[dict[str, Any], ...]:
    ports = tuple(
        {
            "name": str(port.get("name", "")),
            "protocol": str(port.get("protocol", "TCP")),
            "port": int(port.get("port", 0)),
            "node_port": int(port.get("nodePort", 0) or 0),
        }
        for port in spec_of(service).get("ports") or ()
    )
    for port in ports:
        _check_servable(service, port)
    return ports


def _check_servable(service: Service, port: Mapping[str, Any]) -> None:
    """The data plane proxies TCP and UDP to nodePorts: anything else would get a VIP (and an
    "Ensured" event) that nothing serves, so the ensure fails with the reason instead."""
    shown = f"port {port['name'] or port['port']} ({port['port']}/{port['protocol']})"
    if port["protocol"] not in SERVED_PROTOCOLS:
        raise LocalInvalidService(
            "spec.ports",
            f"{shown}: the local data plane serves TCP and UDP only, not {port['protocol']}; "
            "no load balancer is created for this Service",
        )
    if port["node_port"] <= 0:
        why = (
            " (spec.allocateLoadBalancerNodePorts is false)"
            if spec_of(service).get("allocateLoadBalancerNodePorts") is False
            else ""
        )
        raise LocalInvalidService(
            "spec.ports",
            f"{shown} has no nodePort{why}: the local data plane forwards to nodePorts, so "
            "no load balancer is created for this Service",
        )


def backends_of(nodes: Sequence[Node]) -> tuple[dict[str, str], ...]:
    """Every node with an InternalIP, by name (nodes without one cannot be reached)."""
    found = ((node_name(node), _internal_ip(node)) for node in nodes)
    return tuple({"node": name, "address": address} for name, address in sorted(found) if address)


def _health(service: Service, mode: str) -> dict[str, Any]:
    if mode == "tcp":
        return {"mode": "tcp", "port": 0, "path": ""}  # port 0: each listener's node_port
    spec = spec_of(service)
    if spec.get("externalTrafficPolicy") == "Local" and spec.get("healthCheckNodePort"):
        return {"mode": "node-port", "port": int(spec["healthCheckNodePort"]), "path": HEALTHZ}
    return {"mode": "kube-proxy", "port": KUBE_PROXY_HEALTH_PORT, "path": HEALTHZ}


def _source_ranges(service: Service) -> tuple[str, ...]:
    ranges = list(spec_of(service).get("loadBalancerSourceRanges") or ())
    if not ranges:
        ranges = [r for r in _annotation(service, ANNOTATION_SOURCE_RANGES).split(",") if r]
    cleaned = [r.strip() for r in ranges if r.strip()] or ["0.0.0.0/0"]
    bad = [r for r in cleaned if not _is_cidr(r)]
    if bad:
        raise LocalInvalidService(
            "spec.loadBalancerSourceRanges", f"invalid loadBalancerSourceRanges: {', '.join(bad)}"
        )
    return tuple(str(ipaddress.ip_network(r, strict=False)) for r in cleaned)


def _is_cidr(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def desired_load_balancer(
    service: Service,
    nodes: Sequence[Node],
    *,
    health_check_mode: str = "kube-proxy",
    backends: Sequence[Mapping[str, Any]] | None = None,
) -> LoadBalancerRecord:
    """The ``load_balancers`` row for ``service`` (``vip`` is filled in by the store);
    ``backends``: :func:`backends_of` ``nodes`` when the caller has them already."""
    return LoadBalancerRecord(
        name=default_load_balancer_name(service),
        service=service_key_of(service),
        service_uid=str(meta_of(service).get("uid", "")),
        vip="",
        ports=_ports(service),
        backends=tuple(backends) if backends is not None else backends_of(nodes),
        health=_health(service, health_check_mode),
        source_ranges=_source_ranges(service),
        session_affinity=str(spec_of(service).get("sessionAffinity") or "None"),
    )


def instance_metadata_of(instance: InstanceRecord) -> InstanceMetadata:
    return InstanceMetadata(
        provider_id=instance.provider_id,
        instance_type=instance.instance_type,
        node_addresses=tuple(NodeAddress(t, a) for t, a in instance.addresses),
        zone=instance.zone,
        region=instance.region,
    )


def status_of(record: LoadBalancerRecord) -> LoadBalancerStatus:
    ports = tuple(
        PortStatus(port=int(p["port"]), protocol=str(p["protocol"])) for p in record.ports
    )
    ingress = LoadBalancerIngress(ip=record.vip, ip_mode=LoadBalancerIPMode.PROXY, ports=ports)
    return LoadBalancerStatus(ingress=(ingress,))
