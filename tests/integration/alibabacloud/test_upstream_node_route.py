"""Upstream's manager (v2.14.0, ``--controllers=node,route``) initialising Nodes and routing
their pods on kccm's Alibaba Cloud emulator and the real apiserver (issue 38): the emulator's
ECS and VPC judged by the binary it imitates, and what upstream made read by kccm as its own.

Upstream reads the instances (``DescribeInstances`` by ``InstanceIds``), turns their primary
ENIs' source/destination check off, labels the Nodes (instance type, zone, region, charge type,
spot strategy) and removes the uninitialized taint; its route controller writes one custom
entry per Node's pod CIDR to the VPC's table (``CreateRouteEntries``). kccm's provider then
gives the same metadata for each Node, lists the same routes, and re-creating them writes
nothing. Deleting the Nodes takes their routes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from alibabacloud_upstream_support import GLOBAL, VPC, VSWITCH, start_manager

from kccm.cloudprovider import Route
from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import Parts, build_parts
from kccm.providers.alibabacloud.routes import NodeDirectory
from kccm.testing.controllers import delete_until_gone, eventually, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import kubelet_node
from kccm.testing.upstream import UpstreamProcesses

pytestmark = pytest.mark.integration


@pytest.fixture
async def table(emu: AlibabaEmulator) -> AsyncIterator[str]:
    made = emu.admin.add_route_table(VPC)
    yield made
    emu.admin.delete_route_table(made)


@pytest.fixture
async def instances(emu: AlibabaEmulator) -> AsyncIterator[list[dict[str, Any]]]:
    made = [
        emu.admin.add_instance(
            vpc=VPC, vswitch=VSWITCH, private_ip=f"10.0.7.{i + 1}", zone="cn-hangzhou-k"
        )
        for i in range(2)
    ]
    yield made
    for instance in made:
        emu.admin.delete_instance(instance["InstanceId"])


def _node(instance: dict[str, Any], index: int) -> Obj:
    """A kubelet Node with the providerID upstream's ``ccm-node`` flow expects and a pod CIDR."""
    node = kubelet_node(instance["InstanceId"], f"10.244.{index}.0/24")
    node["spec"]["providerID"] = f"cn-hangzhou.{instance['InstanceId']}"
    address = instance["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0]
    node["status"]["addresses"] = [{"type": "InternalIP", "address": address}]
    return node


def _kccm(emu: AlibabaEmulator, nodes: list[Obj]) -> Parts:
    text = "Global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in GLOBAL.items())
    parts = build_parts(load_alibaba_config(text), emu.endpoint_env())
    parts.routes.directory = NodeDirectory(lambda: nodes)
    return parts


def _entries(emu: AlibabaEmulator, table: str) -> set[str]:
    return {e for e in emu.state()["route_entries"] if e.startswith(f"{table}:")}


async def _routed(emu: AlibabaEmulator, table: str, wanted: set[str]) -> bool:
    return await asyncio.to_thread(_entries, emu, table) == wanted


async def test_upstream_initialises_and_routes_kccm_reads_the_same(
    emu: AlibabaEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    instances: list[dict[str, Any]],
    table: str,
) -> None:
    names = [i["InstanceId"] for i in instances]
    manager = start_manager(
        upstream,
        emu,
        control_plane,
        "node,route",
        ["--configure-cloud-routes=true", "--cluster-cidr=10.244.0.0/16"],
    )
    try:
        for index, instance in enumerate(instances):
            await kube.create(NODES, _node(instance, index))
        nodes = await eventually(lambda: initialised_nodes(kube, names), within=120)
        wanted = {f"{table}:10.244.{i}.0/24:{n}" for i, n in enumerate(names)}
        await eventually(lambda: _routed(emu, table, wanted), within=120)
        manager.alive()
        assert all(emu.admin.instance(n)["source_dest_check"] is False for n in names)

        since = emu.admin.last_seq()
        parts = await asyncio.to_thread(_kccm, emu, nodes)
        for node in nodes:
            labels = node["metadata"]["labels"]
            meta = await asyncio.to_thread(parts.instances.instance_metadata, node)
            assert meta.provider_id == node["spec"]["providerID"]
            assert meta.instance_type == labels["node.kubernetes.io/instance-type"]
            assert (meta.zone, meta.region) == (
                labels["topology.kubernetes.io/zone"],
                labels["topology.kubernetes.io/region"],
            )
            assert {k: labels.get(k) for k in meta.additional_labels} == dict(
                meta.additional_labels
            )
        listed = await asyncio.to_thread(parts.routes.list_routes, "c")
        pairs = {(r.target_node, r.destination_cidr) for r in listed}
        assert pairs == {(n, f"10.244.{i}.0/24") for i, n in enumerate(names)}
        for target, cidr in sorted(pairs):
            route = Route(name="", target_node=target, destination_cidr=cidr)
            await asyncio.to_thread(parts.routes.create_route, "c", "hint", route)
        assert emu.admin.mutating(since) == []

        await delete_until_gone(kube, NODES, names, within=120)
        await eventually(lambda: _routed(emu, table, set()), within=120)
        manager.alive()
    finally:
        await delete_until_gone(kube, NODES, names, within=120)
