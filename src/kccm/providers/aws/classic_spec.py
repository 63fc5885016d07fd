"""What a Service asks of its Classic ELB, computed as upstream's ``EnsureLoadBalancer`` does
(``pkg/providers/v1/aws.go``: ``buildListener``, the attribute annotations, the health check;
``aws_loadbalancer.go``: ``getExpectedHealthCheck``, ``ValidateHealthCheck``).

Pure: no AWS calls. Every malformed annotation raises :class:`ServiceAnnotationError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider.annotations import OnInvalid, int_annotation
from kccm.providers.aws.annotations import (
    ADDITIONAL_TAGS,
    ANNOTATION_PREFIX,
    CROSS_ZONE,
    HC_HEALTHY,
    HC_INTERVAL,
    HC_PATH,
    HC_PORT,
    HC_PROTOCOL,
    HC_UNHEALTHY,
    INTERNAL,
    SUBNETS,
    TARGET_NODE_LABELS,
    ProbeMode,
    ServiceAnnotationError,
    key_value_list,
)
from kccm.providers.aws.nlboptions import (  # the annotations both kinds read
    ACCESS_LOG_BUCKET,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_PREFIX,
    BACKEND_PROTOCOL,
    PROXY_PROTOCOL,
    SSL_CERT,
    SSL_POLICY,
    SSL_PORTS,
    annotation_error,
    parse_bool,
    upstream_parse_error,
)
from kccm.providers.aws.sgrules import Rule, icmp_mtu, source_ranges

__all__ = [
    "CLASSIC_ANNOTATIONS",
    "Attributes",
    "ClassicHealthCheck",
    "ClassicSpec",
    "Listener",
    "classic_spec",
    "security_group_list",
]

ACCESS_LOG_INTERVAL = ANNOTATION_PREFIX + "access-log-emit-interval"
DRAINING_ENABLED = ANNOTATION_PREFIX + "connection-draining-enabled"
DRAINING_TIMEOUT = ANNOTATION_PREFIX + "connection-draining-timeout"
IDLE_TIMEOUT = ANNOTATION_PREFIX + "connection-idle-timeout"
SECURITY_GROUPS = ANNOTATION_PREFIX + "security-groups"
EXTRA_SECURITY_GROUPS = ANNOTATION_PREFIX + "extra-security-groups"
HC_TIMEOUT = ANNOTATION_PREFIX + "healthcheck-timeout"

CLASSIC_ANNOTATIONS = (
    SSL_CERT,
    SSL_PORTS,
    SSL_POLICY,
    BACKEND_PROTOCOL,
    PROXY_PROTOCOL,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_INTERVAL,
    ACCESS_LOG_BUCKET,
    ACCESS_LOG_PREFIX,
    DRAINING_ENABLED,
    DRAINING_TIMEOUT,
    IDLE_TIMEOUT,
    SECURITY_GROUPS,
    EXTRA_SECURITY_GROUPS,
    HC_TIMEOUT,
)
"""The annotations the Classic ELB reads besides the shared ones of annotations.py (the NLB
reads some of them too, in nlboptions.py; docs/providers/aws.md has one table for both)."""

BACKEND_TO_FRONTEND = {"https": "https", "http": "https", "ssl": "ssl", "tcp": "ssl"}
"""Upstream ``backendProtocolMapping``: the listener protocol for a TLS port."""
KUBE_PROXY_HEALTH_PORT = 10256
KUBE_PROXY_HEALTH_PATH = "/healthz"


@dataclass(frozen=True)
class Listener:
    """A Classic ELB listener (upstream ``buildListener``); protocols lower-case as sent."""

    port: int
    protocol: str
    instance_port: int
    instance_protocol: str
    certificate: str = ""

    def api(self) -> dict[str, Any]:
        listener: dict[str, Any] = {
            "Protocol": self.protocol,
            "LoadBalancerPort": self.port,
            "InstanceProtocol": self.instance_protocol,
            "InstancePort": self.instance_port,
        }
        if self.certificate:
            listener["SSLCertificateId"] = self.certificate
        return listener

    def matches(self, actual: Mapping[str, Any]) -> bool:
        """Upstream ``elbListenersAreEqual``: protocols and certificate case-insensitive."""
        return (
            str(actual.get("Protocol", "")).lower() == self.protocol.lower()
            and str(actual.get("InstanceProtocol", "")).lower() == self.instance_protocol.lower()
            and int(actual.get("InstancePort", 0)) == self.instance_port
            and int(actual.get("LoadBalancerPort", 0)) == self.port
            and str(actual.get("SSLCertificateId") or "").lower() == self.certificate.lower()
        )


@dataclass(frozen=True)
class ClassicHealthCheck:
    """Upstream ``getExpectedHealthCheck``: target ``PROTO:port[path]`` and the counts."""

    target: str
    healthy: int = 2
    unhealthy: int = 6
    timeout: int = 5
    interval: int = 10

    def api(self) -> dict[str, Any]:
        return {
            "Target": self.target,
            "HealthyThreshold": self.healthy,
            "UnhealthyThreshold": self.unhealthy,
            "Timeout": self.timeout,
            "Interval": self.interval,
        }

    def matches(self, actual: Mapping[str, Any]) -> bool:
        protocol, _, rest = str(actual.get("Target", "")).partition(":")
        wanted_protocol, _, wanted_rest = self.target.partition(":")
        return (
            (protocol.upper(), rest) == (wanted_protocol.upper(), wanted_rest)
            and int(actual.get("HealthyThreshold", 0)) == self.healthy
            and int(actual.get("UnhealthyThreshold", 0)) == self.unhealthy
            and int(actual.get("Timeout", 0)) == self.timeout
            and int(actual.get("Interval", 0)) == self.interval
        )


@dataclass(frozen=True)
class Attributes:
    """The balancer attributes upstream always sets (defaults overridden by annotations)."""

    access_log: bool = False
    emit_interval: int | None = None
    bucket: str = ""
    prefix: str = ""
    draining: bool = False
    draining_timeout: int | None = None
    idle_timeout: int = 60
    cross_zone: bool = False

    def api(self) -> dict[str, Any]:
        access: dict[str, Any] = {"Enabled": self.access_log}
        if self.emit_interval is not None:
            access["EmitInterval"] = self.emit_interval
        if self.bucket:
            access["S3BucketName"] = self.bucket
        if self.prefix:
            access["S3BucketPrefix"] = self.prefix
        draining: dict[str, Any] = {"Enabled": self.draining}
        if self.draining_timeout is not None:
            draining["Timeout"] = self.draining_timeout
        return {
            "AccessLog": access,
            "ConnectionDraining": draining,
            "ConnectionSettings": {"IdleTimeout": self.idle_timeout},
            "CrossZoneLoadBalancing": {"Enabled": self.cross_zone},
        }

    def matches(self, actual: Mapping[str, Any]) -> bool:
        """Every value this asks for is already set (upstream compares whole structs, which
        differ on every call where AWS fills in defaults: a write each time; kccm writes
        only a real difference)."""
        wanted = self.api()
        if not self.access_log:  # AWS keeps no bucket, prefix or interval for a disabled log
            wanted["AccessLog"] = {"Enabled": False}
        return all(
            _normal((actual.get(section) or {}).get(key)) == _normal(value)
            for section, values in wanted.items()
            for key, value in values.items()
        )


def _normal(value: Any) -> Any:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


@dataclass(frozen=True)
class ClassicSpec:
    namespace: str
    name: str
    listeners: tuple[Listener, ...]
    health: ClassicHealthCheck
    attributes: Attributes
    ingress: frozenset[Rule]
    """The rules of the balancer's own security group (ports and ICMP from source ranges)."""
    internal: bool = False
    subnets: tuple[str, ...] = ()
    target_labels: Mapping[str, str] = field(default_factory=dict)
    extra_tags: Mapping[str, str] = field(default_factory=dict)
    proxy_protocol: bool = False
    ssl_policy: str | None = None
    security_groups: tuple[str, ...] = ()
    extra_security_groups: tuple[str, ...] = ()

    @property
    def service_key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _annotations(service: Mapping[str, Any]) -> Mapping[str, str]:
    return (service.get("metadata") or {}).get("annotations") or {}


def _int32(annotations: Mapping[str, str], key: str, default: int | None) -> int | None:
    """Upstream ``strconv.ParseInt(v, 10, 32)`` of a non-empty annotation (aws.go
    ``EnsureLoadBalancer`` at 63ec440c, lines 2586-2650), refused in upstream's words."""
    return int_annotation(
        annotations,
        key,
        default,
        on_invalid=OnInvalid.REFUSE,
        minimum=-(2**31),
        maximum=2**31 - 1,
        error=upstream_parse_error(annotations),
    )


def _hc_int(annotations: Mapping[str, str], key: str, default: int) -> int:
    """Upstream ``getExpectedHealthCheck``: a present annotation is parsed, an empty one too."""
    return int_annotation(
        annotations,
        key,
        default,
        on_invalid=OnInvalid.REFUSE,
        empty_is_unset=False,
        error=annotation_error,
    )


def security_group_list(text: str) -> tuple[str, ...]:
    """Upstream ``getSGListFromAnnotation``: comma-separated, trimmed, empties dropped."""
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _ssl_ports(text: str) -> tuple[set[int], set[str]] | None:
    """Upstream ``getPortSets``: ``None`` (every port) for "" and ``*``."""
    if text in ("", "*"):
        return None
    numbers, names = set(), set()
    for item in text.split(","):
        if item.isdigit():
            numbers.add(int(item))
        else:
            names.add(item)
    return numbers, names


def build_listener(port: Mapping[str, Any], annotations: Mapping[str, str]) -> Listener:
    """Upstream ``buildListener``."""
    lb_port, node_port = int(port["port"]), int(port.get("nodePort") or 0)
    name = str(port.get("name", "")).lower()
    protocol = str(port.get("protocol", "TCP")).lower()
    instance_protocol = protocol
    cert = annotations.get(SSL_CERT, "")
    backend = annotations.get(BACKEND_PROTOCOL, "")
    ssl_ports = _ssl_ports(annotations.get(SSL_PORTS, ""))
    if cert and (ssl_ports is None or lb_port in ssl_ports[0] or name in ssl_ports[1]):
        if backend == "":
            protocol, instance_protocol = "ssl", "tcp"
        elif backend in BACKEND_TO_FRONTEND:
            protocol, instance_protocol = BACKEND_TO_FRONTEND[backend], backend
        else:
            raise ServiceAnnotationError(
                f"Invalid backend protocol {backend} for {cert} in {BACKEND_PROTOCOL}"
            )
        return Listener(lb_port, protocol, node_port, instance_protocol, cert)
    if backend == "http":
        protocol = instance_protocol = "http"
    return Listener(lb_port, protocol, node_port, instance_protocol)


def _listeners(service: Mapping[str, Any], annotations: Mapping[str, str]) -> tuple[Listener, ...]:
    ports = (service.get("spec") or {}).get("ports") or []
    if not ports:
        raise ServiceAnnotationError("requested load balancer with no ports")
    if len({str(p.get("protocol", "TCP")) for p in ports}) > 1:
        raise ServiceAnnotationError("mixed protocol is not supported for LoadBalancer")
    listeners = []
    for port in ports:
        protocol = str(port.get("protocol", "TCP"))
        if protocol != "TCP":  # upstream checkProtocol: a Classic ELB carries TCP only
            raise ServiceAnnotationError(f"Protocol {protocol} not supported by LoadBalancer")
        if port.get("nodePort"):  # upstream ignores a port without a node port
            listeners.append(build_listener(port, annotations))
    if not listeners:
        raise ServiceAnnotationError("no port of the Service has a nodePort yet")
    return tuple(listeners)


def health_check(
    service: Mapping[str, Any],
    listeners: tuple[Listener, ...],
    probe: ProbeMode,
) -> ClassicHealthCheck:
    """The health-check part of upstream's ``EnsureLoadBalancer`` with
    ``ensureLoadBalancerHealthCheck`` and ``getExpectedHealthCheck``."""
    annotations = _annotations(service)
    spec = service.get("spec") or {}
    port = listeners[0].instance_port  # "We only configure a TCP health-check on the first port"
    path = ""
    local_port = int(spec.get("healthCheckNodePort") or 0)
    if spec.get("externalTrafficPolicy") == "Local" and local_port:
        protocol, path = "HTTP", KUBE_PROXY_HEALTH_PATH
        if annotations.get(HC_PORT) != "traffic-port":
            port = local_port
    else:
        backend = annotations.get(BACKEND_PROTOCOL, "").lower()
        protocol = "SSL" if backend in ("https", "ssl") else "TCP"
        if probe.mode == "Shared":
            protocol = "HTTP"
            path = probe.shared_path or KUBE_PROXY_HEALTH_PATH
            port = probe.shared_port or KUBE_PROXY_HEALTH_PORT
    protocol = annotations.get(HC_PROTOCOL, protocol)
    port_text = annotations.get(HC_PORT, "traffic-port")
    if port_text != "traffic-port":
        port = _hc_int(annotations, HC_PORT, port)
    if protocol.upper() in ("HTTP", "HTTPS"):
        path = annotations.get(HC_PATH, "") or path or "/"
    else:
        path = ""
    check = ClassicHealthCheck(
        target=f"{protocol}:{port}{path}",
        healthy=_hc_int(annotations, HC_HEALTHY, 2),
        unhealthy=_hc_int(annotations, HC_UNHEALTHY, 6),
        timeout=_hc_int(annotations, HC_TIMEOUT, 5),
        interval=_hc_int(annotations, HC_INTERVAL, 10),
    )
    _validate(check)
    return check


def _validate(check: ClassicHealthCheck) -> None:
    """Upstream ``ValidateHealthCheck`` (the SDK v1 rules)."""
    problems = [
        f"{what} must be at least {least}"
        for what, value, least in (
            ("HealthyThreshold", check.healthy, 2),
            ("Interval", check.interval, 5),
            ("Timeout", check.timeout, 2),
            ("UnhealthyThreshold", check.unhealthy, 2),
        )
        if value < least
    ]
    if problems:
        raise ServiceAnnotationError(
            "some of the load balancer health check parameters are invalid: " + "; ".join(problems)
        )


def attributes(annotations: Mapping[str, str]) -> Attributes:
    """The attribute annotations, parsed as upstream parses them."""
    return Attributes(
        access_log=parse_bool(annotations, ACCESS_LOG_ENABLED),
        emit_interval=_int32(annotations, ACCESS_LOG_INTERVAL, None),
        bucket=annotations.get(ACCESS_LOG_BUCKET, ""),
        prefix=annotations.get(ACCESS_LOG_PREFIX, ""),
        draining=parse_bool(annotations, DRAINING_ENABLED),
        draining_timeout=_int32(annotations, DRAINING_TIMEOUT, None),
        idle_timeout=_int32(annotations, IDLE_TIMEOUT, 60) or 0,
        cross_zone=parse_bool(annotations, CROSS_ZONE),
    )


def _ingress(service: Mapping[str, Any]) -> frozenset[Rule]:
    """The balancer group's rules: every Service port (upstream takes them all, node port or
    not) and ICMP type 3 code 4, from each source range."""
    try:
        ranges = source_ranges(service)
    except ValueError as err:
        raise ServiceAnnotationError(str(err)) from None
    rules = {
        Rule(str(p.get("protocol", "TCP")).lower(), int(p["port"]), int(p["port"]), cidr=cidr)
        for p in (service.get("spec") or {}).get("ports") or ()
        for cidr in ranges
    }
    return frozenset(rules | icmp_mtu(ranges))


def classic_spec(service: Mapping[str, Any], probe: ProbeMode = ProbeMode()) -> ClassicSpec:  # noqa: B008
    """Everything the Classic ELB code needs from a Service."""
    meta: Mapping[str, Any] = service.get("metadata") or {}
    spec: Mapping[str, Any] = service.get("spec") or {}
    annotations = _annotations(service)
    if spec.get("sessionAffinity", "None") not in ("None", ""):
        raise ServiceAnnotationError(
            f"unsupported load balancer affinity: {spec['sessionAffinity']}"
        )
    listeners = _listeners(service, annotations)
    if spec.get("loadBalancerIP"):
        raise ServiceAnnotationError("LoadBalancerIP cannot be specified for AWS ELB")
    proxy = annotations.get(PROXY_PROTOCOL, "")
    if proxy not in ("", "*"):
        raise ServiceAnnotationError(
            f'annotation "{PROXY_PROTOCOL}"="{proxy}" detected, but the only value supported '
            "currently is '*'"
        )
    return ClassicSpec(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        listeners=listeners,
        health=health_check(service, listeners, probe),
        attributes=attributes(annotations),
        ingress=_ingress(service),
        internal=annotations.get(INTERNAL, "") not in ("", "false"),
        subnets=tuple(s.strip() for s in annotations.get(SUBNETS, "").split(",") if s.strip()),
        target_labels=key_value_list(annotations.get(TARGET_NODE_LABELS, "")),
        extra_tags=key_value_list(annotations.get(ADDITIONAL_TAGS, "")),
        proxy_protocol=proxy == "*",
        ssl_policy=annotations.get(SSL_POLICY),
        security_groups=security_group_list(annotations.get(SECURITY_GROUPS, "")),
        extra_security_groups=security_group_list(annotations.get(EXTRA_SECURITY_GROUPS, "")),
    )
