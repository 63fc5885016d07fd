"""Who may reach a Service's balancer: its source ranges, allowed ranges and service tags as
security group rules (cloud-provider-azure v1.36.5 ``pkg/provider/loadbalancer/
accesscontrol.go`` ``AccessControl`` and ``configuration.go``, called from
``azure_loadbalancer.go`` ``reconcileSecurityGroup``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.cloudprovider import InvalidServiceConfig, Service
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.providers.azure.loadbalancer import annotations as A
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations
from kccm.providers.azure.loadbalancer.nsgrules import PROTOCOLS, RuleHelper

__all__ = ["AccessControl", "access_control", "destination_ports"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_SECURITY_PROTOCOL = {"TCP": "Tcp", "UDP": "Udp", "SCTP": "*"}


def _parse_prefix(text: str) -> Network:
    """``iputil.ParsePrefix``: a CIDR, properly masked."""
    if "/" not in text:
        raise ValueError(text)
    network = ipaddress.ip_network(text, strict=False)
    if ipaddress.ip_address(text.split("/")[0]) != network.network_address:
        raise ValueError(text)
    return network


def _ranges(items: Sequence[str]) -> tuple[list[Network], list[str]]:
    valid: list[Network] = []
    invalid: list[str] = []
    for item in items:
        try:
            valid.append(_parse_prefix(item.strip()))
        except ValueError:
            invalid.append(item.strip())
    return valid, invalid


def destination_ports(service: Service, ann: ServiceAnnotations) -> dict[str, list[int]]:
    """``SecurityRuleDestinationPortsByProtocol``: the ports (nodePorts without floating IP)."""
    found: dict[str, list[int]] = {}
    for port in (service.get("spec") or {}).get("ports") or ():
        protocol = _SECURITY_PROTOCOL.get(str(port.get("protocol") or "TCP"))
        if protocol is None:
            raise InvalidServiceConfig("spec.ports", f"unsupported protocol {port['protocol']}")
        number = port.get("nodePort") if ann.disable_floating_ip else port.get("port")
        found.setdefault(protocol, []).append(int(number or 0))
    return found


@dataclass(frozen=True)
class AccessControl:
    """One Service's access configuration (``NewAccessControl``)."""

    internal: bool
    source_ranges: tuple[Network, ...]
    allowed_ranges: tuple[Network, ...]
    service_tags: tuple[str, ...]
    invalid: tuple[str, ...]
    deny_annotation: bool
    ports: Mapping[str, Sequence[int]]

    def allow_from_internet(self) -> bool:
        """``IsAllowFromInternet``."""
        if self.service_tags or self.invalid:
            return False
        if self.source_ranges and not _allows_all(self.source_ranges):
            return False
        if self.allowed_ranges and not _allows_all(self.allowed_ranges):
            return False
        return not self.internal or bool(self.allowed_ranges or self.source_ranges)

    def deny_all_except(self) -> bool:
        """``DenyAllExceptSourceRanges``."""
        ranges = bool(self.source_ranges or self.allowed_ranges)
        return (self.deny_annotation and ranges) or bool(self.invalid)

    def patch(self, helper: RuleHelper, dsts: Sequence[str]) -> None:
        """``PatchSecurityGroup`` for IPv4 destinations ``dsts``."""
        if not dsts:
            return
        tags = list(self.service_tags)
        if self.allow_from_internet() and not (
            _allows_all(self.allowed_ranges) or _allows_all(self.source_ranges)
        ):
            tags.append("Internet")
        ranges = [
            str(net)
            for net in ipaddress.collapse_addresses(
                n for n in (*self.source_ranges, *self.allowed_ranges) if n.version == 4
            )
        ]
        for protocol in PROTOCOLS:
            ports = self.ports.get(protocol)
            if ports is None:
                continue
            for tag in tags:
                helper.add_allow(protocol, [tag], dsts, ports)
            if ranges:
                helper.add_allow(protocol, ranges, dsts, ports)
        if self.deny_all_except():
            helper.add_deny_all(dsts)


def _allows_all(networks: Sequence[Network]) -> bool:
    """``IsPrefixesAllowAll``."""
    return any(net.prefixlen == 0 for net in networks)


def access_control(service: Service, ann: ServiceAnnotations) -> AccessControl:
    """``NewAccessControl``: the ranges read, an invalid one reported as upstream reports it
    (a Warning; it then denies all but the valid ranges)."""
    spec: Mapping[str, Any] = service.get("spec") or {}
    source, bad_source = _ranges(list(spec.get("loadBalancerSourceRanges") or ()))
    allowed: list[Network] = []
    bad_allowed: list[str] = []
    for key in (A.ALLOWED_IP_RANGES, A.SOURCE_RANGES):
        text = ann.text(key)
        if text is not None:
            valid, invalid = _ranges(text.strip().split(","))
            allowed += valid
            bad_allowed += invalid
    if bad_source:
        warn_service("InvalidSourceRanges", f"found invalid LoadBalancerSourceRanges {bad_source}")
    if bad_allowed:
        warn_service("InvalidAllowedIPRanges", f"found invalid AllowedIPRanges {bad_allowed}")
    if source and allowed:
        raise InvalidServiceConfig(
            A.ALLOWED_IP_RANGES,
            f"cannot set both spec.LoadBalancerSourceRanges and service annotation "
            f"{A.ALLOWED_IP_RANGES}",
        )
    if source and ann.allowed_service_tags:
        warn_service(
            "ConflictConfiguration",
            "Please use annotation service.beta.kubernetes.io/azure-allowed-service-tags "
            "instead of spec.loadBalancerSourceRanges and azure-allowed-ip-ranges",
        )
    return AccessControl(
        internal=ann.internal,
        source_ranges=tuple(source),
        allowed_ranges=tuple(allowed),
        service_tags=ann.allowed_service_tags,
        invalid=tuple(bad_source + bad_allowed),
        deny_annotation=ann.deny_all_except_source_ranges,
        ports=destination_ports(service, ann),
    )
