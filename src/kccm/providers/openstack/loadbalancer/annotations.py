"""The Service annotations OCCM reads for a load balancer, read in one place:
:func:`read_annotations` turns a Service's annotations into one typed
:class:`ServiceAnnotations`, which the rest of the balancer code reads (no other module looks
at ``metadata.annotations``).

Names are upstream's (``pkg/openstack/loadbalancer.go`` v1.36.0, the ``ServiceAnnotation*``
constants; documented in docs/openstack-cloud-controller-manager/
expose-applications-using-loadbalancer-type-service.md).

One deliberate difference: upstream's ``getBoolFromServiceAnnotation`` and
``getIntFromServiceAnnotation`` fall back to the default on a value they cannot parse (a log
line nobody reads). kccm refuses the Service instead, with an error that names the
annotation and the value (:class:`LBAnnotationError`), so a typo never silently changes a
balancer. A value that cannot be read is kept as its error (:class:`Parsed`) and raised where
the balancer code uses it, so the order in which the checks fail is upstream's, and the lenient
deletion path can take a default instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from kccm.cloudprovider import InvalidServiceConfig, Service

__all__ = [
    "ADDRESS",
    "AVAILABILITY_ZONE",
    "CLASS",
    "CONN_LIMIT",
    "ENABLE_HEALTH_MONITOR",
    "FLAVOR_ID",
    "FLOATING_NETWORK_ID",
    "FLOATING_SUBNET",
    "FLOATING_SUBNET_ID",
    "FLOATING_SUBNET_TAGS",
    "HEALTH_MONITOR_DELAY",
    "HEALTH_MONITOR_MAX_RETRIES",
    "HEALTH_MONITOR_MAX_RETRIES_DOWN",
    "HEALTH_MONITOR_TIMEOUT",
    "HOSTNAME",
    "INTERNAL",
    "KEEP_FLOATING_IP",
    "LB_ID",
    "LB_METHOD",
    "MEMBER_SUBNET_ID",
    "NETWORK_ID",
    "NODE_SELECTOR",
    "PORT_ID",
    "PROXY_PROTOCOL",
    "SOURCE_RANGES",
    "SUBNET_ID",
    "TIMEOUT_CLIENT_DATA",
    "TIMEOUT_MEMBER_CONNECT",
    "TIMEOUT_MEMBER_DATA",
    "TIMEOUT_TCP_INSPECT",
    "TLS_CONTAINER_REF",
    "X_FORWARDED_FOR",
    "LBAnnotationError",
    "Parsed",
    "ServiceAnnotations",
    "read_annotations",
]

_LB = "loadbalancer.openstack.org/"
INTERNAL = "service.beta.kubernetes.io/openstack-internal-load-balancer"
NODE_SELECTOR = _LB + "node-selector"
CONN_LIMIT = _LB + "connection-limit"
FLOATING_NETWORK_ID = _LB + "floating-network-id"
FLOATING_SUBNET = _LB + "floating-subnet"
FLOATING_SUBNET_ID = _LB + "floating-subnet-id"
FLOATING_SUBNET_TAGS = _LB + "floating-subnet-tags"
CLASS = _LB + "class"
KEEP_FLOATING_IP = _LB + "keep-floatingip"
PORT_ID = _LB + "port-id"
LB_METHOD = _LB + "lb-method"
PROXY_PROTOCOL = _LB + "proxy-protocol"
SUBNET_ID = _LB + "subnet-id"
NETWORK_ID = _LB + "network-id"
MEMBER_SUBNET_ID = _LB + "member-subnet-id"
TIMEOUT_CLIENT_DATA = _LB + "timeout-client-data"
TIMEOUT_MEMBER_CONNECT = _LB + "timeout-member-connect"
TIMEOUT_MEMBER_DATA = _LB + "timeout-member-data"
TIMEOUT_TCP_INSPECT = _LB + "timeout-tcp-inspect"
X_FORWARDED_FOR = _LB + "x-forwarded-for"
FLAVOR_ID = _LB + "flavor-id"
AVAILABILITY_ZONE = _LB + "availability-zone"
ENABLE_HEALTH_MONITOR = _LB + "enable-health-monitor"
HEALTH_MONITOR_DELAY = _LB + "health-monitor-delay"
HEALTH_MONITOR_TIMEOUT = _LB + "health-monitor-timeout"
HEALTH_MONITOR_MAX_RETRIES = _LB + "health-monitor-max-retries"
HEALTH_MONITOR_MAX_RETRIES_DOWN = _LB + "health-monitor-max-retries-down"
HOSTNAME = _LB + "hostname"
ADDRESS = _LB + "load-balancer-address"
TLS_CONTAINER_REF = _LB + "default-tls-container-ref"
LB_ID = _LB + "load-balancer-id"
SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"
"""``v1.AnnotationLoadBalancerSourceRangesKey``, read when the spec field is empty."""


_NAMED = re.compile(r"annotation ([A-Za-z0-9.-]+/[A-Za-z0-9._-]+)")


class LBAnnotationError(InvalidServiceConfig):
    """A Service annotation (or spec field) kccm cannot use; the message names it.

    ``key``: given, or the first annotation the message names (``annotation <key>``); ``""``
    when the fault lies elsewhere (a spec field, the cloud config)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        if key is None:
            found = _NAMED.search(message)
            key = found.group(1) if found else ""
        super().__init__(key, message)


T = TypeVar("T")


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """One annotation as read: absent, a value, or the error its text is."""

    present: bool = False
    value: T | None = None
    error: LBAnnotationError | None = None

    def get(self, default: T) -> T:
        """The value (``default`` when the annotation is absent); a refused text raises."""
        if self.error is not None:
            raise self.error
        return cast(T, self.value) if self.present else default

    def lenient(self, default: T, refused: T) -> T:
        """As :meth:`get`, but ``refused`` instead of raising (a Service being deleted)."""
        return refused if self.error is not None else self.get(default)


@dataclass(frozen=True)
class ServiceAnnotations:
    """Everything a Service's annotations ask of its balancer, read once per call.

    A ``str | None`` field is ``None`` when the annotation is absent (an empty value counts,
    as upstream's ``getStringFromServiceAnnotation`` counts it); a plain ``str`` field is
    ``""`` then."""

    lb_id: str = ""
    class_name: str = ""
    port_id: str = ""
    hostname: str = ""
    network_id: str = ""
    subnet_id: str | None = None
    member_subnet_id: str = ""
    floating_network_id: str | None = None
    floating_subnet_id: str = ""
    floating_subnet: str = ""
    floating_subnet_tags: str = ""
    flavor_id: str | None = None
    availability_zone: str | None = None
    tls_container_ref: str | None = None
    node_selector: str | None = None
    source_ranges: str = ""
    lb_method: Parsed[str] = field(default_factory=Parsed)
    proxy_protocol: Parsed[str | None] = field(default_factory=Parsed)
    internal: Parsed[bool] = field(default_factory=Parsed)
    enable_health_monitor: Parsed[bool] = field(default_factory=Parsed)
    x_forwarded_for: Parsed[bool] = field(default_factory=Parsed)
    keep_floating_ip: Parsed[bool] = field(default_factory=Parsed)
    conn_limit: Parsed[int] = field(default_factory=Parsed)
    timeout_client_data: Parsed[int] = field(default_factory=Parsed)
    timeout_member_connect: Parsed[int] = field(default_factory=Parsed)
    timeout_member_data: Parsed[int] = field(default_factory=Parsed)
    timeout_tcp_inspect: Parsed[int] = field(default_factory=Parsed)
    health_monitor_delay: Parsed[int] = field(default_factory=Parsed)
    health_monitor_timeout: Parsed[int] = field(default_factory=Parsed)
    health_monitor_max_retries: Parsed[int] = field(default_factory=Parsed)
    health_monitor_max_retries_down: Parsed[int] = field(default_factory=Parsed)

    def node_selectors(self, default: str) -> dict[str, str]:
        """Upstream ``getKeyValueFromServiceAnnotation`` + ``util.StringToMap`` on
        ``node-selector`` (else ``default``): ``k1=v1,k2=,k3`` (a key without ``=`` or with
        an empty value matches on the key alone)."""
        text = (default if self.node_selector is None else self.node_selector).strip()
        result: dict[str, str] = {}
        for item in text.split(","):
            name, _, value = item.strip().partition("=")
            if name:
                result[name] = value
        return result


def _parsed(values: Mapping[str, str], key: str, parse: Any) -> Any:
    if key not in values:
        return Parsed()
    try:
        return Parsed(True, parse(key, values[key]))
    except LBAnnotationError as err:
        return Parsed(error=err)


def _bool(key: str, value: str) -> bool:
    """Upstream ``getBoolFromServiceAnnotation``: exactly ``true`` or ``false`` (upstream logs
    anything else and uses the default; kccm refuses it)."""
    if value in ("true", "false"):
        return value == "true"
    raise LBAnnotationError(f"annotation {key}: {value!r} is not a boolean (true or false)")


def _int(key: str, value: str) -> int:
    """Upstream ``getIntFromServiceAnnotation`` (``strconv.Atoi``): a decimal integer (upstream
    uses the default for anything else; kccm refuses it)."""
    text = value[1:] if value[:1] in "+-" else value
    if not text or not text.isascii() or not text.isdigit():
        raise LBAnnotationError(f"annotation {key}: {value!r} is not an integer")
    return int(value)


def _proxy(key: str, value: str) -> str | None:
    """Upstream ``getProxyProtocolFromServiceAnnotation``: ``PROXY`` for ``true``/``v1``,
    ``PROXYV2`` for ``v2``, ``None`` for ``false``; anything else is an error."""
    versions = {"true": "PROXY", "v1": "PROXY", "v2": "PROXYV2", "false": None}
    if value not in versions:
        raise LBAnnotationError(f"annotation {key}: {value!r} is not one of true, v1, v2, false")
    return versions[value]


_LB_METHODS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")


def _lb_method(key: str, value: str) -> str:
    if value and value not in _LB_METHODS:
        raise LBAnnotationError(
            f"annotation {key}: {value!r} is not one of {', '.join(_LB_METHODS)}"
        )
    return value


_BOOLS = {
    "internal": INTERNAL,
    "enable_health_monitor": ENABLE_HEALTH_MONITOR,
    "x_forwarded_for": X_FORWARDED_FOR,
    "keep_floating_ip": KEEP_FLOATING_IP,
}
_INTS = {
    "conn_limit": CONN_LIMIT,
    "timeout_client_data": TIMEOUT_CLIENT_DATA,
    "timeout_member_connect": TIMEOUT_MEMBER_CONNECT,
    "timeout_member_data": TIMEOUT_MEMBER_DATA,
    "timeout_tcp_inspect": TIMEOUT_TCP_INSPECT,
    "health_monitor_delay": HEALTH_MONITOR_DELAY,
    "health_monitor_timeout": HEALTH_MONITOR_TIMEOUT,
    "health_monitor_max_retries": HEALTH_MONITOR_MAX_RETRIES,
    "health_monitor_max_retries_down": HEALTH_MONITOR_MAX_RETRIES_DOWN,
}
_TEXTS = {
    "lb_id": LB_ID,
    "class_name": CLASS,
    "port_id": PORT_ID,
    "hostname": HOSTNAME,
    "network_id": NETWORK_ID,
    "member_subnet_id": MEMBER_SUBNET_ID,
    "floating_subnet_id": FLOATING_SUBNET_ID,
    "floating_subnet": FLOATING_SUBNET,
    "floating_subnet_tags": FLOATING_SUBNET_TAGS,
    "source_ranges": SOURCE_RANGES,
}
"""Read as text, ``""`` when absent."""
_OPTIONAL_TEXTS = {
    "subnet_id": SUBNET_ID,
    "floating_network_id": FLOATING_NETWORK_ID,
    "flavor_id": FLAVOR_ID,
    "availability_zone": AVAILABILITY_ZONE,
    "tls_container_ref": TLS_CONTAINER_REF,
    "node_selector": NODE_SELECTOR,
}
"""Read as text, ``None`` when absent (a configured default applies)."""


def read_annotations(service: Service) -> ServiceAnnotations:
    """The Service's balancer annotations, each parsed once (upstream's
    ``getStringFromServiceAnnotation`` and its bool, int, key-value and proxy-protocol
    siblings)."""
    meta: Mapping[str, Any] = service.get("metadata") or {}
    found: Mapping[str, Any] = meta.get("annotations") or {}
    values = {key: str(value) for key, value in found.items()}
    fields: dict[str, Any] = {name: values.get(key, "") for name, key in _TEXTS.items()}
    fields.update({name: values.get(key) for name, key in _OPTIONAL_TEXTS.items()})
    fields.update({name: _parsed(values, key, _bool) for name, key in _BOOLS.items()})
    fields.update({name: _parsed(values, key, _int) for name, key in _INTS.items()})
    fields["lb_method"] = _parsed(values, LB_METHOD, _lb_method)
    fields["proxy_protocol"] = _parsed(values, PROXY_PROTOCOL, _proxy)
    return ServiceAnnotations(**fields)
