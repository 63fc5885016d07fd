"""The Service annotations OCCM reads for a load balancer, read in one place:
:func:`read_annotations` turns a Service's annotations into one typed
:class:`ServiceAnnotations`, which the rest of the balancer code reads (no other module looks
at ``metadata.annotations``).

Names are upstream's (``pkg/openstack/loadbalancer.go`` v1.36.0, the ``ServiceAnnotation*``
constants; documented in docs/openstack-cloud-controller-manager/
expose-applications-using-loadbalancer-type-service.md).

Each value is parsed exactly as upstream parses it, and a value upstream cannot parse gives
upstream's default: booleans are only ``true`` and ``false`` (``getBoolFromServiceAnnotation``
compares the text; ``True``, ``1`` or ``yes`` give the default), integers are
``strconv.Atoi`` (``getIntFromServiceAnnotation``), proxy-protocol is ``true``, ``v1``,
``v2`` or ``false`` (``getProxyProtocolFromServiceAnnotation``: anything else is off). Where
upstream falls back silently (a log line), kccm falls back the same way and says so with a
``Warning`` Event (reason ``InvalidAnnotation``) naming the annotation, its value and the
value used (:mod:`kccm.cloudprovider.annotations`, ``OnInvalid.FALLBACK``). A value is read
where the balancer code uses it (:meth:`Parsed.get`), since only there is the default known
(a ``[LoadBalancer]`` option for some). An ``lb-method`` is taken as written, as upstream
takes it: Octavia judges it. A method it does not know (:data:`LB_METHODS`) on a pool that
exists is upstream's failed pool update, a ``LoadBalancerLbMethodUnknown`` Warning Event, and
the sync goes on (:mod:`.pools`); only where a pool would be made is it refused, before any
write (upstream: Octavia's 400 at the new pool).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.cloudprovider.annotations import OnInvalid, choice_annotation, int_annotation

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
    "LB_METHODS",
    "MEMBER_SUBNET_ID",
    "NETWORK_ID",
    "NODE_SELECTOR",
    "OCCM_BOOLS",
    "PORT_ID",
    "PROXY_PROTOCOL",
    "PROXY_VERSIONS",
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
    "Reader",
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
Reader = Callable[[Mapping[str, str], str, Any], Any]
"""Reads annotation ``key`` of the mapping with the given default (upstream's rule)."""


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """One annotation as found (``text`` None: absent), read with upstream's rule on use."""

    key: str = ""
    text: str | None = None
    read: Reader | None = None

    @property
    def present(self) -> bool:
        return self.text is not None

    def get(self, default: T) -> T:
        """The value as upstream reads it; ``default`` when absent or (with a Warning Event)
        when upstream cannot parse it."""
        if self.text is None or self.read is None:
            return default
        return cast(T, self.read({self.key: self.text}, self.key, default))


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
        an empty value matches on the key alone; ``=v``, an empty key, matches no Node)."""
        text = (default if self.node_selector is None else self.node_selector).strip()
        result: dict[str, str] = {}
        for item in text.split(","):
            name, eq, value = item.strip().partition("=")
            if name or eq:
                result[name] = value
        return result


def _parsed(values: Mapping[str, str], key: str, read: Reader) -> Any:
    return Parsed(key, values.get(key), read)


OCCM_BOOLS = {"true": True, "false": False}
"""``getBoolFromServiceAnnotation``: a ``switch`` on exactly these two texts."""
PROXY_VERSIONS: dict[str, str | None] = {
    "true": "PROXY",
    "v1": "PROXY",
    "v2": "PROXYV2",
    "false": None,
}
"""``getProxyProtocolFromServiceAnnotation``: these texts; anything else is off (``nil``)."""


def _bool(values: Mapping[str, str], key: str, default: bool) -> bool:
    """Upstream ``getBoolFromServiceAnnotation``: ``true`` or ``false``; anything else (an
    empty value too: it tests presence) is the default."""
    return choice_annotation(
        values, key, default, OCCM_BOOLS, on_invalid=OnInvalid.FALLBACK, empty_is_unset=False
    )


def _int(values: Mapping[str, str], key: str, default: int) -> int:
    """Upstream ``getIntFromServiceAnnotation``: ``strconv.Atoi`` (a sign, decimal digits, 64
    bits); anything else (an empty value too) is the default."""
    return int_annotation(values, key, default, on_invalid=OnInvalid.FALLBACK, empty_is_unset=False)


def _proxy(values: Mapping[str, str], key: str, default: str | None) -> str | None:
    """Upstream ``getProxyProtocolFromServiceAnnotation``: ``PROXY`` for ``true``/``v1``,
    ``PROXYV2`` for ``v2``, off for ``false`` and for anything else (upstream's default,
    ``"false"``, is what the warning names)."""
    spelling = choice_annotation(
        values,
        key,
        "false",
        {text: text for text in PROXY_VERSIONS},
        on_invalid=OnInvalid.FALLBACK,
        empty_is_unset=False,
    )
    return PROXY_VERSIONS[spelling]


LB_METHODS = ("ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT")
"""The methods Octavia's API knows (``SUPPORTED_LB_ALGORITHMS``); it answers 400 to others."""


def _lb_method(values: Mapping[str, str], key: str, default: str) -> str:
    """Upstream ``getStringFromServiceAnnotation``: the text as written, sent to Octavia
    (which judges it; :func:`.pools.refuse_unknown_method`)."""
    return values[key]


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
