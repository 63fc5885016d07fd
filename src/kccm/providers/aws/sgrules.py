"""Security-group ingress rules as upstream compares them (``sets_ippermissions.go``).

EC2 groups rules (``{tcp 80, [A, B]}``); upstream "ungroups" them into one permission per
source and compares ports, protocol and source, never the description
(``ipPermissionExists``). A :class:`Rule` is one such ungrouped permission; its description
is carried along but is not part of its identity, exactly so.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANY_PROTOCOL",
    "NLB_CLIENT_RULE",
    "NLB_HEALTH_RULE",
    "NLB_MTU_RULE",
    "SOURCE_RANGES_ANNOTATION",
    "WORLD",
    "Rule",
    "described",
    "icmp_mtu",
    "mtu_rules",
    "nlb_traffic_rules",
    "permissions",
    "rules_of",
    "source_ranges",
]

NLB_HEALTH_RULE = "kubernetes.io/rule/nlb/health"
"""Upstream ``NLBHealthCheckRuleDescription`` (aws.go); the rule's description is
``<this>=<load balancer name>``."""
NLB_CLIENT_RULE = "kubernetes.io/rule/nlb/client"
"""Upstream ``NLBClientRuleDescription``."""
NLB_MTU_RULE = "kubernetes.io/rule/nlb/mtu"
"""Upstream ``NLBMtuDiscoveryRuleDescription`` (shared by every NLB: no name appended)."""
ANY_PROTOCOL = "-1"
WORLD = "0.0.0.0/0"
SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"


@dataclass(frozen=True, order=True)
class Rule:
    """One ungrouped ingress permission: protocol, port range and a single source (a CIDR or
    a security group). ``description`` does not take part in equality (upstream's
    ``ipPermissionExists`` ignores it)."""

    protocol: str
    from_port: int | None = None
    to_port: int | None = None
    cidr: str = ""
    group: str = ""
    description: str = field(default="", compare=False)

    def permission(self) -> dict[str, Any]:
        """The rule as an EC2 ``IpPermission``."""
        perm: dict[str, Any] = {"IpProtocol": self.protocol}
        if self.from_port is not None:
            perm["FromPort"] = self.from_port
        if self.to_port is not None:
            perm["ToPort"] = self.to_port
        source: dict[str, str] = {}
        if self.description:
            source["Description"] = self.description
        if self.group:
            perm["UserIdGroupPairs"] = [{"GroupId": self.group, **source}]
        elif ":" in self.cidr:
            perm["Ipv6Ranges"] = [{"CidrIpv6": self.cidr, **source}]
        else:
            perm["IpRanges"] = [{"CidrIp": self.cidr, **source}]
        return perm


def _port(value: Any) -> int | None:
    return None if value is None else int(value)


def rules_of(perms: Iterable[Mapping[str, Any]] | None) -> set[Rule]:
    """A group's ``IpPermissions``, ungrouped (upstream ``IPPermissionSet.Ungroup``); prefix
    lists are left out (nothing here writes them)."""
    found: set[Rule] = set()
    for perm in perms or ():
        proto = str(perm.get("IpProtocol", "")).lower()
        ports = (_port(perm.get("FromPort")), _port(perm.get("ToPort")))
        for ip in perm.get("IpRanges") or ():
            found.add(Rule(proto, *ports, cidr=ip["CidrIp"], description=ip.get("Description", "")))
        for ip6 in perm.get("Ipv6Ranges") or ():
            found.add(
                Rule(proto, *ports, cidr=ip6["CidrIpv6"], description=ip6.get("Description", ""))
            )
        for pair in perm.get("UserIdGroupPairs") or ():
            found.add(
                Rule(proto, *ports, group=pair["GroupId"], description=pair.get("Description", ""))
            )
    return found


def permissions(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    return [rule.permission() for rule in sorted(rules)]


def described(rules: Iterable[Rule], description: str) -> set[Rule]:
    """The rules carrying exactly ``description`` (upstream ``IPPermissionMatchDesc``)."""
    return {r for r in rules if r.description == description}


def source_ranges(service: Mapping[str, Any]) -> tuple[str, ...]:
    """Upstream ``servicehelpers.GetLoadBalancerSourceRanges``: ``loadBalancerSourceRanges``,
    else the ``load-balancer-source-ranges`` annotation, else ``0.0.0.0/0``; normalised as
    Go's ``net.IPNet.String()`` prints them. A malformed range raises ValueError naming it."""
    spec = service.get("spec") or {}
    values = [str(v).strip() for v in spec.get("loadBalancerSourceRanges") or ()]
    origin = "spec.loadBalancerSourceRanges"
    if not values:
        annotations = (service.get("metadata") or {}).get("annotations") or {}
        text = str(annotations.get(SOURCE_RANGES_ANNOTATION, "")).strip() or WORLD
        values = [v.strip() for v in text.split(",")]
        origin = f"annotation {SOURCE_RANGES_ANNOTATION}"
    ranges = set()
    for value in values:
        try:
            ranges.add(str(ipaddress.ip_network(value, strict=False)))
        except ValueError:
            raise ValueError(
                f"{origin}: {value!r} is not an IP range (expected e.g. 10.0.0.0/24)"
            ) from None
    return tuple(sorted(ranges))


def nlb_traffic_rules(
    description: str, protocol: str, ports: Iterable[int], cidrs: Sequence[str]
) -> set[Rule]:
    """Upstream ``updateInstanceSecurityGroupForNLBTraffic``'s desired set: every port from
    every CIDR, each rule described ``description``."""
    return {
        Rule(protocol, port, port, cidr=cidr, description=description)
        for port in ports
        for cidr in cidrs
    }


def mtu_rules(current: Iterable[Rule]) -> set[Rule]:
    """Upstream ``updateInstanceSecurityGroupForNLBMTU``'s desired set: ICMP type 3 code 4
    from every CIDR any NLB's client rule admits."""
    return {
        Rule("icmp", 3, 4, cidr=r.cidr, description=NLB_MTU_RULE)
        for r in current
        if r.cidr and NLB_CLIENT_RULE in r.description
    }


def icmp_mtu(cidrs: Iterable[str]) -> set[Rule]:
    """Upstream ``createSecurityGroupRules``' ICMP fragmentation rule (MTU discovery)."""
    return {Rule("icmp", 3, 4, cidr=c) for c in cidrs}
