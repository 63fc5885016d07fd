"""Address retention on kccm's ARM emulator: a kept public IP outlives its balancer, marked in
its tags; the Service re-created with the same namespace/name, or one asking for the address,
takes it back (no new public IP, the same address); an unchanged ensure then writes nothing; a
user's public IP (``azure-pip-name``) is never marked nor deleted; ``release`` frees only kept
ones. Each test leaves the emulator as it found it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azlb_emu import balancers, network_id, node, resource, service, writes

from kccm.emulators.azure import AzureEmulator, azure_emulator
from kccm.providers.azure.loadbalancer import AzureLoadBalancers
from kccm.testing.certs import emulator_tls

CLUSTER = "kubernetes"
FIRST = "1a000000-0000-4000-8000-000000000000"
AGAIN = "2a000000-0000-4000-8000-000000000000"
OTHER = "3a000000-0000-4000-8000-000000000000"
MARKS = ("kccm-owner", "kccm-cluster", "kccm-retained")


@pytest.fixture(scope="module")
def emu() -> Iterator[AzureEmulator]:
    with azure_emulator(tls=emulator_tls()) as running:
        yield running


@pytest.fixture(scope="module")
def lbs(emu: AzureEmulator, tmp_path_factory: pytest.TempPathFactory) -> AzureLoadBalancers:
    return balancers(emu, tmp_path_factory.mktemp("azure"))


@pytest.fixture
def nodes(emu: AzureEmulator, lbs: AzureLoadBalancers) -> Iterator[list[dict[str, Any]]]:
    baseline = emu.state()
    made = [emu.admin.add_vm("keep-0")]
    yield [node(vm) for vm in made]
    for kept in lbs.list_retained_addresses(CLUSTER):
        lbs.release_retained_address(CLUSTER, kept.id)
    for vm in made:
        emu.admin.delete_vm(vm["id"])
    emu.assert_clean(baseline)


def _pips(emu: AzureEmulator) -> set[str]:
    return {str(i).rsplit("/", 1)[1] for i in emu.state()["publicIPAddresses"]}


def _by_name(uid: str) -> dict[str, Any]:
    return service("web", uid)


def _by_address(uid: str, address: str) -> dict[str, Any]:
    return service("other", uid, loadBalancerIP=address)


@pytest.mark.parametrize(
    "again",
    [
        pytest.param(lambda address: _by_name(AGAIN), id="same-namespace-name"),
        pytest.param(lambda address: _by_address(OTHER, address), id="asking-for-the-address"),
    ],
)
def test_a_kept_public_ip_comes_back(
    emu: AzureEmulator,
    lbs: AzureLoadBalancers,
    nodes: list[Any],
    again: Callable[[str], dict[str, Any]],
) -> None:
    first = _by_name(FIRST)
    address = lbs.ensure_load_balancer(CLUSTER, first, nodes).ingress[0].ip
    (kept,) = lbs.ensure_load_balancer_deleted_keeping_address(CLUSTER, first)
    assert (kept.address, kept.owner) == (address, "default/web")
    assert lbs.ensure_load_balancer_deleted_keeping_address(CLUSTER, first) == [kept]
    assert lbs.get_load_balancer(CLUSTER, first) == (None, False)
    pip = emu.admin.resource(kept.id)
    assert {k: pip["tags"][k] for k in MARKS} == {
        "kccm-owner": "default/web",
        "kccm-cluster": CLUSTER,
        "kccm-retained": "true",
    }
    assert pip["tags"]["k8s-azure-service"] == ""
    assert lbs.list_retained_addresses(CLUSTER) == [kept]

    second = again(address)
    pips_before = _pips(emu)
    assert lbs.ensure_load_balancer(CLUSTER, second, nodes).ingress[0].ip == address
    assert _pips(emu) == pips_before, "a new public IP was made"
    assert lbs.list_retained_addresses(CLUSTER) == []
    tags = emu.admin.resource(kept.id)["tags"]
    assert "kccm-retained" not in tags
    assert tags["k8s-azure-service"] == f"default/{second['metadata']['name']}"
    since = emu.admin.last_seq()
    lbs.ensure_load_balancer(CLUSTER, second, nodes)
    assert writes(emu, since) == []

    lbs.ensure_load_balancer_deleted(CLUSTER, second)
    assert _pips(emu) == pips_before - {pip["name"]}


def test_release_frees_only_kept_public_ips(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]
) -> None:
    svc = _by_name(FIRST)
    address = lbs.ensure_load_balancer(CLUSTER, svc, nodes).ingress[0].ip
    assert not lbs.release_retained_address(CLUSTER, address), "in use, yet released"
    (kept,) = lbs.ensure_load_balancer_deleted_keeping_address(CLUSTER, svc)
    assert not lbs.release_retained_address("another-cluster", address)
    assert lbs.release_retained_address(CLUSTER, kept.id.rsplit("/", 1)[1])
    assert not lbs.release_retained_address(CLUSTER, address)
    assert lbs.list_retained_addresses(CLUSTER) == []


def test_a_users_public_ip_is_neither_marked_nor_deleted(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any]
) -> None:
    path = network_id(emu, "publicIPAddresses", "users-own")
    body = {
        "location": emu.config["location"],
        "sku": {"name": "Standard"},
        "tags": {"team": "web"},
        "properties": {"publicIPAllocationMethod": "Static"},
    }
    lbs.arm.put(path, body, if_match=None)
    try:
        svc = service(
            "web", FIRST, annotations={"service.beta.kubernetes.io/azure-pip-name": "users-own"}
        )
        lbs.ensure_load_balancer(CLUSTER, svc, nodes)
        assert lbs.ensure_load_balancer_deleted_keeping_address(CLUSTER, svc) == []
        pip = resource(emu, "publicIPAddresses", "users-own")
        assert pip["tags"] == {"team": "web"}
        assert "ipConfiguration" not in pip["properties"]
        assert lbs.list_retained_addresses(CLUSTER) == []
        assert not lbs.release_retained_address(CLUSTER, "users-own")
    finally:
        lbs.arm.delete(path)


def test_the_owner_mark_outlives_system_tags_pruning(
    emu: AzureEmulator, lbs: AzureLoadBalancers, nodes: list[Any], tmp_path: Path
) -> None:
    """With ``systemTags`` upstream drops tags it does not know; the owner mark of a public IP
    taken back stays (else the next ensure would make a new ``<cluster>-<uid>`` one)."""
    pruning = balancers(emu, tmp_path, systemTags="k8s-azure")
    first = _by_name(FIRST)
    address = pruning.ensure_load_balancer(CLUSTER, first, nodes).ingress[0].ip
    pruning.ensure_load_balancer_deleted_keeping_address(CLUSTER, first)
    second = _by_name(AGAIN)
    assert pruning.ensure_load_balancer(CLUSTER, second, nodes).ingress[0].ip == address
    since = emu.admin.last_seq()
    assert pruning.ensure_load_balancer(CLUSTER, second, nodes).ingress[0].ip == address
    assert writes(emu, since) == []
    pruning.ensure_load_balancer_deleted(CLUSTER, second)
