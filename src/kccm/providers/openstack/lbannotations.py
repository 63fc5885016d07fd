"""The Service annotations OCCM reads for a load balancer, and their strict parsers.

Names are upstream's (``pkg/openstack/loadbalancer.go`` v1.36.0, the ``ServiceAnnotation*``
constants; documented in docs/openstack-cloud-controller-manager/
expose-applications-using-loadbalancer-type-service.md).

One deliberate difference: upstream's ``getBoolFromServiceAnnotation`` and
``getIntFromServiceAnnotation`` fall back to the default on a value they cannot parse (a log
line nobody reads). kccm refuses the Service instead, with an error that names the
annotation and the value (:class:`LBAnnotationError`), so a typo never silently changes a
balancer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
    "annotation",
    "annotations_of",
    "bool_annotation",
    "int_annotation",
    "key_value_annotation",
    "proxy_protocol",
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


def annotations_of(service: Service) -> Mapping[str, str]:
    meta: Mapping[str, Any] = service.get("metadata") or {}
    return meta.get("annotations") or {}


def annotation(service: Service, key: str, default: str = "") -> str:
    """Upstream ``getStringFromServiceAnnotation``: the value (an empty value counts), else
    ``default``."""
    values = annotations_of(service)
    return str(values[key]) if key in values else default


def bool_annotation(service: Service, key: str, default: bool) -> bool:
    """Upstream ``getBoolFromServiceAnnotation``: exactly ``true`` or ``false``.

    Anything else is an :class:`LBAnnotationError` (upstream logs it and uses the default)."""
    values = annotations_of(service)
    if key not in values:
        return default
    value = str(values[key])
    if value in ("true", "false"):
        return value == "true"
    raise LBAnnotationError(f"annotation {key}: {value!r} is not a boolean (true or false)")


def int_annotation(service: Service, key: str, default: int) -> int:
    """Upstream ``getIntFromServiceAnnotation`` (``strconv.Atoi``): a decimal integer.

    A value that is not one is an :class:`LBAnnotationError` (upstream uses the default)."""
    values = annotations_of(service)
    if key not in values:
        return default
    value = str(values[key])
    text = value[1:] if value[:1] in "+-" else value
    if not text or not text.isascii() or not text.isdigit():
        raise LBAnnotationError(f"annotation {key}: {value!r} is not an integer")
    return int(value)


def proxy_protocol(service: Service) -> str | None:
    """Upstream ``getProxyProtocolFromServiceAnnotation``: ``PROXY`` for ``true``/``v1``,
    ``PROXYV2`` for ``v2``, ``None`` for ``false`` or absent; anything else is an error."""
    value = annotation(service, PROXY_PROTOCOL, "false")
    versions = {"true": "PROXY", "v1": "PROXY", "v2": "PROXYV2", "false": None}
    if value not in versions:
        raise LBAnnotationError(
            f"annotation {PROXY_PROTOCOL}: {value!r} is not one of true, v1, v2, false"
        )
    return versions[value]


def key_value_annotation(service: Service, key: str, default: str) -> dict[str, str]:
    """Upstream ``getKeyValueFromServiceAnnotation`` + ``util.StringToMap``: ``k1=v1,k2=,k3``
    (a key without ``=`` or with an empty value matches on the key alone)."""
    text = annotation(service, key, default).strip()
    result: dict[str, str] = {}
    for item in text.split(","):
        name, _, value = item.strip().partition("=")
        if name:
            result[name] = value
    return result
