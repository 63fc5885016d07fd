"""Every Service annotation cloud-provider-azure v1.36.5 reads for a load balancer, read once.

:func:`read_annotations` turns a Service into one typed :class:`ServiceAnnotations`; nothing
else in the balancer code looks at ``metadata.annotations``. The keys are upstream's
(``pkg/consts/consts.go`` v1.36.5, the ``ServiceAnnotation*`` constants, and the per-port
patterns ``PortAnnotationPrefixPattern``/``HealthProbeAnnotationPrefixPattern``), and so is
their parsing (``pkg/consts/helpers.go``):

* a switch is on when its value equals ``true`` ignoring case
  (``expectAttributeInSvcAnnotationBeEqualTo``); anything else is off. The internal switch is
  the exception: upstream's ``requiresInternalLoadBalancer`` wants exactly ``true``;
* a number is trimmed and read with ``strconv.ParseInt(v, 10, 32)``, then checked
  (``extractInt32FromString`` and its validators); a value that does not read, or is out of
  range, fails the ensure, as upstream's does.

What kccm does not do is in :data:`REFUSED`: such an annotation fails the Service with an
error naming it (a Warning Event), never a balancer made without it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.cloudprovider.annotations import annotations_of

__all__ = [
    "ADDITIONAL_PUBLIC_IPS",
    "ALLOWED_IP_RANGES",
    "ALLOWED_SERVICE_TAGS",
    "DENY_ALL_EXCEPT_SOURCE_RANGES",
    "DISABLE_FLOATING_IP",
    "DISABLE_NSG_RULE",
    "DISABLE_TCP_RESET",
    "DNS_LABEL_NAME",
    "HA_PORTS",
    "IDLE_TIMEOUT",
    "INTERNAL",
    "INTERNAL_SUBNET",
    "IPV4",
    "LB_MODE",
    "PIP_IP_TAGS",
    "PIP_NAME",
    "PIP_RESOURCE_GROUP",
    "PIP_TAGS",
    "PORT_NO_LB_RULE",
    "PORT_NO_PROBE_RULE",
    "PORT_PROBE",
    "PROBE_INTERVAL",
    "PROBE_NUM",
    "PROBE_PROTOCOL",
    "PROBE_REQUEST_PATH",
    "REFUSED",
    "SOURCE_RANGES",
    "ServiceAnnotations",
    "port_key",
    "read_annotations",
]

_P = "service.beta.kubernetes.io/"
INTERNAL = _P + "azure-load-balancer-internal"
INTERNAL_SUBNET = _P + "azure-load-balancer-internal-subnet"
LB_MODE = _P + "azure-load-balancer-mode"
IPV4 = _P + "azure-load-balancer-ipv4"
PIP_NAME = _P + "azure-pip-name"
DNS_LABEL_NAME = _P + "azure-dns-label-name"
PIP_RESOURCE_GROUP = _P + "azure-load-balancer-resource-group"
PIP_TAGS = _P + "azure-pip-tags"
PIP_IP_TAGS = _P + "azure-pip-ip-tags"
ALLOWED_SERVICE_TAGS = _P + "azure-allowed-service-tags"
ALLOWED_IP_RANGES = _P + "azure-allowed-ip-ranges"
SOURCE_RANGES = _P + "load-balancer-source-ranges"
"""``v1.AnnotationLoadBalancerSourceRangesKey``: read as allowed IP ranges (upstream
``loadbalancer.AllowedIPRanges``)."""
DENY_ALL_EXCEPT_SOURCE_RANGES = _P + "azure-deny-all-except-load-balancer-source-ranges"
IDLE_TIMEOUT = _P + "azure-load-balancer-tcp-idle-timeout"
HA_PORTS = _P + "azure-load-balancer-enable-high-availability-ports"
PROBE_PROTOCOL = _P + "azure-load-balancer-health-probe-protocol"
PROBE_INTERVAL = _P + "azure-load-balancer-health-probe-interval"
PROBE_NUM = _P + "azure-load-balancer-health-probe-num-of-probe"
PROBE_REQUEST_PATH = _P + "azure-load-balancer-health-probe-request-path"
DISABLE_FLOATING_IP = _P + "azure-disable-load-balancer-floating-ip"
DISABLE_NSG_RULE = _P + "azure-disable-load-balancer-nsg-rule"
DISABLE_TCP_RESET = _P + "azure-load-balancer-disable-tcp-reset"
ADDITIONAL_PUBLIC_IPS = _P + "azure-additional-public-ips"

PORT_NO_LB_RULE = _P + "port_{port}_no_lb_rule"
PORT_NO_PROBE_RULE = _P + "port_{port}_no_probe_rule"
PORT_PROBE = _P + "port_{port}_health-probe_{param}"
"""``{param}``: ``protocol``, ``port``, ``interval``, ``num-of-probe``, ``request-path``."""

_DUAL_STACK = "kccm's azure balancer is IPv4 only (no IPv6 or dual-stack Services)"
_PLS = "kccm does not make Private Link Services"
REFUSED: Mapping[str, str] = {
    _P + "azure-load-balancer-ipv6": _DUAL_STACK,
    _P + "azure-pip-name-ipv6": _DUAL_STACK,
    _P + "azure-pip-prefix-id": "kccm does not make public IPs from a public IP prefix",
    _P + "azure-pip-prefix-id-ipv6": _DUAL_STACK,
    _P + "azure-load-balancer-configurations": "kccm makes one balancer per cluster "
    "(multiple standard load balancers are not supported)",
    _P + "azure-pls-create": _PLS,
    _P + "azure-pls-resource-group": _PLS,
    _P + "azure-pls-name": _PLS,
    _P + "azure-pls-ip-configuration-subnet": _PLS,
    _P + "azure-pls-ip-configuration-ip-address-count": _PLS,
    _P + "azure-pls-ip-configuration-ip-address": _PLS,
    _P + "azure-pls-fqdns": _PLS,
    _P + "azure-pls-proxy-protocol": _PLS,
    _P + "azure-pls-visibility": _PLS,
    _P + "azure-pls-auto-approval": _PLS,
}
"""Annotations upstream reads that kccm refuses, with the reason."""


def port_key(pattern: str, port: int, param: str = "") -> str:
    """A per-port annotation key (``PORT_NO_LB_RULE``, ``PORT_PROBE``, ...) for ``port``."""
    return pattern.format(port=port, param=param)


@dataclass(frozen=True)
class ServiceAnnotations:
    """What a Service's annotations ask of its balancer (see the module docstring)."""

    values: Mapping[str, str] = field(default_factory=dict)
    internal: bool = False
    internal_subnet: str | None = None
    ipv4: str = ""
    pip_name: str = ""
    dns_label_name: str | None = None
    pip_resource_group: str = ""
    pip_tags: str | None = None
    pip_ip_tags: str | None = None
    allowed_service_tags: tuple[str, ...] = ()
    deny_all_except_source_ranges: bool = False
    idle_timeout: int = 4
    ha_ports: bool = False
    disable_floating_ip: bool = False
    disable_nsg_rule: bool = False
    disable_tcp_reset: bool = False
    additional_public_ips: tuple[str, ...] = ()

    def switch(self, key: str) -> bool:
        """Upstream ``expectAttributeInSvcAnnotationBeEqualTo(key, "true")``."""
        return self.values.get(key, "").lower() == "true"

    def text(self, key: str) -> str | None:
        """The value as written; None when absent (``GetAttributeValueInSvcAnnotation``)."""
        return self.values.get(key)

    def int32(self, key: str, minimum: int, what: str) -> int | None:
        """``Getint32ValueFromK8sSvcAnnotation`` with a minimum; None when absent."""
        return _int32(key, self.values, minimum=minimum, maximum=None, what=what)


def _error(key: str, value: str, problem: str) -> InvalidServiceConfig:
    return InvalidServiceConfig(key, f"annotation {key}: invalid value {value!r}: {problem}")


def _int32(
    key: str, values: Mapping[str, str], *, minimum: int, maximum: int | None, what: str
) -> int | None:
    """``extractInt32FromString`` (trimmed, base 10, 32 bits) and a range check."""
    if key not in values:
        return None
    raw = values[key]
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit() or not -(2**31) <= int(text) < 2**31:
        raise _error(key, raw, f"{text} value must be a whole number")
    value = int(text)
    if value < minimum or (maximum is not None and value > maximum):
        raise _error(key, raw, what)
    return value


def _tags(text: str | None) -> tuple[str, ...]:
    """``loadbalancer.AllowedServiceTags``: comma-separated, each trimmed."""
    if text is None:
        return ()
    return tuple(item.strip() for item in text.strip().split(","))


def _check_refused(values: Mapping[str, str]) -> None:
    for key, reason in REFUSED.items():
        if key in values:
            raise InvalidServiceConfig(key, f"annotation {key} is not supported: {reason}")


def read_annotations(service: Service, *, lenient: bool = False) -> ServiceAnnotations:
    """The Service's balancer annotations, each read once (see the module docstring).

    Raises :class:`InvalidServiceConfig` for a refused annotation or a number that does not
    read, as upstream fails the ensure for the latter; ``lenient`` (a Service being deleted)
    ignores both."""
    values = {str(key): str(value) for key, value in annotations_of(service).items()}
    if not lenient:
        _check_refused(values)
    switch = ServiceAnnotations(values).switch
    try:
        idle = _int32(
            IDLE_TIMEOUT,
            values,
            minimum=4,
            maximum=100,
            what="idle timeout value must be a whole number representing minutes between 4 and 100",
        )
    except InvalidServiceConfig:
        if not lenient:
            raise
        idle = None
    additional = values.get(ADDITIONAL_PUBLIC_IPS)
    return ServiceAnnotations(
        values=values,
        internal=values.get(INTERNAL) == "true",
        internal_subnet=_subnet(values),
        ipv4=values.get(IPV4, ""),
        pip_name=values.get(PIP_NAME, ""),
        dns_label_name=values.get(DNS_LABEL_NAME),
        pip_resource_group=values.get(PIP_RESOURCE_GROUP, "").strip(),
        pip_tags=values.get(PIP_TAGS),
        pip_ip_tags=values.get(PIP_IP_TAGS),
        allowed_service_tags=_tags(values.get(ALLOWED_SERVICE_TAGS)),
        deny_all_except_source_ranges=switch(DENY_ALL_EXCEPT_SOURCE_RANGES),
        idle_timeout=4 if idle is None else idle,
        ha_ports=switch(HA_PORTS),
        disable_floating_ip=switch(DISABLE_FLOATING_IP),
        disable_nsg_rule=switch(DISABLE_NSG_RULE),
        disable_tcp_reset=switch(DISABLE_TCP_RESET),
        additional_public_ips=_additional(additional, lenient),
    )


def _subnet(values: Mapping[str, str]) -> str | None:
    """Upstream ``getInternalSubnet``: only for an internal Service, and not blank."""
    if values.get(INTERNAL) != "true":
        return None
    subnet = values.get(INTERNAL_SUBNET)
    return subnet if subnet is not None and subnet.strip() else None


def _additional(text: str | None, lenient: bool) -> tuple[str, ...]:
    """``loadbalancer.AdditionalPublicIPs``: comma-separated IP addresses, each checked."""
    if text is None:
        return ()
    found: list[str] = []
    for item in text.strip().split(","):
        try:
            found.append(str(ipaddress.ip_address(item)))
        except ValueError:
            if lenient:
                continue
            raise _error(ADDITIONAL_PUBLIC_IPS, text, f"{item!r} is not an IP address") from None
    return tuple(found)
