"""Waiting as OCCM waits: ``WaitActiveAndGetLoadBalancer``'s backoff (1 s, x1.2, 23 polls) on
the kccm clock, 409 "immutable" answered by waiting and sending again (never a failed
Service), a balancer found in ``PENDING_*`` waited for, ``ERROR`` after create deleted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_lb_support import CLUSTER, LBWorld, annotated, lb_world, service

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.loadbalancer.octavia import (
    CONFLICT_RETRIES,
    OctaviaWaitError,
    backoff_schedule,
)


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


def test_backoff_schedule_is_occms() -> None:
    schedule = backoff_schedule(23)
    assert len(schedule) == 22
    assert schedule[:3] == pytest.approx([1.0, 1.2, 1.44])
    assert sum(schedule) == pytest.approx((1.2**22 - 1) / 0.2)


STORMS = [
    # id, method, path regex, times
    ("batch-members", "PUT", r"/pools/[^/]+/members$", 3),
    ("listener-update", "PUT", r"/listeners/[^/]+$", 2),
    ("lb-tags", "PUT", r"/loadbalancers/[^/]+$", 4),
]


@pytest.mark.parametrize(
    ("method", "path", "times"), [s[1:] for s in STORMS], ids=[s[0] for s in STORMS]
)
def test_conflict_storm_is_waited_out(world: LBWorld, method: str, path: str, times: int) -> None:
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes[:1])
    svc = world.with_written(svc)
    # a change that needs each of the faulted writes: a node joins, the connection limit and
    # the tags change (the tag is dropped first)
    lb = world.lb_named(svc)
    balancers.octavia.update_load_balancer(lb["id"], {"tags": []})
    world.emu.admin.fault("load-balancer", method, path, kind="conflict", times=times)
    changed = annotated(svc, annotations={"loadbalancer.openstack.org/connection-limit": "50"})
    before = world.seq()
    status = balancers.ensure_load_balancer(CLUSTER, changed, world.nodes)
    assert status.ingress[0].ip
    answered = [r["status"] for r in world.emu.admin.requests(before) if r["method"] == method]
    assert answered.count(409) == times
    balancers.ensure_load_balancer_deleted(CLUSTER, changed)


def test_endless_conflict_fails_after_the_retries(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes[:1])
    svc = world.with_written(svc)
    world.emu.admin.fault("load-balancer", "PUT", r"/members$", kind="conflict", times=0)
    with pytest.raises(CloudProviderError, match="409"):
        balancers.update_load_balancer(CLUSTER, svc, world.nodes)
    conflicts = [
        r for r in world.emu.admin.requests() if r["status"] == 409 and r["method"] == "PUT"
    ]
    assert len(conflicts) >= CONFLICT_RETRIES + 1
    world.emu.admin.clear_faults()
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_create_waits_with_the_backoff_on_the_clock(world: LBWorld) -> None:
    world.emu.admin.set_config(lb_active_delay=0.2)
    try:
        balancers = world.balancers()
        svc = service()
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    finally:
        world.emu.admin.set_config(lb_active_delay=0.05)
    assert world.clock.sleeps[:2] == pytest.approx([1.0, 1.2])
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_wait_gives_up_after_the_steps(world: LBWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCCM_WAIT_LB_ACTIVE_STEPS", "3")
    balancers = world.balancers()
    world.emu.admin.set_config(lb_active_delay=2.0)
    try:
        created = balancers.octavia.create_load_balancer(
            {"name": "slow", "vip_subnet_id": world.ids["private_subnet_id"]}
        )
        with pytest.raises(OctaviaWaitError, match="timeout waiting"):
            balancers.octavia.wait_active(created["id"])
        assert world.clock.sleeps == pytest.approx([1.0, 1.2])
    finally:
        world.emu.admin.set_config(lb_active_delay=0.05)
    monkeypatch.delenv("OCCM_WAIT_LB_ACTIVE_STEPS")
    balancers.octavia.wait_active(created["id"])
    balancers.octavia.delete_load_balancer(created["id"], cascade=True)


def test_pending_balancer_is_waited_for(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes[:1])
    svc = world.with_written(svc)
    lb = world.lb_named(svc)
    world.emu.admin.set_config(lb_active_delay=0.3)
    try:
        balancers.octavia.api.request(
            "load-balancer",
            "PUT",
            f"/v2/lbaas/loadbalancers/{lb['id']}",
            json={"loadbalancer": {"description": "x"}},
            operation="test",
        )
        balancers.update_load_balancer(CLUSTER, svc, world.nodes)
    finally:
        world.emu.admin.set_config(lb_active_delay=0.05)
    (pool,) = balancers.octavia.pools(lb["id"])
    assert len(balancers.octavia.members(pool["id"])) == 2
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_balancer_in_error_after_create_is_deleted(world: LBWorld) -> None:
    """``createOctaviaLoadBalancer``: ERROR while waiting -> deleted, the sync fails, the next
    one creates it again."""
    balancers = world.balancers()
    svc = service()
    world.emu.admin.fault(
        "load-balancer",
        "GET",
        r"/loadbalancers/[0-9a-f-]{36}$",
        status=200,
        times=1,
        body={"loadbalancer": {"provisioning_status": "ERROR"}},
    )
    with pytest.raises(CloudProviderError, match=r"has gone into ERROR state.*deleted"):
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert balancers.octavia.list_load_balancers() == []
    status = balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert status.ingress[0].ip
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_failed_polls_are_polled_again(world: LBWorld) -> None:
    """``WaitActiveAndGetLoadBalancer``: a failed GET (here 503, then 500) is logged and the
    balancer polled again."""
    balancers = world.balancers()
    svc = service()
    for status in (503, 500):
        world.emu.admin.fault(
            "load-balancer", "GET", r"/loadbalancers/[0-9a-f-]{36}$", status=status, times=1
        )
    assert balancers.ensure_load_balancer(CLUSTER, svc, world.nodes).ingress[0].ip
    assert len(world.clock.sleeps) >= 2
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
