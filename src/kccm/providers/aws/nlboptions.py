"""The NLB annotations beyond ports and health checks: TLS listeners, addresses, attributes.

As upstream cloud-provider-aws reads them (``pkg/providers/v1/aws.go`` ``EnsureLoadBalancer``,
``aws_loadbalancer.go`` ``ensureLoadBalancerv2``, ``reconcileLBAttributes``,
``buildTargetGroupAttributes``; ``aws_validations.go``):

- ``-ssl-cert`` makes the listeners of the ports named or numbered in ``-ssl-ports`` (all TCP
  ports when absent or ``*``) TLS listeners with that certificate and ``-ssl-negotiation-policy``;
  ``-backend-protocol: ssl`` makes their target groups TLS too;
- ``-eip-allocations`` / ``-private-ipv4-addresses``: one per subnet, used when the balancer is
  created (AWS cannot change them afterwards);
- ``-access-log-enabled`` / ``-access-log-s3-bucket-name`` / ``-access-log-s3-bucket-prefix``:
  the balancer's ``access_logs.s3.*`` attributes;
- ``-target-group-attributes`` (``preserve_client_ip.enabled``, ``proxy_protocol_v2.enabled``):
  proxy protocol v2 on an NLB is asked for there, as upstream. ``-proxy-protocol`` is not read
  on NLBs: upstream's ``EnsureLoadBalancer`` reads it only after its NLB branch has returned,
  so a Service moved from upstream with that annotation on an NLB must not start sending the
  proxy-protocol header to back ends that do not expect it (it applies to Classic ELBs).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import InvalidServiceConfig
from kccm.cloudprovider.annotations import AnnotationError, OnInvalid, bool_annotation

__all__ = [
    "NLBOptions",
    "ServiceAnnotationError",
    "TLSListener",
    "key_value_list",
    "nlb_options",
    "tls_listener",
]

PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
SSL_CERT = PREFIX + "ssl-cert"
SSL_PORTS = PREFIX + "ssl-ports"
SSL_POLICY = PREFIX + "ssl-negotiation-policy"
BACKEND_PROTOCOL = PREFIX + "backend-protocol"
EIP_ALLOCATIONS = PREFIX + "eip-allocations"
PRIVATE_IPV4 = PREFIX + "private-ipv4-addresses"
PROXY_PROTOCOL = PREFIX + "proxy-protocol"
ACCESS_LOG_ENABLED = PREFIX + "access-log-enabled"
ACCESS_LOG_BUCKET = PREFIX + "access-log-s3-bucket-name"
ACCESS_LOG_PREFIX = PREFIX + "access-log-s3-bucket-prefix"
TARGET_GROUP_ATTRIBUTES = PREFIX + "target-group-attributes"

PROXY_PROTOCOL_V2 = "proxy_protocol_v2.enabled"
PRESERVE_CLIENT_IP = "preserve_client_ip.enabled"
ACCESS_LOGS_ENABLED_ATTRIBUTE = "access_logs.s3.enabled"
ACCESS_LOGS_BUCKET_ATTRIBUTE = "access_logs.s3.bucket"
ACCESS_LOGS_PREFIX_ATTRIBUTE = "access_logs.s3.prefix"


_ANNOTATION = re.compile(r"service\.(?:beta\.)?kubernetes\.io/[A-Za-z0-9._-]+")


class ServiceAnnotationError(InvalidServiceConfig):
    """A Service asks for something invalid or unsupported; the message says what.

    ``key`` is the annotation at fault: given, or the first one the message names (``""``
    when the fault lies in the Service's spec)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        if key is None:
            found = _ANNOTATION.search(message)
            key = found.group(0) if found else ""
        super().__init__(key, message)


def key_value_list(text: str) -> dict[str, str]:
    """``"k1=v1,k2=v2,k3"`` -> ``{"k1": "v1", "k2": "v2", "k3": ""}`` (upstream's parser)."""
    result: dict[str, str] = {}
    for item in text.strip().split(","):
        key, _, value = item.strip().partition("=")
        if key:
            result[key] = value
    return result


def annotation_error(key: str, message: str) -> ServiceAnnotationError:
    """The refusal :mod:`kccm.cloudprovider.annotations` raises for an aws annotation."""
    return ServiceAnnotationError(message, key)


def upstream_parse_error(annotations: Mapping[str, str]) -> AnnotationError:
    """Upstream's refusal of an attribute annotation it cannot parse, word for word:
    ``fmt.Errorf("error parsing service annotation: %s=%s", key, value)`` (aws.go
    ``EnsureLoadBalancer``, aws_loadbalancer.go ``ensureLoadBalancerv2``)."""

    def error(key: str, _problem: str) -> ServiceAnnotationError:
        return ServiceAnnotationError(
            f"error parsing service annotation: {key}={annotations[key]}", key
        )

    return error


def parse_bool(annotations: Mapping[str, str], key: str) -> bool:
    """Upstream ``strconv.ParseBool`` of a non-empty annotation (false when unset); any other
    value fails the call naming the annotation, as upstream's "error parsing service
    annotation" does."""
    return bool_annotation(
        annotations,
        key,
        False,
        on_invalid=OnInvalid.REFUSE,
        error=upstream_parse_error(annotations),
    )


@dataclass(frozen=True)
class TLSListener:
    """A TLS listener's settings (upstream ``nlbPortMapping.SSLCertificateARN``/``SSLPolicy``)."""

    certificate: str
    policy: str = ""
    backend_tls: bool = False


@dataclass(frozen=True)
class NLBOptions:
    """What the annotations above ask of the balancer and its target groups."""

    eip_allocations: tuple[str, ...] = ()
    private_ipv4: tuple[str, ...] = ()
    lb_attributes: Mapping[str, str] = field(default_factory=dict)
    """Access-log attributes to keep as given (upstream ``reconcileLBAttributes``)."""
    tg_attributes: Mapping[str, str] = field(default_factory=dict)
    """Target-group attributes to set; the others keep their value (upstream)."""


def _ssl_ports(annotations: Mapping[str, str]) -> set[str] | None:
    """Upstream ``getPortSets``: ``None`` (every port) when absent or ``*``."""
    raw = annotations.get(SSL_PORTS, "").strip()
    if not raw or raw == "*":
        return None
    return {item.strip() for item in raw.split(",") if item.strip()}


def tls_listener(annotations: Mapping[str, str], port: Mapping[str, Any]) -> TLSListener | None:
    """The TLS settings of one Service port, ``None`` for a plain TCP/UDP listener."""
    cert = annotations.get(SSL_CERT, "").strip()
    if not cert or str(port.get("protocol", "TCP")) == "UDP":
        return None
    wanted = _ssl_ports(annotations)
    if wanted is not None and not {str(port.get("port")), str(port.get("name", ""))} & wanted:
        return None
    backend = annotations.get(BACKEND_PROTOCOL, "").strip().lower()
    return TLSListener(cert, annotations.get(SSL_POLICY, "").strip(), backend == "ssl")


def _list(annotations: Mapping[str, str], key: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in annotations.get(key, "").split(",") if item.strip())


def _addresses(annotations: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    eips = _list(annotations, EIP_ALLOCATIONS)
    for eip in eips:
        if not eip.startswith("eipalloc-"):
            raise ServiceAnnotationError(
                f"annotation {EIP_ALLOCATIONS}: {eip!r} is not an EIP allocation ID"
            )
    private = _list(annotations, PRIVATE_IPV4)
    for ip in private:
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            raise ServiceAnnotationError(
                f"annotation {PRIVATE_IPV4}: {ip!r} is not an IPv4 address"
            ) from None
    return eips, private


def _access_log_attributes(annotations: Mapping[str, str]) -> dict[str, str]:
    """Upstream ``reconcileLBAttributes``: ``enabled`` always (default false); bucket and prefix
    only when enabled (ELBv2 refuses an empty bucket)."""
    if not parse_bool(annotations, ACCESS_LOG_ENABLED):
        return {ACCESS_LOGS_ENABLED_ATTRIBUTE: "false"}
    bucket = annotations.get(ACCESS_LOG_BUCKET, "").strip()
    if not bucket:
        raise ServiceAnnotationError(
            f"annotation {ACCESS_LOG_BUCKET} is required when {ACCESS_LOG_ENABLED} is true"
        )
    return {
        ACCESS_LOGS_ENABLED_ATTRIBUTE: "true",
        ACCESS_LOGS_BUCKET_ATTRIBUTE: bucket,
        ACCESS_LOGS_PREFIX_ATTRIBUTE: annotations.get(ACCESS_LOG_PREFIX, "").strip(),
    }


def _target_group_attributes(
    annotations: Mapping[str, str], ports: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """Upstream ``validateServiceAnnotationTargetGroupAttributes``."""
    where = f"annotation {TARGET_GROUP_ATTRIBUTES}"
    wanted = key_value_list(annotations.get(TARGET_GROUP_ATTRIBUTES, ""))
    for key, value in wanted.items():
        if key not in (PRESERVE_CLIENT_IP, PROXY_PROTOCOL_V2):
            raise ServiceAnnotationError(f"{where}: the attribute {key!r} is not supported")
        if value not in ("true", "false"):
            raise ServiceAnnotationError(f"{where}: invalid value for {key!r}: {value!r}")
    udp = any(str(p.get("protocol", "TCP")) == "UDP" for p in ports)
    if udp and wanted.get(PRESERVE_CLIENT_IP) == "false":
        raise ServiceAnnotationError(f"{where}: client IP preservation can't be disabled for UDP")
    return wanted


def nlb_options(annotations: Mapping[str, str], ports: Sequence[Mapping[str, Any]]) -> NLBOptions:
    """Every option above, checked; ServiceAnnotationError names the annotation at fault."""
    eips, private = _addresses(annotations)
    return NLBOptions(
        eip_allocations=eips,
        private_ipv4=private,
        lb_attributes=_access_log_attributes(annotations),
        tg_attributes=_target_group_attributes(annotations, ports),
    )
