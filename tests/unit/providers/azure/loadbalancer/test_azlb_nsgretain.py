"""The retain pass's decision, table-driven: which destinations the cluster's managed security
rules keep (cloud-provider-azure v1.36.5 ``listAvailableSecurityGroupDestinations``,
``RetainSecurityGroup``, ``RetainDestinationFromRules``), and which rules it never touches."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from kccm.providers.azure.loadbalancer.nsgretain import (
    EnsuredDestinations,
    retained_destinations,
)
from kccm.providers.azure.loadbalancer.nsgrules import RuleHelper

MANAGED = "k8s-azure-lb_allow_IPv4_0123456789abcdef0123456789abcdef"
DENY = "k8s-azure-lb_deny-all_IPv4"
OWN = "20.0.0.1"  # the Service being reconciled
ADDITIONAL = "service.beta.kubernetes.io/azure-additional-public-ips"


@dataclass
class View:
    services_: list[dict[str, Any]] = field(default_factory=list)
    nodes_: list[dict[str, Any]] = field(default_factory=list)
    synced: bool = True

    def services(self) -> Sequence[dict[str, Any]]:
        return self.services_

    def nodes(self) -> Sequence[dict[str, Any]]:
        return self.nodes_

    def has_synced(self) -> bool:
        return self.synced


def svc(uid: str, *ingress: str, additional: str | None = None) -> dict[str, Any]:
    annotations = {} if additional is None else {ADDITIONAL: additional}
    return {
        "metadata": {"name": uid, "namespace": "default", "uid": uid, "annotations": annotations},
        "status": {"loadBalancer": {"ingress": [{"ip": ip} for ip in ingress]}},
    }


def node(name: str, internal: str, *, external: str = "", managed: str | None = None) -> Any:
    labels = {} if managed is None else {"kubernetes.azure.com/managed": managed}
    addresses = [{"type": "InternalIP", "address": internal}]
    if external:
        addresses.append({"type": "ExternalIP", "address": external})
    return {"metadata": {"name": name, "labels": labels}, "status": {"addresses": addresses}}


def rule(name: str, priority: int, *dsts: str, access: str = "Allow") -> dict[str, Any]:
    return {
        "name": name,
        "properties": {
            "priority": priority,
            "protocol": "Tcp",
            "access": access,
            "direction": "Inbound",
            "sourceAddressPrefix": "Internet",
            "destinationPortRanges": ["80"],
            "destinationAddressPrefixes": list(dsts),
        },
    }


def kept(rules: list[dict[str, Any]], view: View, ensured: EnsuredDestinations) -> Any:
    """Each remaining rule's destinations after the pass (None: the pass did not run)."""
    group = {"properties": {"securityRules": copy.deepcopy(rules)}}
    helper = RuleHelper(group)
    retain = retained_destinations(view, [OWN], ensured)
    if retain is None:
        return None
    helper.retain_destinations(retain)
    result, _ = helper.result()
    found = {}
    for item in result["properties"]["securityRules"]:
        props = item["properties"]
        dsts = props.get("destinationAddressPrefixes") or [props["destinationAddressPrefix"]]
        found[item["name"]] = sorted(dsts)
    return found


STALE = "20.0.0.9"
CASES = [
    pytest.param(  # upstream keeps it once the Service is published (see nsgretain)
        [rule(MANAGED, 500, OWN, STALE)], View(), {MANAGED: [OWN]}, id="deleted-service-ip-goes"
    ),
    pytest.param(
        [rule(MANAGED, 500, OWN, "20.0.0.2")],
        View([svc("b", "20.0.0.2")]),
        {MANAGED: [OWN, "20.0.0.2"]},
        id="other-service-ingress-kept",
    ),
    pytest.param(
        [rule(MANAGED, 500, OWN, "20.0.0.3")],
        View([svc("b", "20.0.0.2", additional="20.0.0.3")]),
        {MANAGED: [OWN, "20.0.0.3"]},
        id="other-service-additional-ip-kept",
    ),
    pytest.param(
        [rule(MANAGED, 500, OWN, "20.0.0.3")],
        View([svc("b", additional="20.0.0.3,not-an-ip")]),
        {MANAGED: [OWN]},
        id="additional-ips-with-a-bad-one-none-kept",
    ),
    pytest.param(
        [rule(MANAGED, 500, "10.0.0.4", "10.0.0.5")],
        View(nodes_=[node("n4", "10.0.0.4")]),
        {MANAGED: ["10.0.0.4"]},
        id="left-node-internal-ip-goes",
    ),
    pytest.param(
        [rule(MANAGED, 500, "10.0.0.4")],
        View(nodes_=[node("n4", "10.0.0.4", managed="False")]),
        {},
        id="unmanaged-node-ip-goes-and-empty-rule-dropped",
    ),
    pytest.param(
        [rule(MANAGED, 500, OWN, "52.0.0.4")],
        View(nodes_=[node("n4", "10.0.0.4", external="52.0.0.4")]),
        {MANAGED: [OWN]},
        id="node-external-ip-goes",
    ),
    pytest.param(
        [rule(DENY, 4095, OWN, STALE, access="Deny")],
        View(),
        {DENY: [OWN]},
        id="deny-all-rule-pruned-too",
    ),
    pytest.param(
        [rule(MANAGED, 500, OWN, "20.0.0.0/24")],
        View(),
        {MANAGED: [OWN]},
        id="prefix-in-managed-rule-goes",
    ),
    pytest.param(
        [rule("user-allow-ssh", 500, STALE), rule(MANAGED, 200, STALE)],
        View(),
        {"user-allow-ssh": [STALE], MANAGED: [STALE]},
        id="unmanaged-name-or-priority-untouched",
    ),
    pytest.param([rule(MANAGED, 500, OWN, STALE)], View(synced=False), None, id="unsynced-no-pass"),
]


@pytest.mark.parametrize(("rules", "view", "wanted"), CASES)
def test_what_the_managed_rules_keep(rules: Any, view: View, wanted: Any) -> None:
    assert kept(rules, view, EnsuredDestinations()) == wanted


def test_no_view_no_pass() -> None:
    assert retained_destinations(None, [OWN], EnsuredDestinations()) is None


def test_what_this_process_ensured_is_kept_while_its_service_exists() -> None:
    """A Service ensured here whose status (or the cache) does not show its address yet keeps
    it; once the Service is gone from the view, it does not."""
    ensured = EnsuredDestinations()
    pending = svc("b")  # its status is written after the ensure returns
    ensured.record(pending, ["20.0.0.2"])
    rules = [rule(MANAGED, 500, OWN, "20.0.0.2")]
    assert kept(rules, View([pending]), ensured) == {MANAGED: [OWN, "20.0.0.2"]}
    assert kept(rules, View([]), ensured) == {MANAGED: [OWN]}
    assert kept(rules, View([pending]), ensured) == {MANAGED: [OWN]}  # forgotten with it
