"""Issue 27's last acceptance item: a backend unhealthy in `local` after its node's server stops,
shown by `kccm explain` (JSON and text) on the real apiserver.

The daemon runs ``--cloud-provider=local`` (tcp health checks, its own data plane started at
initialisation); three Nodes are backed by local instances on a loopback /24, each serving the
Service's nodePort with a real TCP server. Once explain reports every backend healthy, one node's
server stops; explain is polled (bounded) until the data plane's health checker has marked that
backend unhealthy, with the reason it gives."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from daemon_e2e_support import Cluster, _ingress, eventually
from test_explain_real import answer, leading, text

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.local.dataplane.store import pid_alive
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing import leaks
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.daemon import SA_GROUPS, SA_USER
from kccm.testing.kubelet import kubelet_node
from kccm.testing.ports import loopback_net
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


@pytest.fixture
async def state_file(tmp_path: Path) -> AsyncIterator[Path]:
    """The local provider's state file; the data plane the daemon started on it (detached, in
    its own session) is stopped after the test."""
    state = tmp_path / "local.db"
    yield state
    beat = live_dataplane(state)
    if beat is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(beat.pid, signal.SIGTERM)

        async def gone() -> bool:
            return not pid_alive(beat.pid)

        await eventually(gone)


async def _backend(address: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    return await asyncio.start_server(handle, address, port, reuse_address=True)


def _targets(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    view = (body.get("balancer") or {}).get("view") or {}
    return {t["node"]: t for lst in view.get("listeners") or () for t in lst["targets"]}


async def test_a_stopped_node_server_shows_as_an_unhealthy_backend(
    cluster: Cluster,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
    state_file: Path,
) -> None:
    net = loopback_net((141, 190))
    nodes = {unique_name("explain-local"): f"{net}.{i + 1}" for i in range(3)}
    store = LocalStore(state_file)
    for name, address in nodes.items():
        store.add_instance(InstanceRecord(name, (("InternalIP", address),)))
    store.close()
    cloud_config = tmp_path / "local.conf"
    cloud_config.write_text(
        f"[Global]\nstate-file = {state_file}\nvip-range = {net}.200-{net}.250\n"
        "health-check-mode = tcp\n"
    )
    daemon = cluster.daemons.start(
        "local",
        cloud_config,
        cluster.plane.kubeconfig_for(SA_USER, SA_GROUPS),
        "--cluster-cidr=10.244.0.0/16",
        "--controllers=*,-route",
        "--leader-elect=true",
        "--leader-elect-lease-duration=8s",
        "--leader-elect-renew-deadline=6s",
        "--leader-elect-retry-period=500ms",
        "--node-monitor-period=1s",
        "--v=2",
    )
    servers: dict[str, asyncio.Server] = {}
    try:
        for name in nodes:
            kube_cleanup.add(NODES, name)
            await kube.create(NODES, kubelet_node(name))
        await eventually(lambda: initialised_nodes(kube, nodes))
        svc = unique_name("explain-local-lb")
        await kube.create(
            SERVICES,
            {
                "metadata": {"name": svc, "namespace": kube_namespace},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
            },
        )
        created = await kube.get(SERVICES, svc, namespace=kube_namespace)
        node_port = int(created["spec"]["ports"][0]["nodePort"])  # allocated by the apiserver
        for name, address in nodes.items():
            servers[name] = await _backend(address, node_port)
        (ingress,) = await eventually(lambda: _ingress(kube, svc, kube_namespace))
        assert ingress["ip"].startswith(f"{net}.")
        leader = await leading(daemon)
        admin = cluster.plane.admin_kubeconfig  # system:masters: authorization always passes
        target = f"{kube_namespace}/{svc}"

        async def all_healthy() -> dict[str, Any] | None:
            body = await answer(daemon, admin, "service", target)
            targets = _targets(body)
            healthy = set(targets) == set(nodes) and all(
                t["health"] == "healthy" for t in targets.values()
            )
            return body if healthy else None

        body = await eventually(all_healthy)
        assert (body["provider"], body["handled"]) == ("local", True)
        assert body["answered_by"] == {"identity": leader, "leader": True}
        assert body["balancer"]["view"]["state"] == "serving"
        for name, address in nodes.items():
            assert (_targets(body)[name]["address"], _targets(body)[name]["port"]) == (
                address,
                node_port,
            )

        down = next(iter(nodes))
        servers[down].close()
        await servers[down].wait_closed()

        async def down_unhealthy() -> dict[str, Any] | None:
            body = await answer(daemon, admin, "service", target)
            return body if _targets(body)[down]["health"] == "unhealthy" else None

        body = await eventually(down_unhealthy)
        targets = _targets(body)
        assert targets[down]["detail"], targets[down]  # the reason the health checker gave
        print(json.dumps(targets[down], indent=2))  # shown with -s: the docs' source
        assert {n: t["health"] for n, t in targets.items() if n != down} == {
            n: "healthy" for n in nodes if n != down
        }
        shown = await text(daemon, admin, "service", target)
        reason = targets[down]["detail"]
        assert f"{down} {nodes[down]}:{node_port} unhealthy ({reason})" in shown, shown
        for name in nodes:
            if name != down:
                assert f"{name} {nodes[name]}:{node_port} healthy" in shown, shown

        await delete_until_gone(kube, SERVICES, [svc], kube_namespace)  # while kccm runs
        await delete_until_gone(kube, NODES, list(nodes))
        left = await asyncio.to_thread(leaks.leftovers, cluster.plane)
        assert not {o.name for o in left} & {svc, *nodes}, leaks.describe(left)
    finally:
        await asyncio.to_thread(daemon.stop, 10)  # before the data plane is stopped
        for server in servers.values():
            server.close()
