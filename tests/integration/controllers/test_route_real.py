"""node-route-controller against the real apiserver: Nodes with spec.podCIDRs get routes in the
fake cloud and NetworkUnavailable=False/RouteCreated; a failed create gives the
FailedToCreateRoute event and True/NoRouteCreated; stale routes go; dual-stack works."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import pytest

from kccm.cloudprovider.types import Route
from kccm.controllers import route as route_controller
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeCloudError
from kccm.testing.controllers import events_about, eventually
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

CLUSTER = "kubernetes"


def kubelet_node(name: str, pod_cidrs: list[str], address: str) -> Obj:
    """A Node as a kubelet with --cloud-provider=external registers it, with the pod CIDRs a
    node-IPAM controller would have assigned (set at create: podCIDRs cannot change later)."""
    return {
        "metadata": {"name": name},
        "spec": {
            "podCIDR": pod_cidrs[0],
            "podCIDRs": pod_cidrs,
            "taints": [
                {
                    "key": "node.cloudprovider.kubernetes.io/uninitialized",
                    "value": "true",
                    "effect": "NoSchedule",
                }
            ],
        },
        "status": {
            "addresses": [
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": address},
            ]
        },
    }


@dataclass
class Running:
    kube: KubeApiClient
    cloud: FakeCloud
    cleanup: KubeCleanup

    async def create(self, pod_cidrs: list[str], address: str = "10.0.0.1") -> Obj:
        name = self.cleanup.add(NODES, unique_name("route-node"))
        return await self.kube.create(NODES, kubelet_node(name, pod_cidrs, address))

    async def routes_to(self, name: str) -> list[Route]:
        routes = await self.cloud.list_routes(CLUSTER)
        return [r for r in routes if r.target_node == name]

    async def condition(self, name: str) -> tuple[str, str, str] | None:
        node = await self.kube.get(NODES, name)
        for cond in node["status"].get("conditions") or ():
            if cond["type"] == "NetworkUnavailable":
                return (cond["status"], cond["reason"], cond["message"])
        return None

    async def events(self, name: str) -> list[dict[str, Any]]:
        return await events_about(self.kube, "default", name)


async def start(
    controller_runs: OpenControllerRun, kube: KubeApiClient, cleanup: KubeCleanup, cidr: str
) -> Running:
    cloud = FakeCloud()
    run = await controller_runs(cloud, cluster_name=CLUSTER)
    options = route_controller.RouteControllerOptions(
        cluster_cidr=cidr, route_reconciliation_period=1.0, min_resync_interval=0.2
    )
    run.start(route_controller.build(run.context, options))
    return Running(kube, cloud, cleanup)


@pytest.fixture
async def running(
    controller_runs: OpenControllerRun, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> Running:
    return await start(controller_runs, kube, kube_cleanup, "10.160.0.0/16")


@pytest.fixture
async def running_dual(
    controller_runs: OpenControllerRun, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> Running:
    return await start(controller_runs, kube, kube_cleanup, "10.161.0.0/16,fd61::/48")


async def test_node_with_pod_cidrs_gets_a_route_and_route_created(running: Running) -> None:
    node = await running.create(["10.160.1.0/24"], "10.0.0.11")
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]

    routes = await eventually(lambda: running.routes_to(name))
    assert [(r.name, r.destination_cidr) for r in routes] == [
        (f"{CLUSTER}-{uid}-10.160.1.0/24", "10.160.1.0/24")
    ]
    assert {(a.type, a.address) for a in routes[0].target_node_addresses} == {
        ("Hostname", name),
        ("InternalIP", "10.0.0.11"),
    }
    assert await eventually(lambda: running.condition(name)) == (
        "False",
        "RouteCreated",
        "RouteController created a route",
    )


async def test_failed_create_gives_event_and_no_route_created(running: Running) -> None:
    running.cloud.fail("create_route", FakeCloudError("route quota exceeded"))
    node = await running.create(["10.160.2.0/24"], "10.0.0.12")
    name, uid = node["metadata"]["name"], node["metadata"]["uid"]

    assert await eventually(lambda: running.condition(name)) == (
        "True",
        "NoRouteCreated",
        "RouteController failed to create a route",
    )
    events = await eventually(lambda: running.events(name))
    event = events[0]
    assert (event["type"], event["reason"], event["source"]) == (
        "Warning",
        "FailedToCreateRoute",
        {"component": "route_controller"},
    )
    prefix = f"Could not create route {uid} 10.160.2.0/24 for node {name} after "
    assert event["message"].startswith(prefix)
    assert event["message"].endswith(": route quota exceeded")
    reference = event["involvedObject"]
    assert (reference["apiVersion"], reference["kind"], reference["name"], reference["uid"]) == (
        "v1",
        "Node",
        name,
        uid,
    )
    assert await running.routes_to(name) == []

    running.cloud.clear_failures()  # the next cycle retries and flips the condition
    assert await eventually(lambda: running.routes_to(name))
    assert await eventually(lambda: _is(running.condition(name), ("False", "RouteCreated")))


async def _is(condition: Awaitable[tuple[str, str, str] | None], wanted: tuple[str, str]) -> bool:
    got = await condition
    return got is not None and got[:2] == wanted


async def test_stale_routes_are_removed(running: Running) -> None:
    await running.cloud.create_route(
        CLUSTER, "ghost", Route(target_node="ghost-node", destination_cidr="10.160.99.0/24")
    )
    await running.cloud.create_route(
        CLUSTER, "hole", Route(destination_cidr="10.160.98.0/24", blackhole=True)
    )
    await running.cloud.create_route(
        CLUSTER, "foreign", Route(target_node="ghost-node", destination_cidr="192.168.7.0/24")
    )
    node = await running.create(["10.160.3.0/24"], "10.0.0.13")
    name = node["metadata"]["name"]
    assert await eventually(lambda: running.routes_to(name))

    async def only_foreign_left() -> bool:
        cidrs = {r.destination_cidr for r in await running.cloud.list_routes(CLUSTER)}
        return "10.160.99.0/24" not in cidrs and "10.160.98.0/24" not in cidrs

    assert await eventually(only_foreign_left)
    assert await running.routes_to("ghost-node") == [
        Route(
            name=f"{CLUSTER}-foreign-192.168.7.0/24",
            target_node="ghost-node",
            destination_cidr="192.168.7.0/24",
        )
    ]

    await running.kube.delete(NODES, name)  # the node goes: so does its route

    async def route_gone() -> bool:
        return await running.routes_to(name) == []

    assert await eventually(route_gone)


async def test_dual_stack_cluster_cidr(running_dual: Running) -> None:
    node = await running_dual.create(["10.161.4.0/24", "fd61::/64"], "10.0.0.14")
    name = node["metadata"]["name"]

    async def both() -> list[str]:
        cidrs = sorted(r.destination_cidr for r in await running_dual.routes_to(name))
        return cidrs if len(cidrs) == 2 else []

    assert await eventually(both) == ["10.161.4.0/24", "fd61::/64"]
    assert await eventually(lambda: running_dual.condition(name)) == (
        "False",
        "RouteCreated",
        "RouteController created a route",
    )


async def test_blackholed_route_to_a_live_node_is_replaced(running: Running) -> None:
    """Upstream reconcile() deletes ``route.Blackhole`` routes even when they target a node
    that still has that CIDR; the next cycle creates the real route."""
    node = await running.create(["10.160.5.0/24"], "10.0.0.15")
    name = node["metadata"]["name"]
    (route,) = await eventually(lambda: running.routes_to(name))
    hole = Route(target_node=name, destination_cidr=route.destination_cidr, blackhole=True)
    await running.cloud.create_route(CLUSTER, "hole", hole)  # the cloud blackholes it ...
    await running.cloud.delete_route(CLUSTER, route)  # ... and the real route is gone

    async def one_real_route() -> bool:
        routes = await running.routes_to(name)
        return [(r.destination_cidr, r.blackhole) for r in routes] == [("10.160.5.0/24", False)]

    assert await eventually(one_real_route)
