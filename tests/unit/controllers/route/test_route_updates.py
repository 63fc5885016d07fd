"""node-route-controller, mirroring upstream's route_controller_test.go
(TestUpdateNetworkingCondition, TestUpdateNetworkingConditionWithCalicoScenario,
TestHandleNodeUpdate) plus triggering, cadence and metrics."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from route_harness import (
    CLUSTER,
    NODE1,
    NODE2,
    Env,
    cond,
    ip,
    node,
    r,
    route_set,
)

from kccm.controllers.route import (
    QUEUE_KEY,
    node_update_is_relevant,
)
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloudError

# -- TestUpdateNetworkingCondition (+ Calico scenario) (checklist 46) --------------------------


@pytest.mark.parametrize(
    ("existing", "created", "expected", "writes"),
    [
        pytest.param(None, True, ("False", "RouteCreated"), 1, id="none-to-created"),
        pytest.param(None, False, ("True", "NoRouteCreated"), 1, id="none-to-not-created"),
        pytest.param(
            cond("False", "RouteCreated"), True, ("False", "RouteCreated"), 0, id="already-created"
        ),
        pytest.param(
            cond("True", "NoRouteCreated"),
            False,
            ("True", "NoRouteCreated"),
            0,
            id="already-not-created",
        ),
        pytest.param(
            cond("True", "NoRouteCreated"), True, ("False", "RouteCreated"), 1, id="now-created"
        ),
        pytest.param(
            cond("False", "RouteCreated"),
            False,
            ("True", "NoRouteCreated"),
            1,
            id="now-not-created",
        ),
        pytest.param(
            cond("False", "CalicoIsUp"),
            True,
            ("False", "RouteCreated"),
            1,
            id="calico-condition-is-overwritten",
        ),
        pytest.param(
            cond("True", "CalicoIsDown"),
            False,
            ("True", "NoRouteCreated"),
            1,
            id="other-true-reason-is-overwritten",
        ),
    ],
)
async def test_update_networking_condition(
    env: Env,
    existing: dict[str, str] | None,
    created: bool,
    expected: tuple[str, str],
    writes: int,
) -> None:
    status: dict[str, Any] = {"conditions": [existing]} if existing else {}
    (stored,) = await env.add_nodes([node("n", "u", ["10.120.0.0/24"], "10.0.0.1", **status)])
    env.kube.requests.clear()
    await env.controller().update_networking_condition(stored, created)
    assert [q for q in env.kube.requests if q[0] == "patch"] == [("patch", "nodes", "n")] * writes
    got = await env.condition("n")
    assert got is not None
    assert (got["status"], got["reason"]) == expected
    if writes:
        assert got["lastTransitionTime"] == got["lastHeartbeatTime"] == "2026-01-01T00:00:00Z"


# -- TestHandleNodeUpdate (checklist 48) -------------------------------------------------------


def versioned(n: dict[str, Any], rv: str, **changes: Any) -> dict[str, Any]:
    copy = {
        "metadata": {**n["metadata"], "resourceVersion": rv},
        "spec": dict(n["spec"]),
        "status": dict(n["status"]),
    }
    for path, value in changes.items():
        section, key = path.split("__")
        copy[section][key] = value
    return copy


@pytest.mark.parametrize(
    ("old", "new", "relevant"),
    [
        pytest.param(versioned(NODE1, "1"), versioned(NODE1, "1"), True, id="resync-same-rv"),
        pytest.param(versioned(NODE1, "1"), versioned(NODE1, "2"), False, id="nothing-relevant"),
        pytest.param(
            versioned(NODE1, "1"),
            versioned(NODE1, "2", spec__podCIDRs=["10.120.0.0/24", "fd00::/64"]),
            True,
            id="pod-cidrs-changed",
        ),
        pytest.param(
            versioned(NODE1, "1"),
            versioned(NODE1, "2", status__addresses=[ip("10.0.9.9")]),
            True,
            id="addresses-changed",
        ),
        pytest.param(
            versioned(NODE1, "1"),
            versioned(NODE1, "2", status__conditions=[cond("True", "KubeletReady")]),
            False,
            id="heartbeat-only",
        ),
        pytest.param(
            versioned(NODE1, "1"),
            versioned(NODE1, "2", spec__podCIDR="10.9.9.0/24"),
            False,
            id="singular-pod-cidr-is-not-read",
        ),
    ],
)
async def test_handle_node_update(
    env: Env, old: dict[str, Any], new: dict[str, Any], relevant: bool
) -> None:
    assert node_update_is_relevant(old, new) is relevant
    rc = env.controller()
    rc._on_update(old, new)
    assert len(rc.queue) + rc.queue.waiting == (1 if relevant else 0)


# -- triggering, cadence and metrics (checklist 48) --------------------------------------------


async def wait_calls(env: Env, method: str, count: int) -> None:
    for _ in range(200):
        if env.cloud.calls.count(method) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{method}: {env.cloud.calls.count(method)} calls, wanted {count}")


async def test_node_events_are_capped_at_one_reconcile_per_interval() -> None:
    env = Env(safety_reconcile_period=3600.0)
    env.events.start()
    rc = env.controller()
    env.informers.start()
    run = asyncio.create_task(rc.run())
    await wait_calls(env, "list_routes", 1)
    assert env.running() == 1
    await env.kube.create(NODES, NODE1)  # the first event finds a token: at once
    await wait_calls(env, "list_routes", 2)
    await env.clock.advance(3.0)
    await env.kube.create(NODES, NODE2)  # within the interval: waits for the next token
    await env.clock.advance(6.9)
    assert env.cloud.calls.count("list_routes") == 2
    await env.clock.advance(0.1)  # ten seconds after the event-driven reconcile
    await wait_calls(env, "list_routes", 3)
    await env.clock.advance(60.0)
    assert env.cloud.calls.count("list_routes") == 3  # no events, no safety tick yet
    assert route_set(await env.routes()) == route_set(
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")]
    )
    assert env.metric("route_controller_route_sync_total") == 3
    assert rc.queue.name == "Routes"
    assert env.metric("workqueue_adds_total", name="Routes") >= 2
    await rc.stop(1.0)
    await run
    assert env.running() == 0
    await env.events.shutdown()
    await env.informers.stop()
    env.gate.close()


async def test_safety_reconcile_runs_every_period_without_events() -> None:
    env = Env()  # safety period = route-reconciliation-period = 10 s
    env.events.start()
    await env.kube.create(NODES, NODE1)
    rc = env.controller()
    env.informers.start()
    run = asyncio.create_task(rc.run())
    await wait_calls(env, "create_route", 1)
    await env.clock.advance(0)
    await env.cloud.delete_route(CLUSTER, r("node-1", "10.120.0.0/24", None))  # drift
    env.cloud.clear_calls()
    for tick in range(1, 4):
        await env.clock.advance(10.0)
        await wait_calls(env, "list_routes", tick)
    assert env.cloud.calls.count("list_routes") == 3
    assert route_set(await env.routes()) == route_set([r("node-1", "10.120.0.0/24", "10.0.1.1")])
    await rc.stop(1.0)
    await run
    await env.events.shutdown()
    await env.informers.stop()
    env.gate.close()


async def test_list_routes_error_requeues_rate_limited(env: Env) -> None:
    rc = env.controller()
    env.cloud.fail("list_routes", FakeCloudError("cloud down"), times=1)
    rc.enqueue()
    assert await rc.controller.process_next()
    assert rc.queue.waiting == 1  # AddRateLimited after the failure
    assert env.metric("route_controller_route_sync_total") == 1
    assert QUEUE_KEY not in rc.queue.processing
