"""A Service's probes and load-balancing rules as ARM JSON, as upstream builds them
(cloud-provider-azure v1.36.5 ``azure_loadbalancer.go`` ``getExpectedLBRules``,
``getExpectedLoadBalancingRulePropertiesForPort``, ``azure_loadbalancer_healthprobe.go``
``buildHealthProbeRulesForPort`` and ``getHealthProbeConfigProbeIntervalAndNumOfProbe``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.providers.azure.loadbalancer import annotations as A
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations, port_key
from kccm.providers.azure.loadbalancer.names import SHARED_PROBE, LBSettings, rule_name

__all__ = ["Expected", "Json", "expected_rules", "shared_probe"]

Json = dict[str, Any]
"""An ARM resource (or sub-resource) body."""

_TRANSPORT = {"TCP": "Tcp", "UDP": "Udp", "SCTP": "All"}
"""``getProtocolsFromKubernetesProtocol``."""


@dataclass(frozen=True)
class Expected:
    """The probes and rules one Service wants on its balancer."""

    probes: tuple[Json, ...]
    rules: tuple[Json, ...]


@dataclass(frozen=True)
class _Target:
    lb_name: str
    frontend_id: str
    pool_id: str


def _ports(service: Service) -> Sequence[Mapping[str, Any]]:
    return tuple((service.get("spec") or {}).get("ports") or ())


def _local(service: Service) -> bool:
    spec = service.get("spec") or {}
    return bool(spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local")


def shared_probe(settings: LBSettings) -> Json:
    """``buildClusterServiceSharedProbe``."""
    props = {
        "protocol": "Http",
        "port": settings.shared_probe_port,
        "requestPath": settings.shared_probe_path,
        "intervalInSeconds": 5,
        "probeThreshold": 2,
    }
    return {"name": SHARED_PROBE, "properties": props}


def _probe_timing(ann: ServiceAnnotations, port: int) -> tuple[int, int]:
    """Interval (at least 5, default 5) and threshold (at least 2, default 2), the port's
    annotation before the Service-wide one; their product must stay under 120."""
    threshold = ann.int32(
        port_key(A.PORT_PROBE, port, "num-of-probe"), 2, "the minimum value of num-of-probe is 2"
    )
    if threshold is None:
        threshold = ann.int32(A.PROBE_NUM, 2, "the minimum value of num-of-probe is 2")
    interval = ann.int32(
        port_key(A.PORT_PROBE, port, "interval"), 5, "the minimum value of interval is 5"
    )
    if interval is None:
        interval = ann.int32(A.PROBE_INTERVAL, 5, "the minimum value of interval is 5")
    threshold = 2 if threshold is None else threshold
    interval = 5 if interval is None else interval
    if interval * threshold >= 120:
        raise InvalidServiceConfig(
            A.PROBE_INTERVAL,
            "total probe should be less than 120, please adjust interval and number of probe "
            "accordingly",
        )
    return interval, threshold


def _node_health_probe(service: Service, ann: ServiceAnnotations, name: str) -> Json:
    """The ``externalTrafficPolicy: Local`` probe: HTTP ``/healthz`` on healthCheckNodePort."""
    port = int((service.get("spec") or {}).get("healthCheckNodePort") or 0)
    interval, threshold = _probe_timing(ann, port)
    props = {
        "requestPath": "/healthz",
        "protocol": "Http",
        "port": port,
        "intervalInSeconds": interval,
        "probeThreshold": threshold,
    }
    return {"name": name, "properties": props}


def _probe_port(service: Service, ann: ServiceAnnotations, port: Mapping[str, Any]) -> int | None:
    """The ``port_<n>_health-probe_port`` annotation as a probe port, None when absent: a
    port name or number of the Service is its nodePort, another number is itself."""
    key = port_key(A.PORT_PROBE, int(port["port"]), "port")
    text = ann.text(key)
    if text is None:
        return None
    ports = _ports(service)
    for item in ports:
        if str(item.get("name", "")).lower() == text.lower():
            return int(item.get("nodePort") or 0)
    if not text.isdigit() or int(text) > 65535:
        raise InvalidServiceConfig(key, f"annotation {key}: port {text} not found in service")
    for item in ports:
        if int(item.get("port") or 0) == int(text):
            return int(item.get("nodePort") or 0)
    return int(text)


def _probe_protocol(ann: ServiceAnnotations, port: Mapping[str, Any], standard: bool) -> str:
    number = int(port["port"])
    protocol = ann.text(port_key(A.PORT_PROBE, number, "protocol"))
    if protocol is None:
        protocol = port.get("appProtocol")
    if protocol is None:
        protocol = ann.text(A.PROBE_PROTOCOL)
    chosen = (protocol if protocol is not None else "Tcp").strip().lower()
    if chosen == "https":
        return "Https" if standard else "Tcp"
    return "Http" if chosen == "http" else "Tcp"


def _port_probe(
    service: Service,
    ann: ServiceAnnotations,
    port: Mapping[str, Any],
    name: str,
    *,
    node_probe: Json | None,
    standard: bool,
) -> Json | None:
    """``buildHealthProbeRulesForPort`` (UDP and SCTP ports have none)."""
    if port.get("protocol", "TCP") in ("UDP", "SCTP"):
        return None
    probe_port = _probe_port(service, ann, port)
    if probe_port is None and node_probe is not None:
        return None
    number = int(port["port"])
    props: Json = {"port": probe_port if probe_port is not None else int(port.get("nodePort") or 0)}
    props["protocol"] = _probe_protocol(ann, port, standard)
    if props["protocol"] in ("Http", "Https"):
        path = ann.text(port_key(A.PORT_PROBE, number, "request-path"))
        if path is None:
            path = ann.text(A.PROBE_REQUEST_PATH)
        props["requestPath"] = "/" if path is None else path
    props["intervalInSeconds"], props["probeThreshold"] = _probe_timing(ann, number)
    return {"name": name, "properties": props}


def _rule_props(
    service: Service,
    ann: ServiceAnnotations,
    settings: LBSettings,
    target: _Target,
    port: Mapping[str, Any],
    transport: str,
) -> Json:
    """``getExpectedLoadBalancingRulePropertiesForPort``."""
    spec = service.get("spec") or {}
    number = int(port.get("port") or 0)
    props: Json = {
        "protocol": transport,
        "frontendPort": number,
        "backendPort": number,
        "disableOutboundSnat": settings.disable_outbound_snat,
        "enableFloatingIP": True,
        "loadDistribution": "SourceIP" if spec.get("sessionAffinity") == "ClientIP" else "Default",
        "frontendIPConfiguration": {"id": target.frontend_id},
        "backendAddressPool": {"id": target.pool_id},
        "idleTimeoutInMinutes": ann.idle_timeout,
    }
    if transport == "Tcp" and settings.standard:
        props["enableTcpReset"] = not ann.disable_tcp_reset
    return props


def expected_rules(
    service: Service,
    ann: ServiceAnnotations,
    settings: LBSettings,
    *,
    lb_name: str,
    frontend_id: str,
    pool_id: str,
) -> Expected:
    """The probes and rules ``service`` wants (``getExpectedLBRules``, IPv4)."""
    target = _Target(lb_name, frontend_id, pool_id)
    node_probe = None
    if _local(service):
        hc_port = int((service.get("spec") or {}).get("healthCheckNodePort") or 0)
        name = rule_name(service, "TCP", hc_port, ann.internal_subnet)
        node_probe = _node_health_probe(service, ann, name)
    shared = settings.shared_probe and not _local(service)
    if shared:
        node_probe = shared_probe(settings)
    if ann.internal and settings.standard and ann.ha_ports:
        return _ha_rules(service, ann, settings, target, node_probe)
    probes: list[Json] = []
    rules: list[Json] = []
    node_probe_added = False
    for port in _ports(service):
        number = int(port.get("port") or 0)
        protocol = str(port.get("protocol") or "TCP")
        name = rule_name(service, protocol, number, ann.internal_subnet)
        if ann.switch(port_key(A.PORT_NO_LB_RULE, number)):
            continue
        if protocol == "SCTP" and not (settings.standard and ann.internal):
            raise InvalidServiceConfig(
                "spec.ports", "SCTP is only supported on standard loadbalancer in internal mode"
            )
        if protocol not in _TRANSPORT:
            raise InvalidServiceConfig(
                "spec.ports", "only TCP, UDP and SCTP are supported for Azure LoadBalancers"
            )
        props = _rule_props(service, ann, settings, target, port, _TRANSPORT[protocol])
        if not ann.switch(port_key(A.PORT_NO_PROBE_RULE, number)):
            probe = None
            if not shared:
                probe = _port_probe(
                    service, ann, port, name, node_probe=node_probe, standard=settings.standard
                )
            if probe is not None:
                props["probe"] = {"id": settings.lb_child_id(lb_name, "probes", probe["name"])}
                probes.append(probe)
            elif node_probe is not None:
                props["probe"] = {"id": settings.lb_child_id(lb_name, "probes", node_probe["name"])}
                if not node_probe_added:
                    probes.append(node_probe)
                    node_probe_added = True
        if ann.disable_floating_ip:
            props["backendPort"] = int(port.get("nodePort") or 0)
            props["enableFloatingIP"] = False
        rules.append({"name": name, "properties": props})
    return Expected(tuple(probes), tuple(rules))


def _ha_rules(
    service: Service,
    ann: ServiceAnnotations,
    settings: LBSettings,
    target: _Target,
    node_probe: Json | None,
) -> Expected:
    """High-availability ports: one rule for every port and protocol, named after the first
    port (``getloadbalancerHAmodeRuleName``, ``getExpectedHAModeLoadBalancingRuleProperties``)."""
    ports = _ports(service)
    first: Mapping[str, Any] = ports[0] if ports else {"port": 0, "protocol": "TCP"}
    name = rule_name(
        service,
        str(first.get("protocol") or "TCP"),
        int(first.get("port") or 0),
        ann.internal_subnet,
    )
    props = _rule_props(service, ann, settings, target, {"port": 0}, "All")
    props["enableTcpReset"] = not ann.disable_tcp_reset
    probe = node_probe
    if probe is None:
        for port in ports:
            probe = _port_probe(service, ann, port, name, node_probe=None, standard=True)
            if probe is not None:
                break
    if probe is None:
        return Expected((), ({"name": name, "properties": props},))
    props["probe"] = {"id": settings.lb_child_id(target.lb_name, "probes", probe["name"])}
    return Expected((probe,), ({"name": name, "properties": props},))
