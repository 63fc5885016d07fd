"""What a Service asks of its NLB (``aws-load-balancer-type: nlb``): ports, health checks and
the supported annotations (the Classic ELB's are read in ``classic_spec.py``).

Annotation names and defaults are upstream cloud-provider-aws's; what upstream refuses on an
NLB is refused with a message, what upstream ignores is ignored (``security-groups`` outside
``NLBSecurityGroupMode = Managed``, logged; see docs/providers/aws.md).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import Service
from kccm.cloudprovider.annotations import OnInvalid, int_annotation
from kccm.providers.aws.nlboptions import (  # one-way: nlboptions imports nothing from here
    ACCESS_LOG_BUCKET,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_PREFIX,
    BACKEND_PROTOCOL,
    EIP_ALLOCATIONS,
    PREFIX,
    PRIVATE_IPV4,
    PROXY_PROTOCOL,
    SSL_CERT,
    SSL_POLICY,
    SSL_PORTS,
    TARGET_GROUP_ATTRIBUTES,
    NLBOptions,
    ServiceAnnotationError,
    TLSListener,
    annotation_error,
    key_value_list,
    nlb_options,
    parse_bool,
    tls_listener,
)

__all__ = [
    "ANNOTATION_PREFIX",
    "EXTRA_SECURITY_GROUPS",
    "SECURITY_GROUPS",
    "SUPPORTED",
    "UNSUPPORTED",
    "HealthCheck",
    "LoadBalancerSpec",
    "PortMapping",
    "ServiceAnnotationError",
    "handled_elsewhere",
    "key_value_list",
    "load_balancer_spec",
    "target_group_name",
]

ANNOTATION_PREFIX = PREFIX
"""``service.beta.kubernetes.io/aws-load-balancer-``, spelled once, in ``nlboptions.py``."""
TYPE = ANNOTATION_PREFIX + "type"
INTERNAL = ANNOTATION_PREFIX + "internal"
ADDITIONAL_TAGS = ANNOTATION_PREFIX + "additional-resource-tags"
HC_PROTOCOL = ANNOTATION_PREFIX + "healthcheck-protocol"
HC_PORT = ANNOTATION_PREFIX + "healthcheck-port"
HC_PATH = ANNOTATION_PREFIX + "healthcheck-path"
HC_INTERVAL = ANNOTATION_PREFIX + "healthcheck-interval"
HC_HEALTHY = ANNOTATION_PREFIX + "healthcheck-healthy-threshold"
HC_UNHEALTHY = ANNOTATION_PREFIX + "healthcheck-unhealthy-threshold"
CROSS_ZONE = ANNOTATION_PREFIX + "cross-zone-load-balancing-enabled"
SUBNETS = ANNOTATION_PREFIX + "subnets"
TARGET_NODE_LABELS = ANNOTATION_PREFIX + "target-node-labels"
SECURITY_GROUPS = ANNOTATION_PREFIX + "security-groups"
"""Bring-your-own groups: used in ``NLBSecurityGroupMode = Managed``, otherwise ignored on an
NLB, as upstream's ``ensureNLBSecurityGroup`` (see ``nlbgroups.py``)."""
EXTRA_SECURITY_GROUPS = ANNOTATION_PREFIX + "extra-security-groups"

SUPPORTED = (
    TYPE,
    INTERNAL,
    ADDITIONAL_TAGS,
    HC_PROTOCOL,
    HC_PORT,
    HC_PATH,
    HC_INTERVAL,
    HC_HEALTHY,
    HC_UNHEALTHY,
    CROSS_ZONE,
    SUBNETS,
    TARGET_NODE_LABELS,
    SECURITY_GROUPS,
    SSL_CERT,
    SSL_PORTS,
    SSL_POLICY,
    BACKEND_PROTOCOL,
    EIP_ALLOCATIONS,
    PRIVATE_IPV4,
    PROXY_PROTOCOL,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_BUCKET,
    ACCESS_LOG_PREFIX,
    TARGET_GROUP_ATTRIBUTES,
)
"""Every annotation the provider reads."""
UNSUPPORTED = (EXTRA_SECURITY_GROUPS,)
"""Annotations refused on an NLB, as upstream's ``validateServiceAnnotations``
(``aws_validations.go``) refuses them."""

NLB_TYPES = ("", "nlb")
ELSEWHERE_TYPES = ("external", "nlb-ip")
KUBE_PROXY_HEALTH_PORT = 10256
KUBE_PROXY_HEALTH_PATH = "/healthz"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9]")


@dataclass(frozen=True)
class HealthCheck:
    """A target group's health check (upstream ``healthCheckConfig``)."""

    port: str = "traffic-port"
    path: str = ""
    protocol: str = "TCP"
    interval: int = 30
    healthy: int = 3
    unhealthy: int = 3


@dataclass(frozen=True)
class PortMapping:
    """One listener: frontend port and protocol to the node port (upstream ``nlbPortMapping``).

    ``protocol`` is the target group's (upstream ``TrafficProtocol``); the listener's is
    ``listener_protocol`` (``TLS`` with a certificate, else the same)."""

    port: int
    protocol: str
    node_port: int
    health: HealthCheck
    tls: TLSListener | None = None

    @property
    def listener_protocol(self) -> str:
        return "TLS" if self.tls is not None else self.protocol


@dataclass(frozen=True)
class LoadBalancerSpec:
    namespace: str
    name: str
    mappings: tuple[PortMapping, ...]
    internal: bool = False
    cross_zone: bool = False
    subnets: tuple[str, ...] = ()
    target_labels: Mapping[str, str] = field(default_factory=dict)
    extra_tags: Mapping[str, str] = field(default_factory=dict)
    options: NLBOptions = field(default_factory=NLBOptions)

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def target_group_names(self, cluster_id: str) -> dict[int, str]:
        """Frontend port -> the name of its target group (:func:`target_group_name`)."""
        return {
            m.port: target_group_name(cluster_id, self.namespace, self.name, m)
            for m in self.mappings
        }


def _annotations(service: Service) -> Mapping[str, str]:
    return (service.get("metadata") or {}).get("annotations") or {}


def handled_elsewhere(service: Service) -> bool:
    """``aws-load-balancer-type: external`` or ``nlb-ip``: the AWS Load Balancer Controller's."""
    return _annotations(service).get(TYPE, "") in ELSEWHERE_TYPES


HC_INTERVAL_RANGE = (5, 300)
"""AWS's range for a target group's ``HealthCheckIntervalSeconds``."""
HC_THRESHOLD_RANGE = (2, 10)
"""AWS's range for ``HealthyThresholdCount`` and ``UnhealthyThresholdCount``."""


def _int(
    annotations: Mapping[str, str], key: str, default: int, allowed: tuple[int, int] = (1, 2**31)
) -> int:
    """Upstream ``parseInt32Annotation`` (a present annotation is parsed, an empty one too),
    within AWS's range: checked here, so a bad value is a Warning naming the annotation
    instead of an AWS ValidationError after half an ensure."""
    low, high = allowed
    return int_annotation(
        annotations,
        key,
        default,
        on_invalid=OnInvalid.REFUSE,
        minimum=low,
        maximum=high,
        empty_is_unset=False,
        error=annotation_error,
    )


@dataclass(frozen=True)
class ProbeMode:
    """The cloud config's ClusterServiceLoadBalancerHealthProbe* settings."""

    mode: str = ""
    shared_port: int = 0
    shared_path: str = ""


def health_check(service: Service, probe: ProbeMode = ProbeMode()) -> HealthCheck:
    """Upstream's ``buildNLBHealthCheckConfiguration``."""
    spec = service.get("spec") or {}
    annotations = _annotations(service)
    local = spec.get("externalTrafficPolicy") == "Local"
    if local:
        node_port = int(spec.get("healthCheckNodePort") or 0)
        hc = HealthCheck(str(node_port), KUBE_PROXY_HEALTH_PATH, "HTTP", 10, 2, 2)
    else:
        hc = HealthCheck()
    protocol = annotations.get(HC_PROTOCOL, hc.protocol).upper()
    if protocol not in ("TCP", "HTTP", "HTTPS"):
        raise ServiceAnnotationError(
            f"annotation {HC_PROTOCOL}: {protocol!r} is not TCP, HTTP or HTTPS"
        )
    path = "" if protocol == "TCP" else annotations.get(HC_PATH, hc.path or "/")
    port = annotations.get(HC_PORT, hc.port)
    if probe.mode == "Shared" and not local:
        port = str(probe.shared_port or KUBE_PROXY_HEALTH_PORT)
        path = probe.shared_path or KUBE_PROXY_HEALTH_PATH
        protocol = "HTTP"
    if port != "traffic-port" and not (port.isdigit() and 0 < int(port) < 65536):
        raise ServiceAnnotationError(
            f"annotation {HC_PORT}: {port!r} is not a port or traffic-port"
        )
    return HealthCheck(
        port=port,
        path=path,
        protocol=protocol,
        interval=_int(annotations, HC_INTERVAL, hc.interval, HC_INTERVAL_RANGE),
        healthy=_int(annotations, HC_HEALTHY, hc.healthy, HC_THRESHOLD_RANGE),
        unhealthy=_int(annotations, HC_UNHEALTHY, hc.unhealthy, HC_THRESHOLD_RANGE),
    )


def _mappings(service: Service, hc: HealthCheck) -> tuple[PortMapping, ...]:
    annotations = _annotations(service)
    ports = (service.get("spec") or {}).get("ports") or []
    if not ports:
        raise ServiceAnnotationError("requested load balancer with no ports")
    protocols = {str(p.get("protocol", "TCP")) for p in ports}
    if len(protocols) > 1:
        raise ServiceAnnotationError("mixed protocol is not supported for LoadBalancer")
    mappings = []
    for port in ports:
        protocol = str(port.get("protocol", "TCP"))
        if protocol not in ("TCP", "UDP"):
            raise ServiceAnnotationError(f"Protocol {protocol} not supported by LoadBalancer")
        node_port = int(port.get("nodePort") or 0)
        if not node_port:  # upstream ignores ports without a node port
            continue
        tls = tls_listener(annotations, port)
        target = "TLS" if tls is not None and tls.backend_tls else protocol
        mappings.append(PortMapping(int(port["port"]), target, node_port, hc, tls))
    if not mappings:
        raise ServiceAnnotationError("no port of the Service has a nodePort yet")
    return tuple(mappings)


def load_balancer_spec(service: Service, probe: ProbeMode = ProbeMode()) -> LoadBalancerSpec:
    """Everything the provider needs from a Service; ServiceAnnotationError names the problem."""
    meta: Mapping[str, Any] = service.get("metadata") or {}
    spec: Mapping[str, Any] = service.get("spec") or {}
    annotations = _annotations(service)
    kind = annotations.get(TYPE, "")
    if kind not in NLB_TYPES:
        raise ServiceAnnotationError(
            f"annotation {TYPE}: {kind!r} does not ask for an NLB (nlb does; external and "
            "nlb-ip are the AWS Load Balancer Controller's; any other value, or none, gets a "
            "Classic ELB)"
        )
    if EXTRA_SECURITY_GROUPS in annotations:  # upstream validateServiceAnnotations' words
        raise ServiceAnnotationError(
            f'BYO extra security group annotation "{EXTRA_SECURITY_GROUPS}" is not supported by NLB'
        )
    if spec.get("sessionAffinity", "None") not in ("None", ""):
        raise ServiceAnnotationError(
            f"unsupported load balancer affinity: {spec['sessionAffinity']}"
        )
    if spec.get("loadBalancerIP"):
        raise ServiceAnnotationError("LoadBalancerIP cannot be specified for AWS ELB")
    internal_value = annotations.get(INTERNAL, "")
    return LoadBalancerSpec(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        mappings=_mappings(service, health_check(service, probe)),
        internal=internal_value not in ("", "false"),
        cross_zone=parse_bool(annotations, CROSS_ZONE),
        subnets=tuple(s.strip() for s in annotations.get(SUBNETS, "").split(",") if s.strip()),
        target_labels=key_value_list(annotations.get(TARGET_NODE_LABELS, "")),
        extra_tags=key_value_list(annotations.get(ADDITIONAL_TAGS, "")),
        options=nlb_options(annotations, spec.get("ports") or []),
    )


def target_group_name(cluster_id: str, namespace: str, name: str, mapping: PortMapping) -> str:
    """``k8s-<namespace:8>-<name:8>-<hash:10>``, upstream's ``buildTargetGroupName``: the hash
    covers what a target group cannot change (node port, protocols, health-check protocol and
    interval), so changing any of them makes a new group."""
    hasher = hashlib.sha1(usedforsecurity=False)
    for part in (
        cluster_id,
        namespace,
        name,
        str(mapping.port),
        str(mapping.node_port),
        mapping.protocol,
        "instance",
        mapping.health.protocol,
        str(mapping.health.interval),
    ):
        hasher.update(part.encode())
    ns = _NAME_CHARS.sub("", namespace)[:8]
    svc = _NAME_CHARS.sub("", name)[:8]
    return f"k8s-{ns}-{svc}-{hasher.hexdigest()[:10]}"
