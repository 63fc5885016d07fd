"""The aws provider on moto: N Nodes initialised, then their addresses refreshed.

Usage: .venv/bin/python bench/aws_nodes.py [--nodes 1000] [--refreshes 3]

Starts moto (server mode) and its own etcd + kube-apiserver, runs N EC2 instances tagged for
the cluster, then:

init     the real cloud-node-controller with the ``aws`` provider initialises N kubelet-shaped
         Nodes created at once (named after the instances' private DNS names, no providerID):
         wall time from the first create until every Node lost the uninitialized taint, and
         the EC2 requests it took (from the provider's ``cloud_api_calls()`` ledger);
refresh  the periodic address refresh of every initialised Node, as the node controller makes
         it with a provider that lists: one ``list_instance_metadata`` for all Nodes; time and
         EC2 requests per refresh (the minimum and maximum of --refreshes runs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from typing import Any

from kube_helpers import Completion, bounded, delete_quietly, untainted  # bench/ on sys.path
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import NodeControllerOptions
from kccm.emulators import aws as support
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.controlplane import ControlPlane

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


def run_instances(world: Any, count: int) -> None:
    """``count`` tagged instances in one RunInstances per zone (moto answers in seconds), in
    /20 subnets of their own (the world's /24 ones hold 250 instances each)."""
    ec2, _ = support.clients(world.url)
    tags = [{"ResourceType": "instance", "Tags": [support.cluster_tag(world.cluster_id)]}]
    octet = ec2.describe_vpcs(VpcIds=[world.vpc_id])["Vpcs"][0]["CidrBlock"].split(".")[1]
    subnets = [
        ec2.create_subnet(
            VpcId=world.vpc_id, CidrBlock=f"10.{octet}.{16 * (i + 1)}.0/20", AvailabilityZone=zone
        )["Subnet"]["SubnetId"]
        for i, zone in enumerate(support.ZONES)
    ]
    for index, subnet in enumerate(subnets):
        wanted = count // len(subnets) + (index < count % len(subnets))
        reply = ec2.run_instances(
            ImageId="ami-12c6146b",
            MinCount=wanted,
            MaxCount=wanted,
            InstanceType="m5.large",
            SubnetId=subnet,
            TagSpecifications=tags,
        )
        for instance in reply["Instances"]:
            world.instances[instance["InstanceId"]] = instance["PrivateDnsName"]


def kubelet_node(name: str, run: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"bench-run": run, "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": UNINIT, "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": name}]},
    }


def _ec2(cloud: AWSCloud, before: Any) -> dict[str, int]:
    calls = cloud.cloud_api_calls().snapshot().since(before)
    return {op: n for op, n in {**calls.reads, **calls.writes}.items() if op.startswith("ec2:")}


async def initialise(plane: ControlPlane, cloud: AWSCloud, names: list[str], run: str) -> float:
    config = load_cluster_config(str(plane.admin_kubeconfig))
    admin = KubeApiClient(config, qps=0, burst=0)
    ctrl_client = KubeApiClient(config, qps=0, burst=0)
    registry = CollectorRegistry()
    gate = CallGate(registry=registry)
    informers = SharedInformerFactory(ctrl_client)
    events = EventBroadcaster(ctrl_client, registry=registry)
    events.start()
    context = ControllerContext(ctrl_client, informers, GatedCloud(cloud, gate), events, registry)
    ctrl = node_controller.build(context, NodeControllerOptions())
    assert ctrl is not None
    task = asyncio.create_task(ctrl.run())
    await informers.wait_for_sync()
    try:
        async with Completion(
            admin, NODES, len(names), untainted, label_selector=f"bench-run={run}"
        ) as completion:
            start = time.perf_counter()
            await bounded(200, [admin.create(NODES, kubelet_node(n, run)) for n in names])
            await completion.finished.wait()
            return time.perf_counter() - start
    finally:
        await ctrl.stop(grace=5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.shutdown(grace=1)
        await informers.stop()
        gate.close()
        await ctrl_client.close()
        await admin.close()


async def refresh(plane: ControlPlane, cloud: AWSCloud, run: str) -> tuple[float, dict[str, int]]:
    """One refresh of every initialised Node, as the node controller asks it of a lister."""
    admin = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    try:
        nodes = (await admin.list(NODES, label_selector=f"bench-run={run}")).items
    finally:
        await admin.close()
    v2 = cloud.instances_v2()
    assert v2 is not None
    before = cloud.cloud_api_calls().snapshot()
    start = time.perf_counter()
    found = await asyncio.to_thread(v2.list_instance_metadata, nodes)  # type: ignore[attr-defined]
    elapsed = time.perf_counter() - start
    assert len(found) == len(nodes), (len(found), len(nodes))
    return elapsed, _ec2(cloud, before)


async def cleanup(plane: ControlPlane, names: list[str]) -> None:
    admin = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    try:
        await bounded(200, [delete_quietly(admin, NODES, n) for n in names])
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--refreshes", type=int, default=3)
    args = parser.parse_args()
    os.environ.update(support.CREDENTIALS)
    os.environ.pop("AWS_PROFILE", None)
    run = uuid.uuid4().hex[:8]
    with (
        support.moto_emulator() as moto,
        ControlPlane(
            extra_apiserver_args=(
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
            )
        ) as plane,
    ):
        world = support.build_world(moto.url, f"bench{run}", instances=0)
        started = time.perf_counter()
        run_instances(world, args.nodes)
        print(f"moto: {args.nodes} instances in {time.perf_counter() - started:.1f} s", flush=True)
        cloud = AWSCloud(load_aws_config(world.cloud_config()))
        names = sorted(world.instances.values())
        before = cloud.cloud_api_calls().snapshot()
        elapsed = asyncio.run(initialise(plane, cloud, names, run))
        init_calls = _ec2(cloud, before)
        print(
            f"init:    {args.nodes} Nodes initialised in {elapsed:.1f} s "
            f"({args.nodes / elapsed:.1f} Nodes/s); EC2 requests {sum(init_calls.values())}: "
            f"{init_calls}",
            flush=True,
        )
        runs = [asyncio.run(refresh(plane, cloud, run)) for _ in range(args.refreshes)]
        times = sorted(t for t, _ in runs)
        calls = [sum(c.values()) for _, c in runs]
        print(
            f"refresh: {args.nodes} Nodes in {times[0]:.2f}-{times[-1]:.2f} s, EC2 requests per "
            f"refresh {min(calls)}-{max(calls)} ({runs[0][1]})",
            flush=True,
        )
        asyncio.run(cleanup(plane, names))


if __name__ == "__main__":
    main()
