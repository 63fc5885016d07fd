"""The local provider's address retention (AddressRetainer over the VIP claims): a released
balancer's VIP stays claimed and marked, goes back to a Service of the same namespace/name or
to one asking for it, and is listed and released through the provider."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import RetainedAddress, as_address_retainer
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import LocalStore

CLUSTER = "kubernetes"
NODES = [
    {
        "metadata": {"name": "n1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.10.1"}]},
    }
]


def svc(
    name: str = "web", ns: str = "ns", annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "annotations": annotations or {},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}],
            **spec,
        },
    }


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    store = LocalStore(tmp_path / "state.db")
    yield LocalCloud(store, load_local_config(io.StringIO("")))
    store.close()


def vip(cloud: LocalCloud, service: dict[str, Any]) -> str:
    status = cloud.ensure_load_balancer(CLUSTER, service, NODES)
    return status.ingress[0].ip


def keep(cloud: LocalCloud, service: dict[str, Any]) -> list[RetainedAddress]:
    return list(cloud.ensure_load_balancer_deleted_keeping_address(CLUSTER, service))


@dataclass(frozen=True)
class Case:
    """Ensure ``web``, release it (kept or not), then ensure ``then``: same VIP or not."""

    kept: bool
    then: Callable[[str], dict[str, Any]]
    same_vip: bool


CASES = {
    "kept-same-owner-gets-it-back": Case(True, lambda ip: svc(), True),
    "kept-other-owner-asking-gets-it": Case(True, lambda ip: svc("api", loadBalancerIP=ip), True),
    "kept-other-owner-not-asking-gets-another": Case(True, lambda ip: svc("api"), False),
    "released-same-owner-gets-the-first-free": Case(False, lambda ip: svc(), True),
    "released-other-owner-gets-the-first-free": Case(False, lambda ip: svc("api"), True),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_kept_vip_goes_back_to_its_owner_or_whoever_asks(cloud: LocalCloud, case: Case) -> None:
    first = vip(cloud, svc())
    if case.kept:
        assert keep(cloud, svc()) == [
            RetainedAddress(first, "ns/web", detail="ip_claims row, retain=1")
        ]
    else:
        cloud.ensure_load_balancer_deleted(CLUSTER, svc())
    assert (vip(cloud, case.then(first)) == first) is case.same_vip
    still_kept = case.kept and not case.same_vip
    assert [a.address for a in cloud.list_retained_addresses(CLUSTER)] == [first] * still_kept


def test_kept_vip_is_listed_until_released_and_then_free(cloud: LocalCloud) -> None:
    first = vip(cloud, svc())
    keep(cloud, svc())
    assert [a.address for a in cloud.list_retained_addresses(CLUSTER)] == [first]
    assert vip(cloud, svc("api")) != first  # still held while retained
    assert cloud.release_retained_address(CLUSTER, first) is True
    assert cloud.list_retained_addresses(CLUSTER) == []
    assert [c.ip for c in cloud.store.list_ip_claims() if c.owner == "ns/web"] == []
    assert vip(cloud, svc("other")) == first  # the first free address again


RELEASES = {
    "unknown-address": ("192.0.2.99", False),
    "in-use-address": ("in-use", False),
}


@pytest.mark.parametrize(("address", "released"), RELEASES.values(), ids=RELEASES.keys())
def test_release_refuses_what_is_not_a_free_retained_address(
    cloud: LocalCloud, address: str, released: bool
) -> None:
    in_use = vip(cloud, svc(annotations={"local.kccm.io/retain-ip": "true"}))
    target = in_use if address == "in-use" else address
    assert cloud.release_retained_address(CLUSTER, target) is released
    assert [c.ip for c in cloud.store.list_ip_claims()] == [in_use]


def test_local_retain_ip_annotation_maps_onto_retention(cloud: LocalCloud) -> None:
    """The provider's own annotation keeps the claim on its plain delete, and the kept claim
    is what ``kccm addresses`` lists and releases."""
    annotated = svc(annotations={"local.kccm.io/retain-ip": "true"})
    first = vip(cloud, annotated)
    cloud.ensure_load_balancer_deleted(CLUSTER, annotated)
    assert [(a.address, a.owner) for a in cloud.list_retained_addresses(CLUSTER)] == [
        (first, "ns/web")
    ]
    assert cloud.release_retained_address(CLUSTER, first) is True


def test_keeping_is_idempotent_and_the_capability_is_found(cloud: LocalCloud) -> None:
    assert as_address_retainer(cloud) is cloud
    first = vip(cloud, svc())
    assert [a.address for a in keep(cloud, svc())] == [first]
    assert [a.address for a in keep(cloud, svc())] == [first]
    assert cloud.store.list_load_balancers() == []
