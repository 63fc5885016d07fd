"""What a Service asks of its classic load balancer: upstream's "local model"
(``pkg/controller/service/clbv1``: ``LoadBalancerManager.BuildLocalModel`` and
``setModelDefaultValue`` in ``loadbalancer.go``, ``buildListenerFromServicePort``,
``protocol``, ``setDefaultValueForListener`` in ``listeners.go``, ``getVGroupNamedKey``,
``buildClusterBackends`` in ``vgroups.go``; v2.14.0).

Names and tags are upstream's, so kccm finds and adopts the balancers upstream made:
the balancer is named (and tagged ``kubernetes.do.not.delete``) ``a<UID without dashes>``[:32]
and tagged ``ack.aliyun.com=<cluster ID>``; listener descriptions are
``k8s/<port>/<service>/<namespace>/<cluster ID>``; vServer group names (and their backends'
descriptions) ``k8s/<node port>/<service>/<namespace>/<cluster ID>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import InvalidServiceConfig, Service, default_load_balancer_name
from kccm.providers.alibabacloud.loadbalancer.annotations import PREFIX, value

__all__ = [
    "CLUSTER_TAG",
    "NAME_TAG",
    "REUSE_TAG",
    "BalancerSpec",
    "ListenerSpec",
    "build_spec",
    "go_int",
    "pairs",
]

NAME_TAG = "kubernetes.do.not.delete"  # helper.TAGKEY
REUSE_TAG = "kubernetes.reused.by.user"  # helper.REUSEKEY
CLUSTER_TAG = "ack.aliyun.com"  # util.ClusterTagKey
BACKEND_TYPE = "service.beta.kubernetes.io/backend-type"  # helper.BackendType
LISTENER_BANDWIDTH = "-1"  # listeners.go DefaultListenerBandwidth
_PROTOCOLS = ("tcp", "udp", "http", "https")
_GO_INT = re.compile(r"[+-]?[0-9]+")  # strconv.Atoi: no spaces, no underscores

# annotation suffix -> (listener parameter, protocols it applies to, integer?)
_L4, _L7, _ALL = ("tcp", "udp"), ("http", "https"), _PROTOCOLS
LISTENER_ANNOTATIONS: tuple[tuple[str, str, tuple[str, ...], bool], ...] = (
    ("loadbalancer-scheduler", "Scheduler", _ALL, False),
    ("loadbalancer-acl-status", "AclStatus", _ALL, False),
    ("loadbalancer-acl-id", "AclId", _ALL, False),
    ("loadbalancer-acl-type", "AclType", _ALL, False),
    ("loadbalancer-persistence-timeout", "PersistenceTimeout", ("tcp",), True),
    ("loadbalancer-established-timeout", "EstablishedTimeout", ("tcp",), True),
    ("loadbalancer-connection-drain", "ConnectionDrain", _L4, False),
    ("loadbalancer-connection-drain-timeout", "ConnectionDrainTimeout", _L4, True),
    ("loadbalancer-health-check-switch", "HealthCheckSwitch", _L4, False),
    ("loadbalancer-health-check-flag", "HealthCheck", _L7, False),
    ("loadbalancer-health-check-type", "HealthCheckType", ("tcp",), False),
    ("loadbalancer-health-check-uri", "HealthCheckURI", ("tcp", "http", "https"), False),
    ("loadbalancer-health-check-connect-port", "HealthCheckConnectPort", _ALL, True),
    ("loadbalancer-healthy-threshold", "HealthyThreshold", _ALL, True),
    ("loadbalancer-unhealthy-threshold", "UnhealthyThreshold", _ALL, True),
    ("loadbalancer-health-check-interval", "HealthCheckInterval", _ALL, True),
    ("loadbalancer-health-check-connect-timeout", "HealthCheckConnectTimeout", _L4, True),
    ("loadbalancer-health-check-timeout", "HealthCheckTimeout", _L7, True),
    ("loadbalancer-health-check-domain", "HealthCheckDomain", ("tcp", "http", "https"), False),
    ("loadbalancer-health-check-httpcode", "HealthCheckHttpCode", ("tcp", "http", "https"), False),
    ("loadbalancer-health-check-method", "HealthCheckMethod", _L7, False),
    ("loadbalancer-sticky-session", "StickySession", _L7, False),
    ("loadbalancer-sticky-session-type", "StickySessionType", _L7, False),
    ("loadbalancer-cookie", "Cookie", _L7, False),
    ("loadbalancer-cookie-timeout", "CookieTimeout", _L7, True),
    ("loadbalancer-idle-timeout", "IdleTimeout", _L7, True),
    ("loadbalancer-request-timeout", "RequestTimeout", _L7, True),
    ("loadbalancer-cert-id", "ServerCertificateId", ("https",), False),
    ("loadbalancer-tls-cipher-policy", "TLSCipherPolicy", ("https",), False),
    ("loadbalancer-http2-enabled", "EnableHttp2", ("https",), False),
    ("loadbalancer-xforwardedfor-proto", "XForwardedFor_proto", _L7, False),
    ("loadbalancer-xforwardedfor-slbport", "XForwardedFor_SLBPORT", _L7, False),
    ("loadbalancer-xforwardedfor-clientsrcport", "XForwardedFor_ClientSrcPort", _L7, False),
    ("loadbalancer-proxy-protocol", "ProxyProtocolV2Enabled", _L4, False),
)

# annotation suffix -> CreateLoadBalancer parameter (BuildLocalModel / setRequest)
BALANCER_ANNOTATIONS: tuple[tuple[str, str], ...] = (
    ("loadbalancer-address-type", "AddressType"),
    ("loadbalancer-charge-type", "InternetChargeType"),
    ("loadbalancer-bandwidth", "Bandwidth"),
    ("loadbalancer-spec", "LoadBalancerSpec"),
    ("loadbalancer-vswitch-id", "VSwitchId"),
    ("loadbalancer-master-zoneid", "MasterZoneId"),
    ("loadbalancer-slave-zoneid", "SlaveZoneId"),
    ("loadbalancer-resource-group-id", "ResourceGroupId"),
    ("loadbalancer-ip-version", "AddressIPVersion"),
    ("loadbalancer-delete-protection", "DeleteProtection"),
    ("loadbalancer-modification-protection", "ModificationProtectionStatus"),
    ("loadbalancer-network-type", "NetworkType"),
    ("loadbalancer-ip", "Address"),
    ("loadbalancer-instance-charge-type", "InstanceChargeType"),
)


@dataclass
class ListenerSpec:
    """One Service port's listener: ``params`` are what the Service sets (``ListenerPort``,
    ``Description`` and the annotations; ``VServerGroupId`` added once the group is known),
    compared with the listener's and set when they differ; ``defaults``
    (``setDefaultValueForListener``) are sent only when the listener is created."""

    port: int
    protocol: str
    vgroup_name: str
    node_port: int
    params: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    forward: int = 0
    """An HTTP port's redirect target (``forward-port``), 0 for none."""
    domains: dict[str, str] | None = None
    """An HTTPS port's ``{domain: certificate ID}`` (``domain-extensions``); ``None`` when the
    Service does not have the annotation (the listener's are then left alone)."""
    target: str = ""
    """The port's ``targetPort`` as text (a number or a port name; the port when unset)."""
    port_name: str = ""
    """The Service port's name (an endpoint's port is found by it for a named ``targetPort``)."""


@dataclass
class BalancerSpec:
    """The Service's balancer as upstream's local model has it."""

    default_name: str
    cluster_id: str
    reuse_id: str = ""
    force_override: bool = False
    preserve_on_delete: bool = False
    name: str = ""
    attributes: dict[str, str] = field(default_factory=dict)
    extra_tags: dict[str, str] = field(default_factory=dict)
    listeners: list[ListenerSpec] = field(default_factory=list)
    members_from: str = "nodes"
    """``nodes`` (ECS members, every Node), ``local`` (ECS members, the Nodes running a ready
    endpoint) or ``eni`` (the ready endpoints' ENIs): upstream's ``TrafficPolicy``."""

    @property
    def default_tags(self) -> dict[str, str]:
        """``GetDefaultTags``."""
        return {NAME_TAG: self.default_name, CLUSTER_TAG: self.cluster_id}

    def create_params(
        self, vpc_id: str, config_vswitch: str, resource_group: str
    ) -> dict[str, str]:
        """``setModelDefaultValue`` + ``setRequest``: the ``CreateLoadBalancer`` parameters."""
        params = {k: v for k, v in self.attributes.items() if v}
        params.setdefault("AddressType", "internet")
        params.setdefault("DeleteProtection", "on")
        if "ModificationProtectionStatus" not in params:
            params["ModificationProtectionStatus"] = "ConsoleProtection"
            params["ModificationProtectionReason"] = "managed.by.ack"
        params["LoadBalancerName"] = self.name or self.default_name
        charge = params.get("InstanceChargeType", "")
        if charge.lower() == "paybyspec":
            params.setdefault("LoadBalancerSpec", "slb.s1.small")
        elif charge.lower() in ("", "paybyclcu"):
            params["InstanceChargeType"] = "PayByCLCU"
        network = params.pop("NetworkType", "")
        if params["AddressType"] == "intranet":
            params["VpcId"] = vpc_id
            if network != "classic" and "VSwitchId" not in params and config_vswitch:
                params["VSwitchId"] = config_vswitch.split(",")[0].split(":")[-1]
        if network == "classic":
            params.pop("VSwitchId", None)
        if resource_group and "ResourceGroupId" not in params:
            params["ResourceGroupId"] = resource_group
        tags = {**self.default_tags, **self.extra_tags}
        for i, (key, val) in enumerate(tags.items(), start=1):
            params[f"Tag.{i}.Key"] = key
            params[f"Tag.{i}.Value"] = val
        return params


def go_int(service: Service, suffix: str) -> str | None:
    found = value(service, suffix)
    if found is None or found == "":
        return None
    if not _GO_INT.fullmatch(found):
        raise InvalidServiceConfig(
            f"{PREFIX}{suffix}", f"{PREFIX}{suffix} must be an integer, got {found!r}"
        )
    return str(int(found))


def pairs(text: str) -> dict[str, str]:
    """``GetLoadBalancerAdditionalTags``: ``k=v,k2=v2`` (``k`` and ``k=`` give empty values)."""
    tags: dict[str, str] = {}
    for item in text.strip().split(","):
        parts = item.strip().split("=")
        if parts[0]:
            tags[parts[0]] = parts[1] if len(parts) >= 2 else ""
    return tags


def _protocol(service: Service, port: Mapping[str, Any]) -> str:
    """``protocol``: the ``protocol-port`` entry for this port, else the port's own."""
    own = str(port.get("protocol") or "TCP").lower()
    text = value(service, "loadbalancer-protocol-port") or ""
    if not text:
        return own
    for item in text.split(","):
        pair = item.split(":")
        if len(pair) < 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-protocol-port",
                f"port and protocol format must be like 'https:443' with colon separated. "
                f"got={pair}",
            )
        if pair[0] not in _PROTOCOLS:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-protocol-port",
                f"port protocol format must be either [http|https|tcp|udp], "
                f"protocol not supported wit [{pair[0]}]",
            )
        if pair[1] == str(port.get("port")):
            return pair[0]
    return own


def _listener(
    service: Service, port: Mapping[str, Any], cluster_id: str, eni: bool
) -> ListenerSpec:
    meta = service.get("metadata") or {}
    where = f"{meta.get('name')}/{meta.get('namespace')}/{cluster_id}"
    number, node_port = int(port.get("port") or 0), int(port.get("nodePort") or 0)
    target = str(port.get("targetPort") or number)
    protocol = _protocol(service, port)
    params = {"ListenerPort": str(number), "Description": f"k8s/{number}/{where}"}
    for suffix, name, protocols, integer in LISTENER_ANNOTATIONS:
        if protocol not in protocols:
            continue
        found = go_int(service, suffix) if integer else value(service, suffix)
        if found and name == "ProxyProtocolV2Enabled":
            found = "true" if found == "on" else "false"
        if found:
            params[name] = found
    defaults = {"Scheduler": "rr"}
    if protocol != "http":
        defaults["Bandwidth"] = LISTENER_BANDWIDTH
    if protocol in _L7:
        defaults.update(HealthCheck="off", StickySession="off")
    forward = _forward_port(service, number) if protocol == "http" else 0
    group = f"k8s/{target if eni else node_port}/{where}"  # getVGroupNamedKey
    listener = ListenerSpec(number, protocol, group, node_port, params, defaults, forward)
    listener.target, listener.port_name = target, str(port.get("name") or "")
    if protocol == "https":
        listener.domains = _domains(service)
    return listener


def _domains(service: Service) -> dict[str, str] | None:
    """``parseDomainExtensionsAnnotation``: ``domain1:cert1,domain2:cert2``."""
    text = value(service, "loadbalancer-domain-extensions")
    if text is None:
        return None
    domains: dict[str, str] = {}
    for item in text.split(",") if text else ():
        pair = item.strip().split(":")
        if len(pair) != 2:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-domain-extensions", f"invalid domain extension {item}"
            )
        domains[pair[0]] = pair[1]
    return domains


def _forward_port(service: Service, port: int) -> int:
    """``forwardPort``: ``80:443,88:6443``; this port's target, 0 for none."""
    text = value(service, "loadbalancer-forward-port")
    if text is None:
        return 0
    key = f"{PREFIX}loadbalancer-forward-port"
    for item in text.split(","):
        pair = item.split(":")
        if len(pair) != 2:
            raise InvalidServiceConfig(
                key, f"forward port format error: {text}, expect 80:443,88:6443"
            )
        if pair[0] == str(port):
            if not _GO_INT.fullmatch(pair[1]):
                raise InvalidServiceConfig(key, f"forward port is not an integer, {pair[1]}")
            return int(pair[1])
    return 0


def build_spec(service: Service, cluster_id: str, *, eni: bool = False) -> BalancerSpec:
    """The Service's :class:`BalancerSpec` (``eni``: its groups are named by target port);
    raises :class:`~kccm.cloudprovider.InvalidServiceConfig` where upstream's build fails."""
    spec = BalancerSpec(default_load_balancer_name(service), cluster_id)
    spec.reuse_id = value(service, "loadbalancer-id") or ""
    spec.force_override = value(service, "loadbalancer-force-override-listeners") == "true"
    spec.preserve_on_delete = bool(value(service, "loadbalancer-preserve-lb-on-delete"))
    spec.name = value(service, "loadbalancer-name") or ""
    for suffix, name in BALANCER_ANNOTATIONS:
        found = go_int(service, suffix) if name == "Bandwidth" else value(service, suffix)
        if found:
            spec.attributes[name] = found
    spec.extra_tags = pairs(value(service, "loadbalancer-additional-resource-tags") or "")
    ports = (service.get("spec") or {}).get("ports") or []
    spec.listeners = [_listener(service, port, cluster_id, eni) for port in ports]
    return spec


def eni_backends(service: Service, config_backend_type: str) -> bool:
    """``IsENIBackendType``: the Service's ``backend-type`` annotation, else the config's."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    if annotations.get(BACKEND_TYPE):
        return bool(annotations[BACKEND_TYPE] == "eni")
    return config_backend_type == "eni"
