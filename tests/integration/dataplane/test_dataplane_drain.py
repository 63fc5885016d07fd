"""Draining a Node's targets on the local provider, end to end on the real apiserver (issue 39):
a long TCP stream through the VIP keeps flowing while its Node drains (the exclusion label put
on it), new connections go to the other Nodes meanwhile, and the backend leaves the balancer
once the Service's ``service.kccm.io/drain-seconds`` have passed, not before."""

from __future__ import annotations

import asyncio
import io
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dataplane_world import FAST, Node, _tcp_backend, ask_tcp, subnet

from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS
from kccm.controllers.service import ServiceControllerOptions
from kccm.controllers.service import build as build_service_controller
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.server import DataPlane
from kccm.providers.local.store import LocalStore
from kccm.testing.controllers import absent, eventually
from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

DRAIN_SECONDS = 4
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


@dataclass
class Cluster:
    kube: KubeApiClient
    namespace: str
    store: LocalStore
    plane: DataPlane
    nodes: list[Node]
    node_port: int
    port: int

    def backends(self, name: str) -> dict[str, bool]:
        """Node -> draining, as the balancer's row holds them now."""
        lb = next(
            (r for r in self.store.list_load_balancers() if r.service.endswith(f"/{name}")), None
        )
        if lb is None:
            return {}
        return {str(b["node"]): bool(b.get("draining")) for b in lb.backends}

    async def has_backends(self, name: str, check: Callable[[dict[str, bool]], bool]) -> bool:
        return check(self.backends(name))

    async def plane_drains(self, node: str) -> None:
        """Wait until the data plane has applied ``node``'s draining mark."""

        def applied() -> bool:
            listeners = self.plane.listeners.values()
            return any(b.node == node and b.draining for li in listeners for b in li.spec.backends)

        await asyncio.wait_for(self.plane.wait_reconciled(applied), 30)


async def _backends_on_one_port(nodes: list[Node]) -> tuple[int, list[asyncio.Server]]:
    """A TCP backend on each Node, on one port of the NodePort range (30000-32767)."""
    for _ in range(50):
        port, servers = random.randrange(30000, 32768), []
        try:
            for node in nodes:
                servers.append(await _tcp_backend(node, port))
        except OSError:
            for server in servers:
                server.close()
            continue
        return port, servers
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
    nodes = [Node(unique_name(f"drain-n{i}"), f"{net}.{i}") for i in (1, 2, 3)]
    node_port, servers = await _backends_on_one_port(nodes)
    state, config = tmp_path / "state.db", tmp_path / "cloud.conf"
    config.write_text(
        f"[Global]\nstate-file = {state}\nvip-range = {net}.100-{net}.103\n"
        "health-check-mode = tcp\nstart-dataplane = false\n"
    )
    store = LocalStore(state)
    cloud = LocalCloud(store, load_local_config(io.StringIO(config.read_text())))
    plane = DataPlane(state, FAST)
    await plane.start()
    ready = {"type": "Ready", "status": "True", "reason": "Kubelet"}
    for node in nodes:
        kube_cleanup.add(NODES, node.name)
        await kube.create(
            NODES,
            {
                "metadata": {"name": node.name},
                "spec": {"providerID": f"local://{node.name}"},
                "status": {"addresses": [{"type": "InternalIP", "address": node.address}]},
            },
        )
        await kube.patch(
            NODES, node.name, {"status": {"conditions": [ready]}}, subresource="status"
        )
    run = await controller_runs(cloud)
    run.start(build_service_controller(run.context, ServiceControllerOptions()))
    try:
        port = free_port(f"{net}.100")
        yield Cluster(kube, kube_namespace, store, plane, nodes, node_port, port)
    finally:
        await run.stop()
        await plane.close()
        store.close()
        for server in servers:
            server.close()
        for node in nodes:
            await node.close_connections()


def _service(c: Cluster, name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": c.namespace,
            "annotations": {ANNOTATION_DRAIN_SECONDS: str(DRAIN_SECONDS)},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"protocol": "TCP", "port": c.port, "nodePort": c.node_port}],
        },
    }


async def _vip(c: Cluster, name: str) -> str:
    async def ip() -> str | None:
        svc = await c.kube.get(SERVICES, name, namespace=c.namespace)
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
        return str(ingress[0]["ip"]) if ingress else None

    return await eventually(ip)


async def _answers(vip: str, port: int) -> str | None:
    try:
        return await ask_tcp(vip, port)
    except (ConnectionError, TimeoutError):
        return None


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
    payload = f"chunk-{n}\n".encode()
    writer.write(payload)
    await writer.drain()
    return await asyncio.wait_for(reader.readline(), 10) == payload


async def test_a_long_stream_survives_its_nodes_drain_while_new_connections_go_elsewhere(
    cluster: Cluster,
) -> None:
    c, name = cluster, unique_name("drained")
    everyone = {n.name for n in c.nodes}
    await c.kube.create(SERVICES, _service(c, name))
    vip = await _vip(c, name)
    await eventually(lambda: c.has_backends(name, lambda got: set(got) == everyone))
    await eventually(lambda: _answers(vip, c.port))  # the data plane listens
    reader, writer = await asyncio.wait_for(asyncio.open_connection(vip, c.port), 10)
    try:
        streamed_to = (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
        assert streamed_to in everyone
        labelled = time.monotonic()
        await c.kube.patch(NODES, streamed_to, {"metadata": {"labels": {EXCLUDE: "true"}}})
        await eventually(lambda: c.has_backends(name, lambda got: bool(got.get(streamed_to))))
        seen_draining = time.monotonic()
        await c.plane_drains(streamed_to)
        answered = [await ask_tcp(vip, c.port) for _ in range(6)]
        chunks = 0

        async def window_over() -> bool:  # through the window: the stream and new connections
            nonlocal chunks
            chunks += 1
            assert await _echo(reader, writer, chunks), "the stream broke while draining"
            answered.append(await ask_tcp(vip, c.port))
            return streamed_to not in c.backends(name)

        await eventually(window_over, interval=0.2)
        removed = time.monotonic()
        assert await _echo(reader, writer, chunks + 1)
        assert set(c.backends(name)) == everyone - {streamed_to}
    finally:
        writer.close()
        await c.kube.delete(SERVICES, name, namespace=c.namespace)
        await eventually(lambda: absent(c.kube, SERVICES, name, c.namespace))
    assert streamed_to not in answered, f"a new connection went to the draining {streamed_to}"
    assert set(answered) == everyone - {streamed_to}
    assert removed - labelled >= DRAIN_SECONDS, "removed before the drain time"
    print(
        f"\ndrain figures: label->draining {seen_draining - labelled:.2f}s, "
        f"label->removed {removed - labelled:.2f}s (drain-seconds {DRAIN_SECONDS}), "
        f"stream echoed {chunks + 1} chunks through the window, "
        f"{len(answered)} new connections all to {sorted(set(answered))}"
    )
