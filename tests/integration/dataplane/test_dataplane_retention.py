"""Address retention on the local provider, end to end on the real apiserver (issue 39): a
Service annotated ``service.kccm.io/retain-address: "true"`` is deleted and re-created, and the
same VIP answers real TCP through the data plane; ``kccm addresses release`` then leaves no
claim behind."""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
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

from kccm.app.addresses_cli import run_addresses
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS
from kccm.controllers.service import ServiceControllerOptions
from kccm.controllers.service import build as build_service_controller
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import ApiError
from kccm.kube.resources import SERVICES
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.server import DataPlane
from kccm.providers.local.store import LocalStore
from kccm.testing.controllers import absent, event_summaries, eventually
from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name


@dataclass
class Cluster:
    kube: KubeApiClient
    namespace: str
    store: LocalStore
    config: Path
    node: Node
    node_port: int
    port: int

    def service(self, name: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": {ANNOTATION_RETAIN_ADDRESS: "true"},
            },
            "spec": {
                "type": "LoadBalancer",
                "ports": [{"protocol": "TCP", "port": self.port, "nodePort": self.node_port}],
            },
        }

    async def ingress_ip(self, name: str) -> str:
        async def ip() -> str | None:
            svc = await self.kube.get(SERVICES, name, namespace=self.namespace)
            ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
            return str(ingress[0]["ip"]) if ingress else None

        return await eventually(ip)


async def _node_port_backend(node: Node) -> tuple[int, asyncio.Server]:
    """A TCP backend on a port of the apiserver's NodePort range (30000-32767)."""
    for _ in range(50):
        port = random.randrange(30000, 32768)
        try:
            return port, await _tcp_backend(node, port)
        except OSError:
            continue
    raise RuntimeError("no free port in the NodePort range")


@pytest.fixture
async def cluster(
    controller_runs: OpenControllerRun,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
) -> AsyncIterator[Cluster]:
    net = subnet()
    node = Node(unique_name("retain-node"), f"{net}.1")
    node_port, backend = await _node_port_backend(node)
    state = tmp_path / "state.db"
    config = tmp_path / "cloud.conf"
    config.write_text(
        f"[Global]\nstate-file = {state}\nvip-range = {net}.100-{net}.103\n"
        "health-check-mode = tcp\nstart-dataplane = false\n"
    )
    store = LocalStore(state)
    cloud = LocalCloud(store, load_local_config(io.StringIO(config.read_text())))
    plane = DataPlane(state, FAST)
    await plane.start()
    await register_ready_node(kube, kube_cleanup, node)
    run = await controller_runs(cloud)
    run.start(build_service_controller(run.context, ServiceControllerOptions()))
    try:
        yield Cluster(kube, kube_namespace, store, config, node, node_port, free_port(f"{net}.100"))
    finally:
        await run.stop()
        await plane.close()
        store.close()
        backend.close()
        await node.close_connections()


async def _create(c: Cluster, name: str) -> None:
    async def created() -> bool:  # the NodePort is free again once the deletion settled
        try:
            await c.kube.create(SERVICES, c.service(name))
        except ApiError:
            return False
        return True

    await eventually(created)


async def _delete(c: Cluster, name: str) -> None:
    await c.kube.delete(SERVICES, name, namespace=c.namespace)
    await eventually(lambda: absent(c.kube, SERVICES, name, c.namespace))


async def test_a_re_created_service_gets_its_vip_back_and_release_frees_it(
    cluster: Cluster,
) -> None:
    c, name = cluster, unique_name("kept")
    owner = f"{c.namespace}/{name}"
    await _create(c, name)
    vip = await c.ingress_ip(name)
    assert await answered(vip, c.port) == c.node.name

    await _delete(c, name)
    assert [(k.ip, k.owner, k.retain) for k in c.store.list_ip_claims()] == [(vip, owner, True)]
    assert c.store.list_load_balancers() == []
    assert await eventually(lambda: refused(vip, c.port))
    events = await event_summaries(c.kube, c.namespace, name)
    assert any(reason == "RetainedAddress" and vip in msg for _, _, reason, msg in events)

    await _create(c, name)
    assert await c.ingress_ip(name) == vip
    assert await answered(vip, c.port) == c.node.name

    await _delete(c, name)
    flags = ["--cloud-provider", "local", "--cloud-config", str(c.config)]
    out = io.StringIO()
    assert await asyncio.to_thread(run_addresses, ["release", vip, *flags], out) == 0
    assert c.store.list_ip_claims() == []
