"""node-route-controller on the fake provider and FakeKube, mirroring upstream's
route_controller_test.go (TestIsResponsibleForRoute, TestReconcile, TestHandleNodeUpdate,
TestUpdateNetworkingCondition, TestUpdateNetworkingConditionWithCalicoScenario) plus the
start conditions, concurrency bound, conflict retry and cadence."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.types import NodeAddress, Route
from kccm.controllers.base import ControllerContext
from kccm.controllers.route import (
    QUEUE_KEY,
    RouteController,
    RouteControllerOptions,
    build,
    format_go_duration,
    is_responsible_for_route,
    node_update_is_relevant,
    parse_cluster_cidrs,
)
from kccm.kube.errors import Conflict
from kccm.kube.fake import FakeKube
from kccm.kube.resources import EVENTS, NODES
from kccm.providers.fake import FakeCloud, FakeCloudError
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

CLUSTER = "my-k8s"


def ip(address: str) -> dict[str, str]:
    return {"type": "InternalIP", "address": address}


def node(name: str, uid: str, cidrs: Sequence[str], address: str, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if cidrs:
        spec = {"podCIDR": cidrs[0], "podCIDRs": list(cidrs)}
    return {
        "metadata": {"name": name, "uid": uid},
        "spec": spec,
        "status": {"addresses": [ip(address)], **status},
    }


NODE1 = node("node-1", "01", ["10.120.0.0/24"], "10.0.1.1")
NODE2 = node("node-2", "02", ["10.120.1.0/24"], "10.0.2.1")
NODE_NO_CIDR = node("node-2", "02", [], "10.0.5.1")
NODE3 = node("node-3", "03", ["10.120.0.0/24", "a00:100::/24"], "10.0.3.1")
NODE4 = node("node-4", "04", ["10.120.1.0/24", "a00:200::/24"], "10.0.4.1")


def r(
    target: str,
    cidr: str,
    address: str | None,
    *,
    blackhole: bool = False,
    track: bool = False,
) -> Route:
    addrs = () if address is None else (NodeAddress("InternalIP", address),)
    return Route(
        target_node=target,
        destination_cidr=cidr,
        target_node_addresses=addrs,
        blackhole=blackhole,
        enable_node_addresses=track,
    )


class Env:
    """The controller wired to FakeKube, FakeCloud behind a real gate, and fake time."""

    def __init__(self, cluster_cidr: str = "10.120.0.0/16", **options: Any) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube()
        self.registry = CollectorRegistry()
        self.cloud = FakeCloud(clock=self.clock)
        self.gate = CallGate(registry=self.registry, clock=self.clock)
        self.informers = SharedInformerFactory(self.kube, clock=self.clock)
        self.events = EventBroadcaster(self.kube, clock=self.clock)
        self.context = ControllerContext(
            kube=self.kube,
            informers=self.informers,
            cloud=GatedCloud(self.cloud, self.gate),
            events=self.events,
            registry=self.registry,
            clock=self.clock,
            cluster_name=CLUSTER,
        )
        self.options = RouteControllerOptions(cluster_cidr=cluster_cidr, **options)

    def controller(self) -> RouteController:
        built = build(self.context, self.options)
        assert built is not None
        return built

    async def seed_routes(self, routes: Sequence[Route]) -> list[Route]:
        """Put routes in the cloud; returns them as ListRoutes does, with a clean call log."""
        for i, route in enumerate(routes):
            await self.cloud.create_route(CLUSTER, f"seed{i}", route)
        listed = await self.routes()
        self.cloud.clear_calls()
        return listed

    async def add_nodes(self, nodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [await self.kube.create(NODES, n) for n in nodes]

    async def routes(self) -> list[Route]:
        return list(await self.cloud.list_routes(CLUSTER))

    async def condition(self, name: str) -> dict[str, Any] | None:
        got = await self.kube.get(NODES, name)
        for cond in got["status"].get("conditions") or ():
            if cond["type"] == "NetworkUnavailable":
                return dict(cond)
        return None

    async def events_written(self) -> list[tuple[str, str, str, str]]:
        await self.events.flush()
        return [
            (e["type"], e["reason"], e["involvedObject"]["name"], e["message"])
            for e in self.kube.objects(EVENTS)
        ]

    def metric(self, metric: str, **labels: str) -> float:
        return self.registry.get_sample_value(metric, labels) or 0.0

    def running(self) -> float:
        return self.metric(
            "running_managed_controllers", name="route", manager="cloud-controller-manager"
        )


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    made = Env()
    made.events.start()
    yield made
    await made.events.shutdown()
    await made.informers.stop()
    made.gate.close()


def route_set(
    routes: Sequence[Route],
) -> set[tuple[str, str, frozenset[tuple[str, str]], bool]]:
    return {
        (
            x.target_node,
            x.destination_cidr,
            frozenset((a.type, a.address) for a in x.target_node_addresses),
            x.blackhole,
        )
        for x in routes
    }


# -- start conditions (checklist 42, 57) -------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("10.244.0.0/16", ["10.244.0.0/16"], id="single-ipv4"),
        pytest.param("fd00::/48", ["fd00::/48"], id="single-ipv6"),
        pytest.param(
            "10.244.0.0/16,fd00::/48", ["10.244.0.0/16", "fd00::/48"], id="dual-stack-pair"
        ),
        pytest.param(" 10.244.0.0/16 ", ["10.244.0.0/16"], id="surrounding-space-trimmed"),
        pytest.param("10.244.1.7/16", ["10.244.0.0/16"], id="host-bits-are-masked-like-go"),
    ],
)
def test_cluster_cidr_parses(value: str, expected: list[str]) -> None:
    assert [str(c) for c in parse_cluster_cidrs(value)] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", "invalid --cluster-cidr '': failed to parse cidr value:''", id="empty"),
        pytest.param("banana", "failed to parse cidr value:'banana'", id="unparsable"),
        pytest.param("10.0.0.1", "failed to parse cidr value:'10.0.0.1'", id="no-prefix-length"),
        pytest.param(
            "10.0.0.0/16,10.1.0.0/16",
            "len of ClusterCIDRs==2 and they are not configured as dual stack",
            id="two-ipv4-is-not-dual-stack",
        ),
        pytest.param(
            "10.0.0.0/16,fd00::/48,10.1.0.0/16",
            "length of clusterCIDRs is:3 more than max allowed of 2",
            id="three-cidrs-even-mixed",
        ),
        pytest.param(
            "10.0.0.0/16,10.1.0.0/16,10.2.0.0/16",
            "len of ClusterCIDRs==3 and they are not configured as dual stack",
            id="three-ipv4",
        ),
    ],
)
def test_bad_cluster_cidr_is_a_clear_error(value: str, message: str) -> None:
    with pytest.raises(ValueError, match="invalid --cluster-cidr") as info:
        parse_cluster_cidrs(value)
    assert message in str(info.value)


async def test_build_raises_for_a_bad_cluster_cidr_when_routes_are_configured(env: Env) -> None:
    env.options.cluster_cidr = ""
    with pytest.raises(ValueError, match="failed to parse cidr value"):
        build(env.context, env.options)


@pytest.mark.parametrize(
    ("configure", "routes_supported", "log"),
    [
        pytest.param(False, True, "--configure-cloud-routes=false", id="configure-routes-false"),
        pytest.param(True, False, "does not support routes", id="provider-without-routes"),
    ],
)
async def test_build_skips_the_controller(
    configure: bool, routes_supported: bool, log: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(cluster_cidr="")  # an unparsable CIDR is never looked at when skipped
    env.cloud = FakeCloud(clock=env.clock, enable_routes=routes_supported)
    env.context.cloud = GatedCloud(env.cloud, env.gate)
    env.options.configure_cloud_routes = configure
    with caplog.at_level(logging.INFO, logger="kccm.controllers.route"):
        assert build(env.context, env.options) is None
    assert log in caplog.text
    env.gate.close()


# -- TestIsResponsibleForRoute (checklist 44) --------------------------------------------------


@pytest.mark.parametrize(
    ("cluster_cidr", "route_cidr", "responsible"),
    [
        pytest.param("10.244.0.0/16", "10.244.0.0/24", True, id="first-subnet"),
        pytest.param("10.244.0.0/16", "10.244.10.0/24", True, id="middle-subnet"),
        pytest.param("10.244.0.0/16", "10.244.255.0/24", True, id="last-subnet"),
        pytest.param("10.244.0.0/14", "10.244.0.0/24", True, id="wide-first"),
        pytest.param("10.244.0.0/14", "10.247.255.0/24", True, id="wide-last"),
        pytest.param("a00:100::/10", "a00:100::/24", True, id="ipv6-inside"),
        pytest.param("10.244.0.0/16", "10.224.0.0/24", False, id="other-range"),
        pytest.param("10.244.0.0/16", "10.0.10.0/24", False, id="below"),
        pytest.param("10.244.0.0/16", "10.255.255.0/24", False, id="above"),
        pytest.param("10.244.0.0/14", "10.248.0.0/24", False, id="just-above-wide"),
        pytest.param("10.244.0.0/14", "10.243.255.0/24", False, id="just-below-wide"),
        pytest.param("a00:100::/10", "b00:100::/24", False, id="ipv6-outside"),
        pytest.param("10.255.0.0/16", "10.0.0.0/8", True, id="covering-route-last-ip-inside"),
        pytest.param("10.0.0.0/16", "10.0.0.0/8", True, id="covering-route-first-ip-inside"),
        pytest.param("10.244.0.0/16", "10.0.0.0/8", False, id="covering-route-ends-outside"),
        pytest.param("10.244.0.0/16", "not-a-cidr", False, id="unparsable-ignored"),
        pytest.param("10.244.0.0/16", "a00:100::/24", False, id="other-family"),
    ],
)
def test_is_responsible_for_route(cluster_cidr: str, route_cidr: str, responsible: bool) -> None:
    cidrs = [ipaddress.ip_network(cluster_cidr, strict=False)]
    route = Route(name="my-awesome-cluster-1234", target_node="x", destination_cidr=route_cidr)
    assert is_responsible_for_route(route, cidrs) is responsible


# -- TestReconcile (checklist 43, 44, 46) ------------------------------------------------------

A3 = "10.0.3.1"
A4 = "10.0.4.1"
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


# -- TestUpdateNetworkingCondition (+ Calico scenario) (checklist 46) --------------------------


def cond(status: str, reason: str) -> dict[str, str]:
    return {
        "type": "NetworkUnavailable",
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        "lastHeartbeatTime": "2025-01-01T00:00:00Z",
    }


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


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "0s", id="zero"),
        pytest.param(1.5, "1.5s", id="seconds"),
        pytest.param(0.25, "250ms", id="millis"),
        pytest.param(0.0000015, "1.5µs", id="micros"),
        pytest.param(90.0, "1m30s", id="minutes"),
        pytest.param(3725.0, "1h2m5s", id="hours"),
    ],
)
def test_go_duration_format(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
