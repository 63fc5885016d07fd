"""Switching from upstream: balancers, public IPs and security rules that cloud-provider-azure
v1.36.5's cloud-controller-manager made (the binary built from Go modules, on the real
apiserver and kccm's ARM emulator) are adopted by kccm's azure provider as they are: its
ensure of the same Services returns the same addresses with no write in the emulator's request
log (issue 37, deliverable 4), and its delete leaves the emulator as upstream found it.

Two Services at once on the shared balancers: a public one with source ranges, an idle
timeout, ``ClientIP`` affinity, a DNS label and two protocols; an internal one with
``externalTrafficPolicy: Local``. kccm's provider is made by its factory from the azure.json
the emulator writes for upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from azure_upstream_support import UpstreamProcesses
from azure_upstream_world import (
    World,
    eventually,
    ingress_ip,
    kccm_balancers,
    open_world,
    published,
)

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import KubeCleanup

P = "service.beta.kubernetes.io/"
PUBLIC: Obj = {
    "metadata": {
        "name": "web",
        "annotations": {
            P + "azure-load-balancer-tcp-idle-timeout": "10",
            P + "azure-dns-label-name": "kccm-web",
        },
    },
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "web"},
        "sessionAffinity": "ClientIP",
        "loadBalancerSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"],
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "dns", "port": 53, "protocol": "UDP"},
        ],
    },
}
INTERNAL: Obj = {
    "metadata": {"name": "inner", "annotations": {P + "azure-load-balancer-internal": "true"}},
    "spec": {
        "type": "LoadBalancer",
        "selector": {"app": "inner"},
        "externalTrafficPolicy": "Local",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    },
}


@pytest.fixture
async def world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    async for opened in open_world(
        emulator, upstream, control_plane.admin_kubeconfig, kube, kube_cleanup
    ):
        yield opened


@pytest.fixture
async def basic_world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
) -> AsyncIterator[World]:
    """Upstream's CCM with ``loadBalancerSku: basic`` (no primary availability set named:
    every VM in the pool on both sides)."""
    async for opened in open_world(
        emulator,
        upstream,
        control_plane.admin_kubeconfig,
        kube,
        kube_cleanup,
        loadBalancerSku="basic",
    ):
        yield opened


async def test_kccm_adopts_what_upstream_made_without_a_write(
    world: World,
    kube: KubeApiClient,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kube_namespace
    for body in (PUBLIC, INTERNAL):
        await kube.create(SERVICES, body, namespace=ns)
    made = [await eventually(lambda n=n: published(world, ns, n)) for n in ("web", "inner")]
    nodes = (await kube.list(NODES)).items
    balancers = kccm_balancers(world.emulator, tmp_path / "kccm", monkeypatch)

    since = await asyncio.to_thread(world.emulator.admin.last_seq)
    for svc in made:
        status = await asyncio.to_thread(balancers.ensure_load_balancer, "kubernetes", svc, nodes)
        assert [i.ip for i in status.ingress] == [ingress_ip(svc)]
    assert await asyncio.to_thread(world.emulator.admin.mutating, since) == []

    for svc in made:
        await asyncio.to_thread(balancers.ensure_load_balancer_deleted, "kubernetes", svc)
    await delete_until_gone(kube, SERVICES, ["web", "inner"], ns, within=120)
    world.emulator.admin.assert_clean(world.ready)


async def test_kccm_adopts_upstreams_basic_sku_objects_without_a_write(
    basic_world: World,
    kube: KubeApiClient,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Basic balancer, Basic public IPs (Static, no zones), their security rules, as
    upstream's CCM makes them in basic mode: kccm returns the same addresses, writes
    nothing, and its delete leaves the emulator as upstream found it."""
    world, ns = basic_world, kube_namespace
    for body in (PUBLIC, INTERNAL):
        await kube.create(SERVICES, body, namespace=ns)
    made = [await eventually(lambda n=n: published(world, ns, n)) for n in ("web", "inner")]
    state = await asyncio.to_thread(world.emulator.admin.state)
    assert len(state["loadBalancers"]) == 2
    assert len(state["publicIPAddresses"]) == 1
    for lb in state["loadBalancers"]:
        body = await asyncio.to_thread(world.emulator.admin.resource, lb)
        assert body["sku"]["name"] == "Basic"
    for pip in state["publicIPAddresses"]:
        body = await asyncio.to_thread(world.emulator.admin.resource, pip)
        assert body["sku"]["name"] == "Basic"
        assert not body.get("zones")
        assert body["properties"]["publicIPAllocationMethod"] == "Static"
    nodes = (await kube.list(NODES)).items
    balancers = kccm_balancers(
        world.emulator, tmp_path / "kccm", monkeypatch, loadBalancerSku="basic"
    )

    since = await asyncio.to_thread(world.emulator.admin.last_seq)
    for svc in made:
        status = await asyncio.to_thread(balancers.ensure_load_balancer, "kubernetes", svc, nodes)
        assert [i.ip for i in status.ingress] == [ingress_ip(svc)]
    assert await asyncio.to_thread(world.emulator.admin.mutating, since) == []

    for svc in made:
        await asyncio.to_thread(balancers.ensure_load_balancer_deleted, "kubernetes", svc)
    await delete_until_gone(kube, SERVICES, ["web", "inner"], ns, within=120)
    world.emulator.admin.assert_clean(world.ready)
