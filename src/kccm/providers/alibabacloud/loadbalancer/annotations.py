"""Every ``service.beta.kubernetes.io/alibaba-cloud-loadbalancer-*`` annotation upstream
v2.14.0 reads (``pkg/controller/service/reconcile/annotation/annotations.go``; defaults from
its ``DefaultValue`` and docs/usage.md), with how kccm treats it.

Upstream reads each under the prefix ``service.beta.kubernetes.io/alibaba-cloud-`` and, when
absent, under the legacy ``service.beta.kubernetes.io/alicloud-`` (``AnnotationRequest.Get``);
:func:`value` does the same. ``on``/``off`` switches are compared as text (anything but
``on`` is off), ``true``/``false`` ones likewise with ``true``; integers are Go's
``strconv.Atoi``; lists are comma-separated.

kccm's classic load balancer (:mod:`.clb`) honours the annotations of :data:`SUPPORTED`, its
network load balancer (:mod:`.nlb`) those of :data:`NLB_SUPPORTED` and the shared ones it
reads (``supported``); every other one is ``not yet``: :func:`refused` names each one a Service
carries (with its value), for the Warning Event the balancer records. The table in
docs/providers/alibabacloud-loadbalancer.md is kept equal to :data:`TABLE` by a test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LEGACY_PREFIX",
    "NLB_SUPPORTED",
    "PREFIX",
    "SUPPORTED",
    "TABLE",
    "Annotation",
    "refused",
    "value",
]

PREFIX = "service.beta.kubernetes.io/alibaba-cloud-"
LEGACY_PREFIX = "service.beta.kubernetes.io/alicloud-"

TEXT, ON_OFF, TRUE_FALSE, INT, LIST, PAIRS = (
    "text",
    "on/off",
    "true/false",
    "int",
    "list",
    "k=v list",
)


@dataclass(frozen=True)
class Annotation:
    """One annotation: its suffix after the prefix, upstream's default, how the value is
    read, which balancer reads it and kccm's status."""

    suffix: str
    default: str
    parse: str
    balancer: str
    status: str = "not yet"

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.suffix}"


# what the classic load balancer reads (spec.py: BALANCER_ANNOTATIONS, LISTENER_ANNOTATIONS
# and build_spec; backends.py); a test keeps them equal
SUPPORTED = frozenset(
    {
        *("address-type", "id", "name", "resource-group-id", "additional-resource-tags"),
        *("delete-protection", "modification-protection", "cert-id", "protocol-port"),
        *("idle-timeout", "tls-cipher-policy", "scheduler", "connection-drain"),
        *("connection-drain-timeout", "preserve-lb-on-delete", "vswitch-id", "network-type"),
        *("charge-type", "force-override-listeners", "master-zoneid", "slave-zoneid"),
        *("bandwidth", "spec", "ip-version", "acl-status", "acl-id", "acl-type"),
        *("health-check-switch", "health-check-flag", "health-check-type", "health-check-uri"),
        *("health-check-connect-port", "healthy-threshold", "unhealthy-threshold"),
        *("health-check-interval", "health-check-connect-timeout", "health-check-timeout"),
        *("health-check-domain", "health-check-httpcode", "health-check-method"),
        *("sticky-session", "sticky-session-type", "cookie-timeout", "cookie"),
        *("persistence-timeout", "request-timeout", "established-timeout"),
        *("vgroup-port", "weight", "default-weight", "ignore-weight-update"),
        *("backend-label", "remove-unscheduled-backend", "http2-enabled", "proxy-protocol"),
        *("xforwardedfor-proto", "xforwardedfor-slbport", "xforwardedfor-clientsrcport"),
        *("hostname", "ip", "type", "tunnel-type", "instance-charge-type", "forward-port"),
        *("domain-extensions", "external-ip-type"),
    }
)


# what only the network load balancer reads (nlbspec.py); a test keeps them equal
NLB_SUPPORTED = frozenset(
    {
        *("zone-maps", "security-group-ids", "cross-zone-enabled", "cacert-id", "cacert"),
        *("cps", "preserve-client-ip", "server-group-type", "alpn", "alpn-policy"),
    }
)


def _a(suffix: str, default: str, parse: str, balancer: str = "CLB, NLB") -> Annotation:
    status = "supported" if suffix in SUPPORTED | NLB_SUPPORTED else "not yet"
    return Annotation(f"loadbalancer-{suffix}", default, parse, balancer, status)


TABLE: tuple[Annotation, ...] = (
    # the balancer itself
    _a("address-type", "internet", TEXT),
    _a("id", "", TEXT),
    _a("name", "a<Service UID without dashes>, 32 characters", TEXT),
    _a("resource-group-id", "", TEXT),
    _a("additional-resource-tags", "", PAIRS),
    _a("delete-protection", "on", ON_OFF),
    _a("modification-protection", "ConsoleProtection", TEXT),
    _a("cert-id", "", TEXT),
    _a("protocol-port", "", LIST),
    _a("idle-timeout", "", INT, "CLB"),
    _a("tls-cipher-policy", "", TEXT),
    _a("scheduler", "rr", TEXT),
    _a("connection-drain", "", ON_OFF),
    _a("connection-drain-timeout", "", INT),
    _a("ignore-weight-update", "", ON_OFF),
    _a("preserve-lb-on-delete", "", TRUE_FALSE),
    # classic load balancer
    _a("vswitch-id", "", TEXT),
    _a("network-type", "classic", TEXT, "CLB"),
    _a("charge-type", "paybytraffic", TEXT, "CLB"),
    _a("force-override-listeners", "false", TRUE_FALSE),
    _a("master-zoneid", "", TEXT, "CLB"),
    _a("slave-zoneid", "", TEXT, "CLB"),
    _a("bandwidth", "50", INT, "CLB"),
    _a("spec", "slb.s1.small", TEXT, "CLB"),
    _a("instance-charge-type", "", TEXT, "CLB"),
    _a("ip-version", "ipv4", TEXT),
    _a("external-ip-type", "", TEXT, "CLB"),
    _a("hostname", "", TEXT),
    _a("ip", "", TEXT, "CLB"),
    # listeners
    _a("acl-status", "off", ON_OFF),
    _a("acl-id", "", TEXT),
    _a("acl-type", "", TEXT),
    _a("forward-port", "", LIST, "CLB"),
    _a("http2-enabled", "", ON_OFF, "CLB"),
    _a("health-check-switch", "", ON_OFF),
    _a("health-check-flag", "off", ON_OFF),
    _a("health-check-type", "tcp", TEXT),
    _a("health-check-uri", "", TEXT),
    _a("health-check-connect-port", "", INT),
    _a("healthy-threshold", "3", INT),
    _a("unhealthy-threshold", "3", INT),
    _a("health-check-interval", "2", INT),
    _a("health-check-connect-timeout", "5", INT),
    _a("health-check-timeout", "5", INT, "CLB"),
    _a("health-check-domain", "", TEXT),
    _a("health-check-httpcode", "http_2xx", LIST),
    _a("health-check-method", "", TEXT),
    _a("sticky-session", "off", ON_OFF, "CLB"),
    _a("sticky-session-type", "", TEXT, "CLB"),
    _a("cookie-timeout", "", INT, "CLB"),
    _a("cookie", "", TEXT, "CLB"),
    _a("persistence-timeout", "0", INT, "CLB"),
    _a("vgroup-port", "", LIST, "CLB"),
    _a("xforwardedfor-proto", "", ON_OFF, "CLB"),
    _a("xforwardedfor-slbport", "", ON_OFF, "CLB"),
    _a("xforwardedfor-clientsrcport", "", ON_OFF, "CLB"),
    _a("request-timeout", "", INT, "CLB"),
    _a("established-timeout", "", INT, "CLB"),
    _a("proxy-protocol", "", ON_OFF),
    _a("domain-extensions", "", LIST, "CLB"),
    # backends
    _a("backend-label", "", PAIRS),
    _a("backend-ip-version", "", TEXT, "CLB"),
    _a("remove-unscheduled-backend", "off", ON_OFF),
    _a("weight", "", INT),
    _a("default-weight", "", INT),
    # network load balancer
    _a("zone-maps", "", PAIRS, "NLB"),
    _a("security-group-ids", "", LIST, "NLB"),
    _a("bandwidth-package-id", "", TEXT, "NLB"),
    _a("ipv6-address-type", "", TEXT, "NLB"),
    _a("cross-zone-enabled", "", ON_OFF, "NLB"),
    _a("cacert-id", "", TEXT, "NLB"),
    _a("cacert", "", ON_OFF, "NLB"),
    _a("cps", "", INT, "NLB"),
    _a("preserve-client-ip", "", ON_OFF, "NLB"),
    _a("server-group-type", "", TEXT, "NLB"),
    _a("ppv2-pvl-ep-id-enabled", "", ON_OFF, "NLB"),
    _a("ppv2-pvl-eps-id-enabled", "", ON_OFF, "NLB"),
    _a("ppv2-pvl-vpc-id-enabled", "", ON_OFF, "NLB"),
    _a("alpn", "", ON_OFF, "NLB"),
    _a("alpn-policy", "", TEXT, "NLB"),
    _a("listener-port-range", "", LIST, "NLB"),
    _a("additional-cert-ids", "", LIST, "NLB"),
    # which controller takes the Service (pkg/controller/helper/service_utils.go NeedCLB,
    # NeedNLB): "nlb" with the LoadBalancerTypeAnnotation gate; any tunnel-type: neither
    _a("type", "", TEXT),
    _a("tunnel-type", "", TEXT),
)

_BY_SUFFIX = {a.suffix: a for a in TABLE}


def _annotations(service: Mapping[str, Any]) -> Mapping[str, str]:
    return (service.get("metadata") or {}).get("annotations") or {}


def value(service: Mapping[str, Any], suffix: str) -> str | None:
    """The annotation's value, the legacy prefix's when the current one is absent
    (``AnnotationRequest.Get``); ``None`` when neither is set."""
    annotations = _annotations(service)
    for prefix in (PREFIX, LEGACY_PREFIX):
        if f"{prefix}{suffix}" in annotations:
            return str(annotations[f"{prefix}{suffix}"])
    return None


def refused(service: Mapping[str, Any]) -> list[str]:
    """One line per annotation of the table the Service carries that kccm does not honour
    yet, naming it and its value."""
    lines = []
    for annotation in TABLE:
        found = value(service, annotation.suffix)
        if found is not None and annotation.status != "supported":
            lines.append(
                f"{annotation.name}={found!r}: not supported by kccm's alibabacloud provider yet"
            )
    return lines
