"""node-route-controller on the fake provider and FakeKube, mirroring upstream's
route_controller_test.go TestReconcile."""

from __future__ import annotations

from typing import Any

import pytest
from route_harness import (
    A3,
    A4,
    NODE1,
    NODE2,
    NODE3,
    NODE4,
    NODE_NO_CIDR,
    Env,
    r,
    route_set,
)

from kccm.cloudprovider.types import Route

# -- TestReconcile (checklist 43, 44, 46) ------------------------------------------------------


RECONCILE_CASES = [
    pytest.param(
        [NODE3, NODE4],
        [
            r("node-3", "10.120.0.0/24", None, track=True),
            r("node-4", "10.120.1.0/24", None, track=True),
            r("node-3", "a00:100::/24", None, track=True),
            r("node-4", "a00:200::/24", None, track=True),
        ],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="routes-have-no-target-addresses-at-the-beginning",
    ),
    pytest.param(
        [NODE3, NODE4],
        [
            r("node-3", "10.120.0.0/24", "10.0.13.1", track=True),
            r("node-4", "10.120.1.0/24", "10.0.14.1", track=True),
            r("node-3", "a00:100::/24", "10.0.13.1", track=True),
            r("node-4", "a00:200::/24", "10.0.14.1", track=True),
        ],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="routes-target-addresses-changed",
    ),
    pytest.param(
        [NODE3, NODE4],
        [],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="multicidr-2-nodes-and-no-routes",
    ),
    pytest.param(
        [NODE3, NODE4],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="multicidr-2-nodes-and-all-routes-created",
    ),
    pytest.param(
        [NODE3, NODE4],
        [
            r("node-3", "10.120.1.0/24", A3),
            r("node-4", "10.120.0.0/24", A4),
            r("node-3", "a00:200::/24", A3),
            r("node-4", "a00:100::/24", A4),
        ],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="multicidr-2-nodes-and-few-wrong-routes",
    ),
    pytest.param(
        [NODE3, NODE4],
        [r("node-3", "10.120.0.0/24", A3), r("node-4", "a00:200::/24", A4)],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="multicidr-2-nodes-and-some-routes-created",
    ),
    pytest.param(
        [NODE3, NODE4],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-x", "10.120.2.0/24", "10.0.5.1"),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
            r("node-y", "a00:300::/24", "10.0.6.1"),
        ],
        [
            r("node-3", "10.120.0.0/24", A3),
            r("node-4", "10.120.1.0/24", A4),
            r("node-3", "a00:100::/24", A3),
            r("node-4", "a00:200::/24", A4),
        ],
        True,
        id="multicidr-2-nodes-and-too-many-routes",
    ),
    pytest.param(
        [NODE1, NODE2],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-2-nodes-and-routes-created",
    ),
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.2", track=True),
            r("node-2", "10.120.1.0/24", "10.0.2.2", track=True),
        ],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-node-ips-changed-so-routes-are-updated",
    ),
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.2"),
            r("node-2", "10.120.1.0/24", "10.0.2.2"),
        ],
        [r("node-1", "10.120.0.0/24", "10.0.1.2"), r("node-2", "10.120.1.0/24", "10.0.2.2")],
        False,
        id="address-change-ignored-without-enable-node-addresses",
    ),
    pytest.param(
        [NODE1, NODE2],
        [r("node-1", "10.120.0.0/24", "10.0.1.1")],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-2-nodes-and-one-route-created",
    ),
    pytest.param(
        [NODE1, NODE2],
        [],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-2-nodes-and-no-routes",
    ),
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-2", "10.120.1.0/24", "10.0.2.1"),
            r("node-3", "10.120.2.0/24", "10.0.3.1"),
            r("node-4", "10.120.3.0/24", "10.0.4.1"),
        ],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-2-nodes-and-too-many-routes",
    ),
    pytest.param(
        [NODE1, NODE2],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-3", "10.120.2.0/24", "10.0.2.1")],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="single-cidr-2-nodes-and-2-routes-with-1-incorrect",
    ),
    pytest.param(
        [NODE1, NODE_NO_CIDR],
        [],
        [r("node-1", "10.120.0.0/24", "10.0.1.1")],
        False,
        id="single-cidr-2-nodes-and-one-node-without-cidr-assigned",
    ),
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-2", "10.120.1.0/24", "10.0.2.1"),
            r("", "10.120.2.0/24", "10.0.100.1", blackhole=True),
        ],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-2", "10.120.1.0/24", "10.0.2.1")],
        False,
        id="extra-blackhole-route-in-our-range-is-deleted",
    ),
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-2", "10.120.1.0/24", "10.0.2.1"),
            r("", "10.1.2.0/24", "10.0.100.1", blackhole=True),
        ],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-2", "10.120.1.0/24", "10.0.2.1"),
            r("", "10.1.2.0/24", "10.0.100.1", blackhole=True),
        ],
        False,
        id="extra-blackhole-route-not-in-our-range-is-kept",
    ),
    # upstream reconcile(): `route.Blackhole || shouldDeleteRoute(...)` — the flag alone
    # decides for a route to an existing node whose CIDR is still on it (action "keep"); the
    # route comes back on the next reconcile (see test_blackhole_route_is_replaced_...).
    pytest.param(
        [NODE1, NODE2],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-2", "10.120.1.0/24", "10.0.2.1", blackhole=True),
        ],
        [r("node-1", "10.120.0.0/24", "10.0.1.1")],
        False,
        id="blackhole-route-to-existing-node-with-its-cidr-is-deleted",
    ),
    pytest.param(
        [NODE3],
        [
            r("node-3", "10.120.0.0/24", "10.0.3.1", blackhole=True, track=True),
            r("node-3", "a00:100::/24", "10.0.3.1", track=True),
        ],
        [r("node-3", "a00:100::/24", "10.0.3.1", track=True)],
        True,
        id="blackhole-tracked-route-with-current-addresses-is-deleted",
    ),
    pytest.param(
        [NODE1],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-1", "10.1.0.0/24", "10.0.1.1", blackhole=True),
        ],
        [
            r("node-1", "10.120.0.0/24", "10.0.1.1"),
            r("node-1", "10.1.0.0/24", "10.0.1.1", blackhole=True),
        ],
        False,
        id="blackhole-route-to-existing-node-out-of-range-is-kept",
    ),
    pytest.param(
        [NODE1],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("node-1", "10.120.9.0/24", "10.0.1.1")],
        [r("node-1", "10.120.0.0/24", "10.0.1.1")],
        False,
        id="cidr-no-longer-on-its-node-is-deleted",
    ),
    pytest.param(
        [NODE1],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("", "10.120.5.0/24", None)],
        [r("node-1", "10.120.0.0/24", "10.0.1.1")],
        False,
        id="in-range-route-with-empty-target-is-deleted",
    ),
    pytest.param(
        [NODE1],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("gone", "10.99.0.0/24", None)],
        [r("node-1", "10.120.0.0/24", "10.0.1.1"), r("gone", "10.99.0.0/24", None)],
        False,
        id="out-of-range-route-to-unknown-node-is-kept",
    ),
]


@pytest.mark.parametrize(("nodes", "initial", "expected", "dual_stack"), RECONCILE_CASES)
async def test_reconcile(
    nodes: list[dict[str, Any]],
    initial: list[Route],
    expected: list[Route],
    dual_stack: bool,
) -> None:
    env = Env("10.120.0.0/16,ace:cab:deca::/8" if dual_stack else "10.120.0.0/16")
    env.events.start()
    try:
        stored = await env.add_nodes(nodes)
        await env.seed_routes(initial)
        rc = env.controller()
        await rc.reconcile(stored, await env.routes())
        assert route_set(await env.routes()) == route_set(expected)
        for n in stored:
            cond = await env.condition(n["metadata"]["name"])
            if n["spec"].get("podCIDRs"):
                assert cond is not None
                assert (cond["status"], cond["reason"], cond["message"]) == (
                    "False",
                    "RouteCreated",
                    "RouteController created a route",
                )
            else:
                assert cond is None  # no routes and no pod CIDRs: untouched
        assert await env.events_written() == []
    finally:
        await env.events.shutdown()
        env.gate.close()
