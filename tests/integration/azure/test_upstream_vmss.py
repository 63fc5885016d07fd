"""Upstream's cloud-node-manager and cloud-controller-manager v1.36.5 with scale-set Nodes
(``"vmType": "vmss"``) on kccm's Azure emulator and the real apiserver.

A scale-set instance's Node is named after its computer name; its providerID is the
instance's id (``.../virtualMachineScaleSets/<set>/virtualMachines/<id>``). The CCM finds
instances by listing the resource group's scale sets and each set's instances with their
instance views (``listScaleSetVMs``, ``pkg/provider/azure_vmss.go``), joins them to a
balancer's pool through the scale set's model and each instance (``ensureVMSSInPool``,
``EnsureHostsInPool``), and reads shut down from the instance view's power state
(``InstanceShutdownByProviderID``): deallocated → the shutdown taint while the Node is not
Ready, running and Ready again → no taint.
"""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path
from unittest import mock

import pytest
from azure_upstream_support import (
    UpstreamProcesses,
    upstream_env,
)
from azure_upstream_world import (
    BUDGET,
    POD_CIDRS,
    Machine,
    World,
    eventually,
    ingress_ip,
    initialised_node,
    kccm_balancers,
    lb_service,
    open_world,
    private_ip,
    provider_id,
    published,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.azure.provider import new_azure_cloud
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import ready_condition
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

SHUTDOWN_TAINT = "node.cloudprovider.kubernetes.io/shutdown"
FAST_CACHES = {"vmssCacheTTLInSeconds": 2, "vmssVirtualMachinesCacheTTLInSeconds": 2}
"""azure.json keys upstream reads: its scale-set and instance lists are cached 600 s by
default, which would hide a power change that long."""


@pytest.fixture
async def instances(emulator: AzureEmulator, request: pytest.FixtureRequest) -> list[Machine]:
    """A two-instance scale set in zones 1 and 2 (each instance with a public IP when the test
    is parametrised ``instances=True``); a Machine per instance."""
    name = unique_name("vmss")[-12:].replace("-", "")
    public = bool(getattr(request, "param", False))
    seeded = await asyncio.to_thread(
        emulator.admin.add_vmss, name, capacity=2, zones=["1", "2"], public_ip=public
    )
    machines = []
    for cidr, vm in zip(POD_CIDRS, seeded["instances"], strict=False):
        node = vm["properties"]["osProfile"]["computerName"].lower()
        machines.append(Machine(node, vm, cidr, await asyncio.to_thread(private_ip, emulator, vm)))
    return machines


@pytest.fixture
async def world(
    emulator: AzureEmulator,
    instances: list[Machine],
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    for machine in instances:
        kube_cleanup.add(NODES, machine.node)
        await kube.create(NODES, initialised_node(machine))
    async for opened in open_world(
        emulator,
        upstream,
        control_plane.admin_kubeconfig,
        kube,
        kube_cleanup,
        seeded=instances,
        vmType="vmss",
        **FAST_CACHES,
    ):
        yield opened


def _kccm_addresses(emulator: AzureEmulator, directory: Path, node: Obj) -> list[dict[str, str]]:
    """The addresses kccm's provider (``vmType: vmss``) gives the Node, as the API shows them."""
    files = emulator.cloud_files(directory, vmType="vmss")
    config = io.StringIO(Path(files.azure_json).read_text())
    with mock.patch.dict(os.environ, files.env):
        instances = new_azure_cloud(config).instances_v2()
        assert instances is not None
        found = instances.instance_metadata({"metadata": node["metadata"], "spec": {}})
    assert found is not None
    return [{"type": a.type, "address": a.address} for a in found.node_addresses]


@pytest.mark.parametrize(
    "instances",
    [pytest.param(False, id="private"), pytest.param(True, id="public-ip")],
    indirect=True,
)
async def test_cloud_node_manager_initialises_a_scale_set_instance_from_imds(
    emulator: AzureEmulator,
    instances: list[Machine],
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    request: pytest.FixtureRequest,
) -> None:
    """Upstream's DaemonSet mode; kccm's provider gives the Node the same addresses (the public
    IP's as ``ExternalIP``, ``GetIPByNodeName`` in ``azure_vmss.go`` v1.36.5)."""
    machine = instances[1]
    await asyncio.to_thread(emulator.admin.set_imds_vm, machine.vm["id"])
    files = emulator.cloud_files(upstream.tmp / "cloud")
    env = upstream_env(files.env, HTTP_PROXY=emulator.imds_url, NODE_NAME=machine.node)
    kube_cleanup.add(NODES, machine.node)
    node_obj = initialised_node(machine)
    node_obj["spec"] = {
        "taints": [
            {
                "key": "node.cloudprovider.kubernetes.io/uninitialized",
                "value": "true",
                "effect": "NoSchedule",
            }
        ]
    }
    await kube.create(NODES, node_obj)
    cnm = upstream.start_cnm(machine.node, control_plane.admin_kubeconfig, env)

    async def initialised() -> list[Obj] | None:
        cnm.alive()
        return await initialised_nodes(kube, [machine.node])

    (node,) = await eventually(initialised)
    assert node["spec"]["providerID"] == provider_id(machine.vm["id"])
    labels = node["metadata"]["labels"]
    assert labels["topology.kubernetes.io/zone"] == "eastus-2"
    assert {a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"} == {
        machine.ip
    }
    types = [a["type"] for a in node["status"]["addresses"]]
    assert ("ExternalIP" in types) is bool(request.node.callspec.params["instances"])
    ours = await asyncio.to_thread(_kccm_addresses, emulator, upstream.tmp / "kccm", node)
    assert sorted(ours, key=str) == sorted(node["status"]["addresses"], key=str)


def _instance_members(world: World) -> set[str]:
    """The scale-set instances whose NICs are in a backend pool."""
    return {m.split("/networkInterfaces/")[0].lower() for m in world.pool_members()}


async def test_upstream_balances_scale_set_instances_and_deletes_the_balancer(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    await eventually(lambda: published(world, ns, "web"))
    expected = {m.vm["id"].lower() for m in world.machines}
    assert await asyncio.to_thread(_instance_members, world) == expected

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def _set_ready(kube: KubeApiClient, node: str, status: str) -> None:
    patch = {"status": {"conditions": [ready_condition(status)]}}
    await kube.patch(NODES, node, patch, patch_type=PatchType.STRATEGIC, subresource="status")


async def _taints(world: World, node: str) -> set[str]:
    world.ccm.alive()
    found = await world.kube.get(NODES, node)
    return {t["key"] for t in found["spec"].get("taints") or []}


async def test_upstream_taints_a_deallocated_instance_shut_down_and_untaints_it(
    world: World, kube: KubeApiClient
) -> None:
    machine = world.machines[0]
    await asyncio.to_thread(world.emulator.admin.set_power, machine.vm["id"], "deallocated")
    await _set_ready(kube, machine.node, "Unknown")

    async def tainted() -> bool:
        return SHUTDOWN_TAINT in await _taints(world, machine.node)

    await eventually(tainted)
    await asyncio.to_thread(world.emulator.admin.set_power, machine.vm["id"], "running")
    await _set_ready(kube, machine.node, "True")

    async def untainted() -> bool:
        return SHUTDOWN_TAINT not in await _taints(world, machine.node)

    await eventually(untainted)


async def test_kccm_adopts_upstreams_scale_set_balancer_without_a_write(
    world: World,
    kube: KubeApiClient,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Switching from upstream with scale-set Nodes (issue 37, deliverable 4): the balancer,
    public IP, security rule and pool memberships upstream's CCM made through the scale set's
    model and its instances are adopted by kccm's provider (``vmType: vmss``) with the same
    address and no write; kccm's delete takes the instances and the model out of the pool and
    leaves the emulator as upstream found it."""
    ns = kube_namespace
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    made = await eventually(lambda: published(world, ns, "web"))
    expected = {m.vm["id"].lower() for m in world.machines}
    assert await asyncio.to_thread(_instance_members, world) == expected
    nodes = (await kube.list(NODES)).items
    balancers = await asyncio.to_thread(
        kccm_balancers, world.emulator, tmp_path / "kccm", monkeypatch, vmType="vmss"
    )

    since = await asyncio.to_thread(world.emulator.admin.last_seq)
    status = await asyncio.to_thread(balancers.ensure_load_balancer, "kubernetes", made, nodes)
    assert [i.ip for i in status.ingress] == [ingress_ip(made)]
    assert await asyncio.to_thread(world.emulator.admin.mutating, since) == []

    await asyncio.to_thread(balancers.ensure_load_balancer_deleted, "kubernetes", made)
    assert await asyncio.to_thread(_instance_members, world) == set()
    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)
