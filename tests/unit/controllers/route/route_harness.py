"""The node-route-controller's unit-test harness: Node and Route builders, the test environment
(FakeKube, fake provider, informers, events) and the helpers the split test modules share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.types import NodeAddress, Route
from kccm.controllers.base import ControllerContext
from kccm.controllers.route import (
    RouteController,
    RouteControllerOptions,
    build,
)
from kccm.kube.fake import FakeKube
from kccm.kube.resources import EVENTS, NODES
from kccm.providers.fake import FakeCloud
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


A3 = "10.0.3.1"
A4 = "10.0.4.1"


def cond(status: str, reason: str) -> dict[str, str]:
    return {
        "type": "NetworkUnavailable",
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        "lastHeartbeatTime": "2025-01-01T00:00:00Z",
    }
