"""node-route-controller reconcile: route fields, failed creates, conflict retry, delete-before-
create ordering and the concurrency bound."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from route_harness import (
    A3,
    CLUSTER,
    NODE1,
    NODE3,
    NODE_NO_CIDR,
    Env,
    ip,
    node,
    r,
    route_set,
)

from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.types import NodeAddress, Route
from kccm.kube.errors import Conflict
from kccm.kube.resources import EVENTS
from kccm.providers.fake import FakeCloud, FakeCloudError
from kccm.util.clock import FakeClock


async def test_created_routes_carry_uid_hint_addresses_and_only_pod_cidrs(env: Env) -> None:
    """podCIDR alone is never read: a node with only spec.podCIDR gets no route."""
    only_singular = {
        "metadata": {"name": "legacy", "uid": "u-legacy"},
        "spec": {"podCIDR": "10.120.7.0/24"},
        "status": {"addresses": [ip("10.0.7.1")]},
    }
    stored = await env.add_nodes([NODE3, only_singular])
    await env.controller().reconcile(stored, [])
    creates = [c.args for c in env.cloud.call_log if c.method == "create_route"]
    uid = stored[0]["metadata"]["uid"]
    assert sorted((a[0], a[1], a[2].destination_cidr) for a in creates) == [
        (CLUSTER, uid, "10.120.0.0/24"),
        (CLUSTER, uid, "a00:100::/24"),
    ]
    assert all(a[2].target_node_addresses == (NodeAddress("InternalIP", A3),) for a in creates)
    assert await env.condition("legacy") is None


async def test_failed_create_records_event_and_no_route_created(env: Env) -> None:
    stored = await env.add_nodes([NODE1])
    env.cloud.set_latency("create_route", 1.5)
    env.cloud.fail("create_route", FakeCloudError("quota exceeded"))
    rc = env.controller()
    task = asyncio.create_task(rc.reconcile(stored, []))
    await env.clock.run_until_idle()
    await task
    assert env.cloud.calls.count("create_route") == 1  # cloud errors are not retried
    assert await env.events_written() == [
        (
            "Warning",
            "FailedToCreateRoute",
            "node-1",
            f"Could not create route {stored[0]['metadata']['uid']} 10.120.0.0/24 for node node-1"
            " after 1.5s: quota exceeded",
        )
    ]
    event = env.kube.objects(EVENTS)[0]
    assert event["source"] == {"component": "route_controller"}
    # v0.36.3: apiVersion v1 and the Node's real UID (not its name)
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "node-1",
        "uid": stored[0]["metadata"]["uid"],
    }
    cond = await env.condition("node-1")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "NoRouteCreated",
        "RouteController failed to create a route",
    )


async def test_create_is_retried_on_conflict_only(env: Env) -> None:
    stored = await env.add_nodes([NODE1])
    env.cloud.fail("create_route", Conflict("the object has been modified"), times=2)
    task = asyncio.create_task(env.controller().reconcile(stored, []))
    await env.clock.run_until_idle()
    await task
    assert env.cloud.calls.count("create_route") == 3
    assert route_set(await env.routes()) == route_set([r("node-1", "10.120.0.0/24", "10.0.1.1")])
    assert [e[1] for e in await env.events_written()] == ["FailedToCreateRoute"]
    assert env.kube.objects(EVENTS)[0]["count"] == 2  # one warning per failed attempt
    cond = await env.condition("node-1")
    assert cond is not None
    assert cond["reason"] == "RouteCreated"


async def test_node_with_cloud_routes_but_no_pod_cidrs_gets_no_route_created(env: Env) -> None:
    stored = await env.add_nodes([NODE_NO_CIDR])
    await env.seed_routes([r("node-2", "10.120.1.0/24", "10.0.5.1")])
    await env.controller().reconcile(stored, await env.routes())
    assert await env.routes() == []
    cond = await env.condition("node-2")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "NoRouteCreated")


async def test_deletes_finish_before_creates_when_routes_track_addresses(env: Env) -> None:
    stored = await env.add_nodes([NODE1])
    initial = await env.seed_routes([r("node-1", "10.120.0.0/24", "10.0.1.9", track=True)])
    env.cloud.set_latency("delete_route", 2.0)
    task = asyncio.create_task(env.controller().reconcile(stored, initial))
    await env.clock.run_until_idle()
    await task
    assert env.cloud.calls == ["delete_route", "create_route"]
    assert route_set(await env.routes()) == route_set([r("node-1", "10.120.0.0/24", "10.0.1.1")])


class HeldDeletes(FakeCloud):
    """A FakeCloud whose ``delete_route`` is held until the test releases it."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.delete_entered = asyncio.Event()
        self.release = asyncio.Event()

    async def delete_route(self, cluster_name: str, route: Route) -> None:
        self.delete_entered.set()
        await self.release.wait()
        await super().delete_route(cluster_name, route)


@pytest.mark.parametrize(
    ("stale", "creates_while_deleting"),
    [
        pytest.param(
            r("node-1", "10.120.0.0/24", "10.0.1.9", track=True),
            [],
            id="tracked-addresses-changed-create-waits-for-the-delete",
        ),
        pytest.param(
            r("node-1", "10.120.9.0/24", "10.0.1.1"),
            ["create_route"],
            id="untracked-create-runs-beside-the-delete",
        ),
    ],
)
async def test_create_waits_while_a_delete_is_in_flight_only_when_routes_track_addresses(
    stale: Route, creates_while_deleting: list[str]
) -> None:
    """Upstream reconcile(): ``if routes[0].EnableNodeAddresses { wg.Wait() }`` before the
    creates (kubernetes#98359: an update is a delete then an add of the same CIDR). Observed
    while the delete is still held, not afterwards from the call order."""
    env = Env()
    env.cloud = HeldDeletes(env.clock)
    env.context = replace(env.context, cloud=GatedCloud(env.cloud, env.gate))
    env.events.start()
    try:
        stored = await env.add_nodes([NODE1])
        initial = await env.seed_routes([stale])
        task = asyncio.create_task(env.controller().reconcile(stored, initial))
        await asyncio.wait_for(env.cloud.delete_entered.wait(), 5)
        await env.clock.run_until_idle()  # everything that can run without the delete has run
        assert not task.done()
        assert [c for c in env.cloud.calls if c == "create_route"] == creates_while_deleting
        env.cloud.release.set()
        await env.clock.run_until_idle()
        await asyncio.wait_for(task, 5)
        assert sorted(env.cloud.calls) == ["create_route", "delete_route"]
        assert route_set(await env.routes()) == route_set(
            [r("node-1", "10.120.0.0/24", "10.0.1.1")]
        )
    finally:
        env.cloud.release.set()
        await env.events.shutdown()
        env.gate.close()


async def test_blackhole_route_is_replaced_by_a_real_one_on_the_next_reconcile(env: Env) -> None:
    """The blackhole's CIDR is still on its node: the first reconcile deletes it (action stays
    keep, so nothing is created yet), the next one creates the real route."""
    stored = await env.add_nodes([NODE1])
    listed = await env.seed_routes([r("node-1", "10.120.0.0/24", "10.0.1.1", blackhole=True)])
    rc = env.controller()
    await rc.reconcile(stored, listed)
    assert (env.cloud.calls, await env.routes()) == (["delete_route"], [])
    await rc.reconcile(stored, await env.routes())
    assert route_set(await env.routes()) == route_set([r("node-1", "10.120.0.0/24", "10.0.1.1")])


async def test_without_address_tracking_deletes_and_creates_run_concurrently(env: Env) -> None:
    stored = await env.add_nodes([NODE1])
    initial = await env.seed_routes([r("node-1", "10.120.9.0/24", "10.0.1.1")])
    env.cloud.set_latency("delete_route", 2.0)
    task = asyncio.create_task(env.controller().reconcile(stored, initial))
    await env.clock.advance(1.0)
    assert env.cloud.calls == ["delete_route", "create_route"]
    assert len(await env.routes()) == 2  # the create landed while the delete is in flight
    await env.clock.run_until_idle()
    await task
    assert route_set(await env.routes()) == route_set([r("node-1", "10.120.0.0/24", "10.0.1.1")])


@pytest.mark.parametrize("limit", [pytest.param(1, id="one"), pytest.param(3, id="three")])
async def test_cloud_route_operations_are_bounded(limit: int) -> None:
    env = Env("10.0.0.0/8", max_concurrent_route_operations=limit)
    env.events.start()
    nodes = [node(f"n{i}", f"u{i}", [f"10.1.{i}.0/24"], f"10.0.0.{i}") for i in range(8)]
    stored = await env.add_nodes(nodes)
    initial = await env.seed_routes([r("gone", f"10.2.{i}.0/24", None) for i in range(4)])
    env.cloud.set_latency("*", 1.0)
    started = env.clock.monotonic()
    task = asyncio.create_task(env.controller().reconcile(stored, initial))
    await env.clock.advance(0.5)
    assert len(env.cloud.calls) == limit  # the rest wait on the semaphore
    await env.clock.run_until_idle()
    await task
    # 12 operations of 1 s each, `limit` at a time.
    assert env.clock.monotonic() - started == pytest.approx(-(-12 // limit))
    assert env.cloud.calls.count("create_route") == 8
    assert env.cloud.calls.count("delete_route") == 4
    await env.events.shutdown()
    env.gate.close()


async def test_default_bound_is_upstream_200(env: Env) -> None:
    assert env.controller().options.max_concurrent_route_operations == 200
