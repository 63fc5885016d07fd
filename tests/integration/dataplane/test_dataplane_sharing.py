"""Shared balancers on the local provider, end to end on the real apiserver (issue 39): two
Services of one ``service.kccm.io/share-group`` get one VIP and each serves real TCP on its own
port through the data plane; deleting one leaves the other serving; a port clash is a Warning
on the later Service naming the first, which keeps its port; the last deletion leaves no row
and no claim."""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dataplane_world import (
    FAST,
    Node,
    _tcp_backend,
    answered,
    refused,
    register_ready_node,
    subnet,
)

from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP
from kccm.controllers.service import ServiceControllerOptions
from kccm.controllers.service import build as build_service_controller
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import SERVICES
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.server import DataPlane
from kccm.providers.local.store import LocalStore
from kccm.testing.controllers import absent, event_summaries, eventually
from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

GROUP = "web"


@dataclass
class Cluster:
    kube: KubeApiClient
    namespace: str
    store: LocalStore
    node: Node
    net: str
    backends: list[asyncio.Server] = field(default_factory=list)

    async def backend(self, answer: str) -> int:
        """A TCP backend on the node, on a port of the NodePort range, answering ``answer``."""
        for _ in range(50):
            port = random.randrange(30000, 32768)
            try:
                self.backends.append(await _tcp_backend(Node(answer, self.node.address), port))
            except OSError:
                continue
            return port
        raise RuntimeError("no free port in the NodePort range")

    async def create(self, name: str, port: int, node_port: int) -> None:
        service: dict[str, Any] = {
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": {ANNOTATION_SHARE_GROUP: GROUP},
            },
            "spec": {
                "type": "LoadBalancer",
                "ports": [{"protocol": "TCP", "port": port, "nodePort": node_port}],
            },
        }
        await self.kube.create(SERVICES, service)

    async def delete(self, name: str) -> None:
        await self.kube.delete(SERVICES, name, namespace=self.namespace)
        await eventually(lambda: absent(self.kube, SERVICES, name, self.namespace))

    async def ingress_ip(self, name: str) -> str:
        async def ip() -> str | None:
            svc = await self.kube.get(SERVICES, name, namespace=self.namespace)
            ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
            return str(ingress[0]["ip"]) if ingress else None

        return await eventually(ip)

    def claims(self) -> list[tuple[str, str]]:
        return [(k.ip, k.owner) for k in self.store.list_ip_claims()]


@pytest.fixture
async def cluster(
    controller_runs: OpenControllerRun,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
) -> AsyncIterator[Cluster]:
    net = subnet()
    node = Node(unique_name("share-node"), f"{net}.1")
    state = tmp_path / "state.db"
    config = (
        f"[Global]\nstate-file = {state}\nvip-range = {net}.100-{net}.103\n"
        "health-check-mode = tcp\nstart-dataplane = false\n"
    )
    store = LocalStore(state)
    cloud = LocalCloud(store, load_local_config(io.StringIO(config)))
    plane = DataPlane(state, FAST)
    await plane.start()
    await register_ready_node(kube, kube_cleanup, node)
    run = await controller_runs(cloud)
    run.start(build_service_controller(run.context, ServiceControllerOptions()))
    made = Cluster(kube, kube_namespace, store, node, net)
    try:
        yield made
    finally:
        await run.stop()
        await plane.close()
        store.close()
        for server in made.backends:
            server.close()
        await node.close_connections()


def _ports(net: str) -> tuple[int, int]:
    first = free_port(f"{net}.100")
    second = first
    while second == first:
        second = free_port(f"{net}.100")
    return first, second


async def test_two_services_share_one_vip_each_on_its_port_until_the_last_goes(
    cluster: Cluster,
) -> None:
    c = cluster
    a, b = unique_name("a-web"), unique_name("b-api")
    port_a, port_b = _ports(c.net)
    await c.create(a, port_a, await c.backend("backend-a"))
    await c.create(b, port_b, await c.backend("backend-b"))
    vip = await c.ingress_ip(a)
    assert await c.ingress_ip(b) == vip
    assert await answered(vip, port_a) == "backend-a"
    assert await answered(vip, port_b) == "backend-b"
    assert c.claims() == [(vip, f"share:{c.namespace}/{GROUP}")]
    assert sorted(lb.service for lb in c.store.list_load_balancers()) == sorted(
        f"{c.namespace}/{n}" for n in (a, b)
    )

    await c.delete(a)
    assert await eventually(lambda: refused(vip, port_a))
    assert await answered(vip, port_b) == "backend-b"
    assert c.claims() == [(vip, f"share:{c.namespace}/{GROUP}")], "b still uses the VIP"

    await c.delete(b)
    assert await eventually(lambda: refused(vip, port_b))
    assert c.claims() == []
    assert c.store.list_load_balancers() == []


async def test_a_port_clash_warns_the_later_service_which_gets_the_port_once_the_first_goes(
    cluster: Cluster,
) -> None:
    c = cluster
    first, later = unique_name("a-first"), unique_name("b-later")
    port, _ = _ports(c.net)
    await c.create(first, port, await c.backend("first"))
    vip = await c.ingress_ip(first)
    await c.create(later, port, await c.backend("later"))

    async def warned() -> bool:
        events = await event_summaries(c.kube, c.namespace, later)
        return any(
            kind == "Warning" and f"{c.namespace}/{first}" in msg and f"{port}/TCP" in msg
            for _, kind, _, msg in events
        )

    assert await eventually(warned)
    svc = await c.kube.get(SERVICES, later, namespace=c.namespace)
    assert not (svc.get("status") or {}).get("loadBalancer", {}).get("ingress")
    assert await answered(vip, port) == "first", "the first Service keeps its port"

    await c.delete(first)  # the later Service is synced again at once and takes the port
    vip = await c.ingress_ip(later)

    async def served_by_later() -> bool:  # the data plane applies the rows' change on reload
        return await answered(vip, port) == "later"

    assert await eventually(served_by_later)
    await c.delete(later)
    assert c.claims() == []
    assert c.store.list_load_balancers() == []
