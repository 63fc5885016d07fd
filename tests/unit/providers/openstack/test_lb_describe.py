"""``describe_load_balancer`` (issue 27) against the emulator: listeners from Octavia, each
member's health from the status tree (``GET /v2/lbaas/loadbalancers/{id}/status``), a
stopped server's member ``ERROR`` under a health monitor; reads only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, annotated, lb_world, service

from kccm.providers.openstack.loadbalancer.describe import member_health, member_node


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


TWO_PORTS = {
    "ports": [
        {"name": "dns", "port": 53, "nodePort": 30053, "protocol": "UDP"},
        {"name": "web", "port": 80, "nodePort": 30080, "protocol": "TCP"},
    ]
}


@pytest.mark.parametrize(
    ("lb", "stop_first", "first", "others"),
    [
        pytest.param({}, False, "unknown", "unknown", id="no-monitor"),
        pytest.param({"create-monitor": "true"}, False, "healthy", "healthy", id="monitored"),
        pytest.param(
            {"create-monitor": "true"}, True, "unhealthy", "healthy", id="monitored-one-stopped"
        ),
    ],
)
def test_describe_shows_listeners_and_member_health(
    world: LBWorld, lb: dict[str, str], stop_first: bool, first: str, others: str
) -> None:
    balancers = world.balancers(**lb)
    svc = annotated(service(), **TWO_PORTS)
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    written = world.with_written(svc)
    if stop_first:
        world.emu.admin.set_server_status(world.servers[0]["id"], "SHUTOFF")
    before, ledger = world.seq(), balancers.octavia.api.ledger.snapshot()
    view = balancers.describe_load_balancer(CLUSTER, written)
    assert world.writes(before) == []
    spent = balancers.octavia.api.ledger.snapshot().since(ledger)
    assert spent.total_writes == 0
    assert spent.total_reads == 3, "the balancer, its listeners, its status tree"
    assert view is not None
    assert view.state == "ACTIVE"
    assert [(li.port, li.protocol) for li in view.listeners] == [(53, "UDP"), (80, "TCP")]
    names = [s["name"] for s in world.servers]
    for listener, node_port in zip(view.listeners, (30053, 30080), strict=True):
        got = {t.node: (str(t.health), t.port) for t in listener.targets}
        want = {n: (others, node_port) for n in names}
        want[names[0]] = (first, node_port)
        assert got == want
        assert all(t.address and t.instance for t in listener.targets)
    if stop_first:
        world.emu.admin.set_server_status(world.servers[0]["id"], "ACTIVE")
    balancers.ensure_load_balancer_deleted(CLUSTER, written)
    assert balancers.describe_load_balancer(CLUSTER, written) is None


@pytest.mark.parametrize(
    ("member", "health", "detail"),
    [
        pytest.param({"operating_status": "ONLINE"}, "healthy", "", id="online"),
        pytest.param({"operating_status": "ERROR"}, "unhealthy", "ERROR", id="error"),
        pytest.param({"operating_status": "OFFLINE"}, "unhealthy", "OFFLINE", id="offline"),
        pytest.param(
            {"operating_status": "NO_MONITOR"}, "unknown", "no health monitor", id="no-monitor"
        ),
        pytest.param(
            {"operating_status": "ONLINE", "provisioning_status": "PENDING_UPDATE"},
            "healthy",
            "provisioning PENDING_UPDATE",
            id="pending",
        ),
        pytest.param({"operating_status": "DRAINING"}, "unknown", "DRAINING", id="draining"),
    ],
)
def test_member_health(member: dict[str, Any], health: str, detail: str) -> None:
    got_health, got_detail = member_health(member)
    assert str(got_health) == health
    assert detail in got_detail
    assert bool(got_detail) is bool(detail)


@pytest.mark.parametrize(
    ("name", "node"),
    [
        pytest.param("node-a", "node-a", id="batch-name"),
        pytest.param("member_node_a_10.0.0.5_30080", "node_a", id="one-by-one-name"),
        pytest.param("", "", id="unnamed"),
    ],
)
def test_member_node(name: str, node: str) -> None:
    assert member_node({"name": name}) == node
