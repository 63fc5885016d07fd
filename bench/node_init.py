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
import time
import uuid

from kube_helpers import Completion, bounded, delete_quietly, untainted  # bench/ on sys.path
from prometheus_client import CollectorRegistry
from scale import kubelet_node

from kccm.cloudprovider import NodeAddress
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import NodeControllerOptions
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.controlplane import ControlPlane


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
    try:
        async with Completion(
            admin, NODES, nodes, untainted, label_selector=f"bench-run={run}"
        ) as completion:
            start = time.perf_counter()
            await bounded(
                200, [admin.create(NODES, kubelet_node(n, run, i)) for i, n in enumerate(names)]
            )
            created = time.perf_counter() - start
            await completion.finished.wait()
            elapsed = time.perf_counter() - start
    finally:
        await ctrl.stop(grace=5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.shutdown(grace=1)
        await informers.stop()
        gate.close()
        await bounded(200, [delete_quietly(admin, NODES, n) for n in names])
        await ctrl_client.close()
        await admin.close()
    return elapsed, created


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
