"""The retain pass on kccm's ARM emulator (cloud-provider-azure v1.36.5 ``reconcileSecurityGroup``,
its ``RetainSecurityGroup`` step): a destination the cluster no longer has — a Service deleted
while no controller ran, a Node that left — goes from the managed rule at the next ensure of
another Service, in the one security group write that ensure makes; a user's own rule naming
the same address is untouched; with nothing stale an ensure writes nothing. The emulator is
left as found."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from azlb_emu import balancers, network_id, node, resource, service, writes

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.testing.certs import emulator_tls

CLUSTER = "kubernetes"
A_UID = "d1000000-0000-4000-8000-000000000000"
B_UID = "d2000000-0000-4000-8000-000000000000"
NO_FLOATING_IP = {"service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip": "true"}
USER_RULE = "user-allow-ssh"


@dataclass
class View:
    """The cluster as the daemon's caches would show it."""

    services_: list[dict[str, Any]] = field(default_factory=list)
    nodes_: list[dict[str, Any]] = field(default_factory=list)

    def services(self) -> Sequence[dict[str, Any]]:
        return self.services_

    def nodes(self) -> Sequence[dict[str, Any]]:
        return self.nodes_

    def has_synced(self) -> bool:
        return True


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@pytest.fixture
def world(
    emu: AzureEmulator, tmp_path: Any
) -> Iterator[tuple[AzureLoadBalancers, View, list[dict[str, Any]]]]:
    """A balancer client of its own with a view, two Nodes with InternalIPs."""
    baseline = emu.state()
    made = [emu.admin.add_vm(f"keep-{i}") for i in range(2)]
    nodes = []
    for i, vm in enumerate(made):
        item = node(vm)
        item["status"]["addresses"] = [{"type": "InternalIP", "address": f"10.240.7.{i + 4}"}]
        nodes.append(item)
    lbs = balancers(emu, tmp_path)
    view = View(nodes_=list(nodes))
    lbs.use_cluster_view(view)
    yield lbs, view, nodes
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.assert_clean(baseline)


def _group_path(emu: AzureEmulator) -> str:
    return network_id(emu, "networkSecurityGroups", emu.config["nsg"])


def _rules(emu: AzureEmulator) -> dict[str, list[str]]:
    group = resource(emu, "networkSecurityGroups", emu.config["nsg"])
    found = {}
    for item in group["properties"].get("securityRules") or ():
        props = item["properties"]
        dsts = props.get("destinationAddressPrefixes") or [props["destinationAddressPrefix"]]
        found[item["name"]] = sorted(dsts)
    return found


def _add_user_rule(emu: AzureEmulator, lbs: AzureLoadBalancers, destination: str) -> None:
    """The user's own rule (not ``k8s-azure-lb...``), naming an address kccm will prune."""
    group = lbs.arm.get(_group_path(emu))
    assert group is not None
    group["properties"]["securityRules"].append(
        {
            "name": USER_RULE,
            "properties": {
                "priority": 300,
                "protocol": "Tcp",
                "access": "Allow",
                "direction": "Inbound",
                "sourceAddressPrefix": "*",
                "sourcePortRange": "*",
                "destinationAddressPrefix": destination,
                "destinationPortRange": "22",
            },
        }
    )
    lbs.arm.put(_group_path(emu), group, if_match=group.get("etag"))


def _remove_user_rule(emu: AzureEmulator, lbs: AzureLoadBalancers) -> None:
    group = lbs.arm.get(_group_path(emu))
    assert group is not None
    rules = group["properties"]["securityRules"]
    group["properties"]["securityRules"] = [r for r in rules if r["name"] != USER_RULE]
    lbs.arm.put(_group_path(emu), group, if_match=group.get("etag"))


def _published(svc: dict[str, Any], ip: str) -> dict[str, Any]:
    return {**svc, "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}


def test_a_service_deleted_while_kccm_was_down_leaves_the_shared_rule(
    emu: AzureEmulator, world: tuple[AzureLoadBalancers, View, list[dict[str, Any]]]
) -> None:
    lbs, view, nodes = world
    a, b = service("a", A_UID), service("b", B_UID)
    try:
        ip_a = lbs.ensure_load_balancer(CLUSTER, a, nodes).ingress[0].ip
        view.services_.append(_published(a, ip_a))
        ip_b = lbs.ensure_load_balancer(CLUSTER, b, nodes).ingress[0].ip
        view.services_.append(_published(b, ip_b))
        (shared,) = [name for name, dsts in _rules(emu).items() if dsts == sorted([ip_a, ip_b])]
        _add_user_rule(emu, lbs, ip_b)

        since = emu.admin.last_seq()
        lbs.ensure_load_balancer(CLUSTER, a, nodes)
        assert writes(emu, since) == [], "nothing stale: no write"

        view.services_.pop()  # b deleted while no controller ran: its rules stay behind
        since = emu.admin.last_seq()
        lbs.ensure_load_balancer(CLUSTER, a, nodes)
        assert writes(emu, since) == [f"PUT {_group_path(emu)}"]
        assert _rules(emu) == {shared: [ip_a], USER_RULE: [ip_b]}
    finally:
        _remove_user_rule(emu, lbs)
        for svc in (a, b):
            lbs.ensure_load_balancer_deleted(CLUSTER, svc)
    assert _rules(emu) == {}


def test_a_node_that_left_leaves_the_rule_of_a_service_without_floating_ip(
    emu: AzureEmulator, world: tuple[AzureLoadBalancers, View, list[dict[str, Any]]]
) -> None:
    """Without floating IP the rule's destinations are the Nodes' InternalIPs: the Service's
    own ensure takes out only the addresses it has now, the pass the departed Node's."""
    lbs, view, nodes = world
    a = service("a", A_UID, annotations=NO_FLOATING_IP)
    try:
        ip_a = lbs.ensure_load_balancer(CLUSTER, a, nodes).ingress[0].ip
        view.services_.append(_published(a, ip_a))
        (name,) = _rules(emu)
        assert _rules(emu)[name] == ["10.240.7.4", "10.240.7.5"]

        view.nodes_.pop()  # the Node left the cluster
        lbs.ensure_load_balancer(CLUSTER, a, nodes[:1])
        assert _rules(emu) == {name: ["10.240.7.4"]}
    finally:
        lbs.ensure_load_balancer_deleted(CLUSTER, a)
    assert _rules(emu) == {}
