"""What a Service asks of its network load balancer: upstream's NLB "local model"
(``pkg/controller/service/nlbv2``, v2.14.0: ``NLBManager.BuildLocalModel`` and
``setDefaultValueForLoadBalancer`` in ``loadbalancer.go``, ``buildListenerFromServicePort`` and
``nlbListenerProtocol`` in ``listeners.go``, ``BuildLocalModel``,
``setServerGroupAttributeFromAnno``, ``getServerGroupNamedKey`` and ``buildClusterBackends`` in
``server_groups.go``).

Names and tags are upstream's, so kccm adopts the NLBs upstream made: the balancer is named
(and tagged ``kubernetes.do.not.delete``) ``a<UID without dashes>``[:32] and tagged
``ack.aliyun.com=<cluster ID>``; a listener's description is
``k8s.<port>.<protocol>.<service>.<namespace>.<cluster ID>``; a server group is named
``k8s.<node port>.<protocol>.<service>.<namespace>.<cluster ID>`` (its servers described by
that name) and tagged with the balancer's name tag and the cluster tag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import InvalidServiceConfig, Node, Service, default_load_balancer_name
from kccm.providers.alibabacloud.instances import parse_provider_id
from kccm.providers.alibabacloud.loadbalancer.annotations import PREFIX, value
from kccm.providers.alibabacloud.loadbalancer.backends import (
    DEFAULT_WEIGHT,
    eligible_nodes,
    weight_annotation,
)
from kccm.providers.alibabacloud.loadbalancer.nlbapi import Server, ZoneMapping
from kccm.providers.alibabacloud.loadbalancer.spec import CLUSTER_TAG, NAME_TAG, go_int, pairs

__all__ = ["GroupSpec", "ListenerWant", "NlbSpec", "build_nlb_spec", "group_servers", "internal_ip"]

_PROTOCOLS = ("TCP", "UDP", "TCPSSL")
_INTERNAL_IP = "InternalIP"


def _on(service: Service, suffix: str) -> bool | None:
    """An ``on``/``off`` annotation: ``None`` when absent or empty."""
    found = value(service, suffix)
    return None if not found else found.lower() == "on"


def _int(service: Service, suffix: str) -> int | None:
    found = go_int(service, suffix)
    return None if found is None else int(found)


def _list(service: Service, suffix: str) -> list[str]:
    found = value(service, suffix) or ""
    return found.split(",") if found else []


@dataclass
class GroupSpec:
    """One server group a port wants (``ServerGroup`` of the local model)."""

    name: str
    protocol: str
    node_port: int
    type: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    health: dict[str, Any] | None = None
    ignore_weight: bool = False
    weight: int = DEFAULT_WEIGHT
    target: str = ""
    """The port's ``targetPort`` as text (the port when unset): an endpoint's port."""
    port_name: str = ""


@dataclass
class ListenerWant:
    """One listener a port wants (``ListenerAttribute`` of the local model)."""

    port: int
    protocol: str
    description: str
    group: GroupSpec
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass
class NlbSpec:
    """The Service's NLB: what creating it sends and what an update compares."""

    default_name: str
    cluster_id: str
    name: str = ""
    reuse_id: str = ""
    address_type: str = ""
    ip_version: str = ""
    resource_group_id: str = ""
    zones: list[ZoneMapping] = field(default_factory=list)
    security_group_ids: list[str] | None = None
    cross_zone: bool | None = None
    extra_tags: dict[str, str] = field(default_factory=dict)
    preserve_on_delete: bool = False
    force_override: bool = False
    listeners: list[ListenerWant] = field(default_factory=list)

    @property
    def default_tags(self) -> dict[str, str]:
        """``GetDefaultTags``."""
        return {NAME_TAG: self.default_name, CLUSTER_TAG: self.cluster_id}

    @property
    def group_tags(self) -> dict[str, str]:
        """``getServerGroupTag``: how the Service's server groups are found."""
        return self.default_tags

    def create_params(self, vpc_id: str, config_resource_group: str) -> dict[str, Any]:
        """``CreateNLB`` after ``setDefaultValueForLoadBalancer``."""
        params: dict[str, Any] = {
            "AddressType": self.address_type or "internet",
            "LoadBalancerName": self.name or self.default_name,
            "VpcId": vpc_id,
            "ZoneMappings": [z.body() for z in self.zones],
            "Tag": [
                {"Key": k, "Value": v} for k, v in {**self.default_tags, **self.extra_tags}.items()
            ],
            "DeletionProtectionConfig": {"Enabled": True},
            "ModificationProtectionConfig": {
                "Status": "ConsoleProtection",
                "Reason": "managed.by.ack",
            },
        }
        group = self.resource_group_id or config_resource_group
        if group:
            params["ResourceGroupId"] = group
        if self.ip_version:
            params["AddressIpVersion"] = self.ip_version
        return params


def _canonical(text: str, choices: Sequence[str]) -> str:
    """``GetAddressType`` and its kind: the canonical spelling of a known value."""
    return next((c for c in choices if c.lower() == text.lower()), text)


def zone_maps(text: str) -> list[ZoneMapping]:
    """``parseZoneMappings``: ``zone:vswitch[:ipv4[:allocation]],...``."""
    zones = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) < 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-zone-maps",
                f"ZoneMapping format error, expect [zone-a:vsw-id-1,zone-b:vsw-id-2], got {text}",
            )
        extra = [*parts[2:], "", ""]
        zones.append(ZoneMapping(parts[0], parts[1], extra[0], extra[1]))
    return zones


def _protocol(service: Service, port: Mapping[str, Any]) -> str:
    """``nlbListenerProtocol``: the ``protocol-port`` entry for this port (TCP, UDP or
    TCPSSL), else the port's own protocol."""
    own = str(port.get("protocol") or "TCP").upper()
    text = value(service, "loadbalancer-protocol-port") or ""
    for item in text.split(",") if text else ():
        pair = item.split(":")
        if len(pair) < 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-protocol-port",
                "port and protocol format must be like 'https:443' with colon separated. "
                f"got=[{item}]",
            )
        if pair[0].upper() not in _PROTOCOLS:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-protocol-port",
                "port protocol format must be either [TCP|UDP|TCPSSL], protocol not "
                f"supported with [{pair[0]}]",
            )
        if pair[1] == str(port.get("port")):
            return pair[0].upper()
    return own


def _health(service: Service) -> dict[str, Any] | None:
    """``setServerGroupAttributeFromAnno``'s health check: only with ``health-check-flag``."""
    flag = _on(service, "loadbalancer-health-check-flag")
    if flag is None:
        return None
    if not flag:
        return {"HealthCheckEnabled": False}
    check: dict[str, Any] = {"HealthCheckEnabled": True}
    texts = (
        ("health-check-type", "HealthCheckType"),
        ("health-check-domain", "HealthCheckDomain"),
        ("health-check-uri", "HealthCheckUrl"),
        ("health-check-method", "HttpCheckMethod"),
    )
    for suffix, key in texts:
        if value(service, f"loadbalancer-{suffix}"):
            check[key] = value(service, f"loadbalancer-{suffix}")
    ints = (
        ("health-check-connect-port", "HealthCheckConnectPort"),
        ("healthy-threshold", "HealthyThreshold"),
        ("unhealthy-threshold", "UnhealthyThreshold"),
        ("health-check-connect-timeout", "HealthCheckConnectTimeout"),
        ("health-check-interval", "HealthCheckInterval"),
    )
    for suffix, key in ints:
        number = _int(service, f"loadbalancer-{suffix}")
        if number:
            check[key] = number
    codes = _list(service, "loadbalancer-health-check-httpcode")
    if codes:
        check["HealthCheckHttpCode"] = codes
    return check


def _group_attributes(service: Service, config_resource_group: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if value(service, "loadbalancer-scheduler"):
        attributes["Scheduler"] = value(service, "loadbalancer-scheduler")
    drain = _on(service, "loadbalancer-connection-drain")
    if drain is not None:
        attributes["ConnectionDrainEnabled"] = drain
    timeout = _int(service, "loadbalancer-connection-drain-timeout")
    if timeout:
        attributes["ConnectionDrainTimeout"] = timeout
    preserve = _on(service, "loadbalancer-preserve-client-ip")
    if preserve is not None:
        attributes["PreserveClientIpEnabled"] = preserve
    group = value(service, "loadbalancer-resource-group-id") or config_resource_group
    if group:
        attributes["ResourceGroupId"] = group
    return attributes


def _group_type(service: Service) -> str:
    found = value(service, "loadbalancer-server-group-type") or ""
    if found and found.lower() not in ("ip", "instance"):
        raise InvalidServiceConfig(
            f"{PREFIX}loadbalancer-server-group-type",
            f"unsupport server ServerGroupType [{found}]",
        )
    return _canonical(found, ("Ip", "Instance")) if found else ""


def _listener_attributes(service: Service, protocol: str) -> dict[str, Any]:
    """``buildListenerFromServicePort``'s optional fields."""
    attributes: dict[str, Any] = {}
    for suffix, key in (("idle-timeout", "IdleTimeout"), ("cps", "Cps")):
        number = _int(service, f"loadbalancer-{suffix}")
        if number is not None and (number or key == "Cps"):
            attributes[key] = number
    if value(service, "loadbalancer-tls-cipher-policy"):
        attributes["SecurityPolicyId"] = value(service, "loadbalancer-tls-cipher-policy")
    for suffix, key in (("proxy-protocol", "ProxyProtocolEnabled"), ("cacert", "CaEnabled")):
        flag = _on(service, f"loadbalancer-{suffix}")
        if flag is not None:
            attributes[key] = flag
    for suffix, key in (("cert-id", "CertificateIds"), ("cacert-id", "CaCertificateIds")):
        if _list(service, f"loadbalancer-{suffix}"):
            attributes[key] = _list(service, f"loadbalancer-{suffix}")
    if protocol == "TCPSSL":
        alpn = _on(service, "loadbalancer-alpn")
        if alpn is not None:
            attributes["AlpnEnabled"] = alpn
            if alpn and value(service, "loadbalancer-alpn-policy"):
                attributes["AlpnPolicy"] = value(service, "loadbalancer-alpn-policy")
    return attributes


def _listener(
    service: Service, port: Mapping[str, Any], spec: NlbSpec, group_base: GroupSpec, eni: bool
) -> ListenerWant:
    meta = service.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    protocol = _protocol(service, port)
    number, node_port = int(port.get("port") or 0), int(port.get("nodePort") or 0)
    tail = f"{name}.{namespace}.{spec.cluster_id}"
    target = str(port.get("targetPort") or number)
    group = GroupSpec(
        name=f"k8s.{target if eni else node_port}.{protocol}.{tail}",  # getServerGroupNamedKey
        protocol=protocol,
        node_port=node_port,
        type=group_base.type,
        attributes=dict(group_base.attributes),
        health=group_base.health,
        ignore_weight=group_base.ignore_weight,
        weight=group_base.weight,
        target=target,
        port_name=str(port.get("name") or ""),
    )
    return ListenerWant(
        port=number,
        protocol=protocol,
        description=f"k8s.{number}.{protocol}.{tail}",
        group=group,
        attributes=_listener_attributes(service, protocol),
    )


def _balancer(service: Service, cluster_id: str) -> NlbSpec:
    reuse = value(service, "loadbalancer-id") or ""
    spec = NlbSpec(default_load_balancer_name(service), cluster_id, reuse_id=reuse)
    maps = value(service, "loadbalancer-zone-maps") or ""
    if maps:
        spec.zones = zone_maps(maps)
    elif not reuse:
        raise InvalidServiceConfig(
            f"{PREFIX}loadbalancer-zone-maps", "ParameterMissing, zone mappings are required"
        )
    if value(service, "loadbalancer-security-group-ids") is not None:
        spec.security_group_ids = _list(service, "loadbalancer-security-group-ids")
    spec.address_type = _canonical(
        value(service, "loadbalancer-address-type") or "", ("Internet", "Intranet")
    )
    spec.ip_version = _canonical(
        value(service, "loadbalancer-ip-version") or "", ("ipv4", "DualStack")
    )
    spec.resource_group_id = value(service, "loadbalancer-resource-group-id") or ""
    spec.name = value(service, "loadbalancer-name") or ""
    spec.extra_tags = pairs(value(service, "loadbalancer-additional-resource-tags") or "")
    spec.cross_zone = _on(service, "loadbalancer-cross-zone-enabled")
    spec.preserve_on_delete = bool(value(service, "loadbalancer-preserve-lb-on-delete"))
    spec.force_override = value(service, "loadbalancer-force-override-listeners") == "true"
    return spec


def build_nlb_spec(
    service: Service, cluster_id: str, config_resource_group: str = "", eni: bool = False
) -> NlbSpec:
    """The Service's :class:`NlbSpec` (``localModel.Build``; ``eni``: ENI backends, whose
    groups are named by target port); a value upstream refuses is an
    :class:`InvalidServiceConfig` naming the annotation."""
    spec = _balancer(service, cluster_id)
    default = weight_annotation(service, "loadbalancer-default-weight")
    base = GroupSpec(
        name="",
        protocol="",
        node_port=0,
        type=_group_type(service),
        attributes=_group_attributes(service, config_resource_group),
        health=_health(service),
        ignore_weight=(value(service, "loadbalancer-ignore-weight-update") or "").lower() == "on",
        weight=DEFAULT_WEIGHT if default is None else default,
    )
    ports = (service.get("spec") or {}).get("ports") or []
    spec.listeners = [_listener(service, port, spec, base, eni) for port in ports]
    seen: set[tuple[int, str]] = set()
    for listener in spec.listeners:
        key = (listener.port, "UDP" if listener.protocol == "UDP" else "TCP")
        if key in seen:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-protocol-port",
                f"listener port {listener.port} overlaps another listener",
            )
        seen.add(key)
    return spec


def internal_ip(node: Node) -> str:
    """The Node's InternalIP (``GetNodeInternalIP``): an ``Ip`` group's server."""
    for address in (node.get("status") or {}).get("addresses") or ():
        if address.get("type") == _INTERNAL_IP:
            return str(address.get("address") or "")
    name = (node.get("metadata") or {}).get("name")
    raise InvalidServiceConfig(
        f"{PREFIX}loadbalancer-server-group-type",
        f"get node address err: node {name} has no InternalIP",
    )


def group_servers(service: Service, group: GroupSpec, nodes: Sequence[Node]) -> list[Server]:
    """``buildClusterBackends``: one server per eligible Node (ECS instance, or its
    InternalIP for an ``Ip`` group) on the node port, described by the group's name."""
    servers: dict[tuple[str, str], Server] = {}
    for node in eligible_nodes(service, nodes):
        if group.type == "Ip":
            ip = internal_ip(node)
            server = Server(ip, "Ip", group.node_port, group.weight, group.name, ip)
        else:
            instance = parse_provider_id(str(node["spec"]["providerID"]))[1]
            server = Server(instance, "Ecs", group.node_port, group.weight, group.name)
        servers.setdefault((server.server_type, server.server_id), server)
    return [servers[k] for k in sorted(servers)]
