"""Security rules on kccm's ARM emulator, table-driven, as upstream v1.36.5 reconciles them
(``pkg/provider/azure_loadbalancer.go`` ``reconcileSecurityGroup``: the Service's destinations
taken out of every managed rule, ``CleanSecurityGroup``, then put back where it wants them,
``PatchSecurityGroup``): a rule of old ports or old source ranges goes, drift is repaired,
a rule shared with another Service keeps that Service's destination, another Service's rule
is never changed, and a second ensure writes nothing. The emulator is left as found."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azlb_emu import balancers, network_id, node, resource, service, writes

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.testing.certs import emulator_tls

CLUSTER = "kubernetes"
A_UID = "c1000000-0000-4000-8000-000000000000"
B_UID = "c2000000-0000-4000-8000-000000000000"
C_UID = "c3000000-0000-4000-8000-000000000000"
Rules = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@pytest.fixture(scope="module")
def lbs(emu: AzureEmulator, tmp_path_factory: pytest.TempPathFactory) -> AzureLoadBalancers:
    return balancers(emu, tmp_path_factory.mktemp("azure"))


@pytest.fixture
def nodes(emu: AzureEmulator) -> Iterator[list[dict[str, Any]]]:
    baseline = emu.state()
    made = [emu.admin.add_vm("nsg-0")]
    yield [node(vm) for vm in made]
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.assert_clean(baseline)


def _rules(emu: AzureEmulator) -> Rules:
    group = resource(emu, "networkSecurityGroups", emu.config["nsg"])
    return {r["name"]: r["properties"] for r in group["properties"].get("securityRules") or ()}


def _shape(rules: Rules) -> set[tuple[str, str, str]]:
    """(ports, sources, destinations) of each rule."""
    found = set()
    for props in rules.values():
        ports = ",".join(props.get("destinationPortRanges") or [props["destinationPortRange"]])
        sources = ",".join(props.get("sourceAddressPrefixes") or [props["sourceAddressPrefix"]])
        dsts = props.get("destinationAddressPrefixes") or [props["destinationAddressPrefix"]]
        found.add((ports, sources, ",".join(sorted(dsts))))
    return found


def _tamper(emu: AzureEmulator, lbs: AzureLoadBalancers, edit: Callable[[Rules], None]) -> None:
    """Someone edits the security group behind kccm's back."""
    path = network_id(emu, "networkSecurityGroups", emu.config["nsg"])
    group = lbs.arm.get(path)
    assert group is not None
    rules = {r["name"]: r for r in group["properties"].get("securityRules") or ()}
    edit({name: rule["properties"] for name, rule in rules.items()})
    group["properties"]["securityRules"] = [r for r in rules.values() if r.get("properties")]
    lbs.arm.put(path, group, if_match=group.get("etag"))


def _drop_all(rules: Rules) -> None:
    for props in rules.values():
        props.clear()


def _edit_ports(rules: Rules) -> None:
    for props in rules.values():
        props["destinationPortRanges"] = ["81"]


def _port(value: int) -> dict[str, Any]:
    return {"port": value}


def _ranges(*cidrs: str) -> dict[str, Any]:
    return {"loadBalancerSourceRanges": list(cidrs)}


CASES = [
    pytest.param(_port(80), _port(8080), None, {("8080", "Internet", "A")}, id="old-port-goes"),
    pytest.param(
        _ranges("10.0.0.0/8"),
        _ranges("192.168.0.0/16"),
        None,
        {("80", "192.168.0.0/16", "A")},
        id="old-source-range-goes",
    ),
    pytest.param(
        _port(80), _port(80), _drop_all, {("80", "Internet", "A")}, id="deleted-rule-back"
    ),
    pytest.param(
        _port(80), _port(80), _edit_ports, {("80", "Internet", "A")}, id="edited-rule-repaired"
    ),
]


@pytest.mark.parametrize(("before", "after", "drift", "wanted"), CASES)
def test_the_services_rules_follow_it(
    emu: AzureEmulator,
    lbs: AzureLoadBalancers,
    nodes: list[Any],
    before: dict[str, Any],
    after: dict[str, Any],
    drift: Callable[[Rules], None] | None,
    wanted: set[tuple[str, str, str]],
) -> None:
    port_a = before.pop("port", 80)
    svc = service("a", A_UID, port=port_a, **before)
    address = lbs.ensure_load_balancer(CLUSTER, svc, nodes).ingress[0].ip
    try:
        if drift is not None:
            _tamper(emu, lbs, drift)
        changed = service("a", A_UID, port=after.pop("port", 80), **after)
        lbs.ensure_load_balancer(CLUSTER, changed, nodes)
        expected = {(p, s, d.replace("A", address)) for p, s, d in wanted}
        assert _shape(_rules(emu)) == expected
        since = emu.admin.last_seq()
        lbs.ensure_load_balancer(CLUSTER, changed, nodes)
        assert writes(emu, since) == []
    finally:
        lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert _rules(emu) == {}


def test_shared_and_other_services_rules(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]
) -> None:
    """A and B (same port, same sources) share one rule; C's port is a rule of its own. A's
    port change takes only A's destination out of the shared rule and leaves C's rule as it
    was; A's delete leaves B's destination."""
    a, b, c = service("a", A_UID), service("b", B_UID), service("c", C_UID, port=443)
    try:
        ip_a, ip_b, ip_c = (
            lbs.ensure_load_balancer(CLUSTER, svc, nodes).ingress[0].ip for svc in (a, b, c)
        )
        assert _shape(_rules(emu)) == {
            ("80", "Internet", ",".join(sorted([ip_a, ip_b]))),
            ("443", "Internet", ip_c),
        }
        c_rule = {n: p for n, p in _rules(emu).items() if ip_c in str(p)}
        lbs.ensure_load_balancer(CLUSTER, service("a", A_UID, port=8080), nodes)
        assert _shape(_rules(emu)) == {
            ("80", "Internet", ip_b),
            ("8080", "Internet", ip_a),
            ("443", "Internet", ip_c),
        }
        assert {n: p for n, p in _rules(emu).items() if ip_c in str(p)} == c_rule
        lbs.ensure_load_balancer_deleted(CLUSTER, a)
        assert _shape(_rules(emu)) == {("80", "Internet", ip_b), ("443", "Internet", ip_c)}
    finally:
        for svc in (a, b, c):
            lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert _rules(emu) == {}
