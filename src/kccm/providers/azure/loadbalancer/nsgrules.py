"""The cluster's security group rules, edited as upstream edits them (cloud-provider-azure
v1.36.5 ``pkg/provider/securitygroup/securitygroup.go`` ``RuleHelper`` and
``securityrule.go``).

Rules are shared between Services: an allow rule is named
``k8s-azure-lb_allow_<IPv4|IPv6>_<md5 of protocol, sources and ports>`` and lists every
destination address (each Service's balancer IP) allowed from those sources to those ports;
``k8s-azure-lb_deny-all_<family>`` denies the rest. Allow rules take the lowest free priority
from 500, deny rules the highest below 4096. A Service adds or removes only its own
destination addresses; a rule left without any is dropped. Only rules upstream manages are
touched: named ``k8s-azure-lb...`` with a priority from 500 to 4096. A reconcile ends by
keeping, in those rules, only destinations the cluster still has (:mod:`.nsgretain`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Collection, Iterable, Sequence

from kccm.providers.azure.loadbalancer.lbrules import Json

__all__ = ["RuleHelper", "allow_rule_name", "deny_all_rule_name", "family_of"]

PREFIX = "k8s-azure-lb"
MIN_PRIORITY, MAX_PRIORITY = 500, 4096
PROTOCOLS = ("Tcp", "Udp", "*")


def family_of(address: str) -> str:
    return "IPv4" if ipaddress.ip_network(address, strict=False).version == 4 else "IPv6"


def allow_rule_name(
    protocol: str, family: str, sources: Iterable[str], ports: Iterable[int]
) -> str:
    """``GenerateAllowSecurityRuleName``."""
    text = "_".join(
        [protocol, ",".join(sorted(sources)), ",".join(sorted(str(port) for port in ports))]
    )
    digest = hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
    return f"{PREFIX}_allow_{family}_{digest}"


def deny_all_rule_name(family: str) -> str:
    """``GenerateDenyAllSecurityRuleName``."""
    return f"{PREFIX}_deny-all_{family}"


def _props(rule: Json) -> Json:
    found: Json = rule.setdefault("properties", {})
    return found


def _list(props: Json, one: str, many: str) -> list[str]:
    found = [props[one]] if props.get(one) else []
    return found + [str(item) for item in props.get(many) or ()]


def destinations(rule: Json) -> list[str]:
    """``ListDestinationPrefixes``."""
    return _list(_props(rule), "destinationAddressPrefix", "destinationAddressPrefixes")


def _set_destinations(rule: Json, prefixes: Iterable[str]) -> None:
    """``SetDestinationPrefixes``: unique and sorted; one goes in the singular field."""
    unique = sorted(set(prefixes))
    props = _props(rule)
    if len(unique) == 1:
        props["destinationAddressPrefix"] = unique[0]
        props.pop("destinationAddressPrefixes", None)
    else:
        props.pop("destinationAddressPrefix", None)
        props["destinationAddressPrefixes"] = unique


def _ports(rule: Json) -> list[int] | None:
    """``ListDestinationPortRanges``; None when one is ``*`` or a range."""
    texts = _list(_props(rule), "destinationPortRange", "destinationPortRanges")
    if not all(text.isdigit() for text in texts):
        return None
    return [int(text) for text in texts]


def _managed(rule: Json) -> bool:
    """``IsManagedSecurityRule``."""
    priority = _props(rule).get("priority")
    return (
        str(rule.get("name", "")).startswith(PREFIX)
        and isinstance(priority, int)
        and MIN_PRIORITY <= priority <= MAX_PRIORITY
    )


def _canonical(rules: Sequence[Json]) -> str:
    """The rules as compared: by priority, absent, null and empty fields alike."""

    def clean(value: object) -> object:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v not in (None, [], {}, "")}
        if isinstance(value, list):
            return [clean(item) for item in value]
        return value

    ordered = sorted(rules, key=lambda rule: int(_props(rule).get("priority") or 0))
    return json.dumps([clean(rule) for rule in ordered], sort_keys=True)


class RuleHelper:
    """A security group's rules being edited (``RuleHelper``); :meth:`result` says whether
    anything changed."""

    def __init__(self, group: Json) -> None:
        self.group = group
        rules = list(_props(group).get("securityRules") or ())
        self._before = _canonical(json.loads(json.dumps(rules)))
        self.rules: dict[str, Json] = {str(rule["name"]): rule for rule in rules}

    def _priorities(self) -> set[int]:
        return {int(_props(rule).get("priority") or 0) for rule in self.rules.values()}

    def _get_or_create(self, name: str, from_end: bool) -> Json:
        if name in self.rules:
            return self.rules[name]
        taken = self._priorities()
        order = (
            range(MAX_PRIORITY - 1, MIN_PRIORITY - 1, -1)
            if from_end
            else range(MIN_PRIORITY, MAX_PRIORITY)
        )
        for priority in order:
            if priority not in taken:
                rule: Json = {"name": name, "properties": {"priority": priority}}
                self.rules[name] = rule
                return rule
        raise RuntimeError("security rule priority exhausted")

    def add_allow(
        self, protocol: str, sources: Sequence[str], dsts: Sequence[str], ports: Sequence[int]
    ) -> None:
        """``addAllowRule``: ``dsts`` may reach ``ports`` from ``sources``."""
        family = family_of(dsts[0])
        rule = self._get_or_create(allow_rule_name(protocol, family, sources, ports), False)
        props = _props(rule)
        props.update(protocol=protocol, access="Allow", direction="Inbound")
        if len(sources) == 1:
            props["sourceAddressPrefix"] = sources[0]
        else:
            props["sourceAddressPrefixes"] = list(sources)
        props["sourcePortRange"] = "*"
        _set_destinations(rule, [*destinations(rule), *dsts])
        props.pop("destinationPortRange", None)
        props["destinationPortRanges"] = sorted(str(port) for port in ports)

    def add_deny_all(self, dsts: Sequence[str]) -> None:
        """``AddRuleForDenyAll``."""
        rule = self._get_or_create(deny_all_rule_name(family_of(dsts[0])), True)
        props = _props(rule)
        props.update(protocol="*", access="Deny", direction="Inbound")
        props.update(sourceAddressPrefix="*", sourcePortRange="*")
        _set_destinations(rule, [*dsts, *destinations(rule)])
        props["destinationPortRange"] = "*"
        props.pop("destinationPortRanges", None)

    def remove_destinations(
        self, protocol: str, dsts: Sequence[str], retain_ports: Sequence[int] = ()
    ) -> None:
        """``RemoveDestinationFromRules`` for one protocol."""
        for rule in list(self.rules.values()):
            if _managed(rule) and _props(rule).get("protocol") == protocol:
                self._remove_from(rule, dsts, retain_ports)

    def _remove_from(self, rule: Json, dsts: Sequence[str], retain: Sequence[int]) -> None:
        current = destinations(rule)
        kept = [prefix for prefix in current if prefix not in dsts]
        targets = [prefix for prefix in current if prefix in dsts]
        if _props(rule).get("access") == "Deny" and not retain:
            _set_destinations(rule, kept)
            return
        ports = _ports(rule)
        if ports is None:
            return
        kept_ports = [port for port in ports if port in retain]
        if not targets or len(ports) == len(kept_ports):
            return
        _set_destinations(rule, kept)
        if kept_ports:
            sources = _list(_props(rule), "sourceAddressPrefix", "sourceAddressPrefixes")
            self.add_allow(str(_props(rule)["protocol"]), sources, dsts, kept_ports)

    def retain_destinations(self, keep: Collection[str]) -> None:
        """``RetainDestinationFromRules``: every managed rule, of any protocol and access,
        keeps only the destinations in ``keep``."""
        for rule in self.rules.values():
            current = destinations(rule)
            kept = [prefix for prefix in current if prefix in keep]
            if _managed(rule) and len(kept) != len(current):
                _set_destinations(rule, kept)

    def result(self) -> tuple[Json, bool]:
        """``SecurityGroup()``: rules without any destination dropped; changed or not."""
        rules = [
            rule
            for rule in self.rules.values()
            if destinations(rule) or _props(rule).get("destinationApplicationSecurityGroups")
        ]
        rules.sort(key=lambda rule: int(_props(rule).get("priority") or 0))
        _props(self.group)["securityRules"] = rules
        return self.group, _canonical(rules) != self._before
