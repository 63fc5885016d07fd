"""Time to initialise N Nodes registered at once, per --concurrent-node-syncs value.

Usage: .venv/bin/python bench/node_init.py [--nodes 1000] [--concurrency 32,1]
                                           [--latency 0.05] [--client-qps 0]

Starts its own etcd + kube-apiserver (--max-requests-inflight=1000
--max-mutating-requests-inflight=500), then for each concurrency value: starts the real
cloud-node-controller (fake provider, every cloud call taking --latency seconds, InstancesV2),
creates N kubelet-shaped Nodes at once (uninitialized taint, Hostname + InternalIP) and measures
the wall time from the first create until every Node has lost the taint. The controller's API
client is unlimited by default (--client-qps 0); pass 20 to see upstream's per-client default
of 20 qps / burst 30 dominate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from kccm.cloudprovider import NodeAddress
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import NodeControllerOptions
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import NotFound
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import EventHandler, Informer, SharedInformerFactory
from kccm.testing.controlplane import ControlPlane

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


def kubelet_node(name: str, run: str, i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"bench-run": run, "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": UNINIT, "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": f"192.168.{i // 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ]
        },
    }


async def gather_bounded(limit: int, coros: list[Any]) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(coro: Any) -> None:
        async with sem:
            await coro

    await asyncio.gather(*(one(c) for c in coros))


class Completion:
    """Watches the run's Nodes and fires once every one of them has lost the taint."""

    def __init__(self, admin: KubeApiClient, run: str, total: int) -> None:
        self.total = total
        self.done: set[str] = set()
        self.finished = asyncio.Event()
        self.informer = Informer(admin, NODES, label_selector=f"bench-run={run}")
        self.informer.add_event_handler(
            EventHandler(on_add=self._seen, on_update=lambda _old, new: self._seen(new))
        )

    def _seen(self, node: dict[str, Any]) -> None:
        if not any(t.get("key") == UNINIT for t in node["spec"].get("taints") or ()):
            self.done.add(node["metadata"]["name"])
            if len(self.done) >= self.total:
                self.finished.set()


async def one_run(
    plane: ControlPlane, nodes: int, concurrency: int, latency: float, client_qps: float
) -> tuple[float, float]:
    config = load_cluster_config(str(plane.admin_kubeconfig))
    admin = KubeApiClient(config, qps=0, burst=0)
    ctrl_client = KubeApiClient(config, qps=client_qps, burst=30 if client_qps else 0)
    run = uuid.uuid4().hex[:8]
    names = [f"bench-{run}-{i:05d}" for i in range(nodes)]
    cloud = FakeCloud()
    for i, name in enumerate(names):
        cloud.add_instance(
            FakeInstance(
                name=name,
                instance_id=f"i-{i:05d}",
                addresses=(NodeAddress("InternalIP", f"10.1.{i // 256}.{i % 256}"),),
            )
        )
    cloud.set_latency("*", latency)
    registry = CollectorRegistry()
    gate = CallGate(registry=registry)
    informers = SharedInformerFactory(ctrl_client)
    events = EventBroadcaster(ctrl_client, registry=registry)
    events.start()
    context = ControllerContext(ctrl_client, informers, GatedCloud(cloud, gate), events, registry)
    ctrl = node_controller.build(context, NodeControllerOptions(concurrent_node_syncs=concurrency))
    assert ctrl is not None
    task = asyncio.create_task(ctrl.run())
    await informers.wait_for_sync()
    completion = Completion(admin, run, nodes)
    watcher = asyncio.create_task(completion.informer.run())
    await completion.informer.wait_for_sync()
    try:
        start = time.perf_counter()
        await gather_bounded(
            200, [admin.create(NODES, kubelet_node(n, run, i)) for i, n in enumerate(names)]
        )
        created = time.perf_counter() - start
        await completion.finished.wait()
        elapsed = time.perf_counter() - start
    finally:
        await ctrl.stop(grace=5)
        task.cancel()
        watcher.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
        await events.shutdown(grace=1)
        await informers.stop()
        gate.close()
        await gather_bounded(200, [_delete(admin, n) for n in names])
        await ctrl_client.close()
        await admin.close()
    return elapsed, created


async def _delete(client: KubeApiClient, name: str) -> None:
    with contextlib.suppress(NotFound):
        await client.delete(NODES, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--concurrency",
        default=f"{node_controller.DEFAULT_CONCURRENT_NODE_SYNCS},1",
        help="comma-separated --concurrent-node-syncs values",
    )
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--client-qps", type=float, default=0.0)
    args = parser.parse_args()
    with ControlPlane(
        extra_apiserver_args=(
            "--max-requests-inflight=1000",
            "--max-mutating-requests-inflight=500",
        )
    ) as plane:
        for value in (int(v) for v in args.concurrency.split(",")):
            elapsed, created = asyncio.run(
                one_run(plane, args.nodes, value, args.latency, args.client_qps)
            )
            print(
                f"concurrency {value:>3}: {args.nodes} nodes initialised in {elapsed:6.1f} s "
                f"({args.nodes / elapsed:6.1f} nodes/s; creating them took {created:.1f} s; "
                f"cloud latency {args.latency * 1000:.0f} ms, client qps "
                f"{args.client_qps or 'unlimited'})",
                flush=True,
            )


if __name__ == "__main__":
    main()
