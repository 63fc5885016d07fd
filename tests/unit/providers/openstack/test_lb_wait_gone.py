"""A balancer that disappears while kccm waits for it to turn ``ACTIVE`` ends the wait at once.

Upstream's ``WaitActiveAndGetLoadBalancer`` logs a 404 and polls it to the end of its backoff
(about 4.5 minutes); found by the daemon end-to-end test, where a node-sync update still waiting
on a balancer that the Service's delete had removed kept a worker, and the daemon's shutdown,
for minutes. kccm treats gone as final (``Octavia.wait_active``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_lb_support import LBWorld, lb_world

from kccm.providers.openstack.loadbalancer.octavia import OctaviaWaitError


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


def test_a_balancer_deleted_during_the_wait_ends_it_without_polling_on(world: LBWorld) -> None:
    balancers = world.balancers()
    world.emu.admin.set_config(lb_active_delay=3600.0)  # stays PENDING_CREATE until deleted
    try:
        created = balancers.octavia.create_load_balancer(
            {"name": "vanishing", "vip_subnet_id": world.ids["private_subnet_id"]}
        )
        world.emu.admin.fault(
            "load-balancer", "GET", rf"/loadbalancers/{created['id']}$", status=404, times=1
        )
        with pytest.raises(OctaviaWaitError, match="is gone"):
            balancers.octavia.wait_active(created["id"])
    finally:
        world.emu.admin.set_config(lb_active_delay=0.05)
        world.emu.admin.clear_faults()
    assert world.clock.sleeps == [], "the 404 was polled again instead of ending the wait"
    world.emu.admin.settle()  # its PENDING_CREATE timer was set for an hour
    balancers.octavia.wait_active(created["id"])
    balancers.octavia.delete_load_balancer(created["id"], cascade=True)
