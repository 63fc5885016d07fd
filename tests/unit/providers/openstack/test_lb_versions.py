"""What an older Octavia gets (upstream ``IsOctaviaFeatureSupported``: the last entry of the
version discovery document): no tags before 2.5, no timeouts before 2.1, no ``allowed_cidrs``
before 2.12 (the source ranges are then ignored), no availability zone before 2.14. The
emulator answers the discovery GET with an older list (an injected 200)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


def _versions(last: int) -> dict[str, Any]:
    return {"versions": [{"id": f"v2.{n}", "status": "SUPPORTED"} for n in range(last + 1)]}


VERSIONS = [
    # id, newest minor version, tags?, timeouts?, allowed_cidrs?
    ("v2.0", 0, False, False, False),
    ("v2.4", 4, False, True, False),
    ("v2.11", 11, True, True, False),
    ("v2.12", 12, True, True, True),
]


@pytest.mark.parametrize(
    ("minor", "tags", "timeouts", "cidrs"), [v[1:] for v in VERSIONS], ids=[v[0] for v in VERSIONS]
)
def test_features_follow_the_version(
    world: LBWorld, minor: int, tags: bool, timeouts: bool, cidrs: bool
) -> None:
    world.emu.admin.fault(
        "load-balancer", "GET", r"^/load-balancer/?$", status=200, body=_versions(minor), times=1
    )
    balancers = world.balancers()
    svc = service(
        loadBalancerSourceRanges=["10.20.0.0/16"],
        annotations={ann.AVAILABILITY_ZONE: "nova", ann.TIMEOUT_CLIENT_DATA: "1234"},
    )
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert balancers.octavia.version() == (2, minor)
    lb = world.lb_named(svc)
    (listener,) = balancers.octavia.listeners(lb["id"])
    assert bool(lb.get("tags")) == tags
    assert bool(listener.get("tags")) == tags
    assert (listener.get("timeout_client_data") == 1234) == timeouts
    assert (listener.get("allowed_cidrs") == ["10.20.0.0/16"]) == cidrs
    assert not lb.get("availability_zone")
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_availability_zone_from_2_14(world: LBWorld) -> None:
    balancers = world.balancers(**{"availability-zone": "nova"})
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert world.lb_named(svc)["availability_zone"] == "nova"
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
