"""Upstream's Azure cloud-controller-manager v1.36.5: routes for the Nodes' pod CIDRs on the
configured route table, and the Node lifecycle, on kccm's Azure emulator and the real apiserver.

Routes (``pkg/provider/azure_routes.go``): ``CreateRoute`` queues the route in a batch that
rewrites the route table with every route inline (``delayedRouteUpdater``); a route is named
``<node>____<pod CIDR's digits>`` (upstream names routes that way whether or not the cluster
is dual stack) and sends the pod CIDR to the Node's private address as a
``VirtualAppliance`` hop. A deleted Node's route is removed the same way (the world's
teardown checks that for every Node).

Lifecycle (``pkg/provider/azure_instances_v1.go``, ``InstanceExistsByProviderID``): once a
Node stops reporting Ready, a VM ARM answers 404 for is gone, and the cloud-node-lifecycle
controller deletes its Node.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from azure_upstream_support import UpstreamProcesses
from azure_upstream_world import (
    POD_CIDRS,
    World,
    add_machine,
    cidr_routed,
    cidr_unrouted,
    eventually,
    open_world,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import PatchType
from kccm.kube.resources import NODES
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import ready_condition
from kccm.testing.pytest_plugin import KubeCleanup


@pytest.fixture
async def world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    # a VM is cached 60 s by default (vmCacheTTLInSeconds): the lifecycle test's deleted VM
    # would read as present that long
    async for opened in open_world(
        emulator,
        upstream,
        control_plane.admin_kubeconfig,
        kube,
        kube_cleanup,
        vmCacheTTLInSeconds=2,
    ):
        yield opened


async def test_upstream_routes_each_pod_cidr_through_its_node(world: World) -> None:
    table = world.resource(world.rid("routeTables", world.config["route_table"]))
    routes = {r["name"]: r["properties"] for r in table["properties"]["routes"]}
    assert {
        name: (p["addressPrefix"], p["nextHopType"], p["nextHopIpAddress"])
        for name, p in routes.items()
    } == {
        route_name(m.node, m.pod_cidr): (m.pod_cidr, "VirtualAppliance", m.ip)
        for m in world.machines
    }


def route_name(node: str, cidr: str) -> str:
    """``<node>____<cidr without '.', ':' and '/'>``: upstream always names routes as in dual
    stack (``ipv6DualStackEnabled = true``, azure.go; ``mapNodeNameToRouteName``,
    ``cidrtoRfc1035``, azure_routes.go)."""
    return f"{node}____{cidr.replace(':', '').replace('.', '').replace('/', '')}"


async def _node_gone(kube: KubeApiClient, world: World, name: str) -> bool:
    world.ccm.alive()
    try:
        await kube.get(NODES, name)
    except NotFound:
        return True
    return False


async def test_upstream_deletes_the_node_of_a_deleted_vm_once_it_is_not_ready(
    world: World, emulator: AzureEmulator, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    gone = await add_machine(emulator, kube, kube_cleanup, POD_CIDRS[2], zone="2")
    await eventually(lambda: cidr_routed(world, gone.pod_cidr))
    await asyncio.to_thread(emulator.admin.delete_vm, gone.vm["id"])
    await kube.patch(
        NODES,
        gone.node,
        {"status": {"conditions": [ready_condition("Unknown")]}},
        patch_type=PatchType.STRATEGIC,
        subresource="status",
    )
    await eventually(lambda: _node_gone(kube, world, gone.node))
    # the route of the deleted Node goes too
    await eventually(lambda: cidr_unrouted(world, gone.pod_cidr))
