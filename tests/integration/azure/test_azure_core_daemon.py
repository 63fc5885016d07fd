"""The kccm daemon with ``--cloud-provider=azure`` on the real apiserver and kccm's ARM
emulator (``kccm.emulators.azure``), configured with the azure.json and environment file the
emulator writes for upstream's binaries (AD FS sign-in, TLS with the emulator's CA).

One emulator and one daemon for the module (``vmType: vmss``, routes on ``kccm-rt`` for the
pod CIDRs in ``--cluster-cidr``). Nodes are registered as kubelet registers them; kccm
initialises them centrally (no cloud-node-manager). Each test makes and removes its own VMs,
Nodes and Services; the module leaves the emulator as it found it. The daemon runs as the
shipped ServiceAccount with the shipped RBAC (``deploy/rbac.yaml``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import pytest
import pytest_asyncio
from azure_daemon_support import World

from kccm.emulators.azure.launcher import AzureEmulator, azure_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import absent, delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, Daemons, apply_rbac
from kccm.testing.daemonworld import SHUTDOWN, blocking, start_world_daemon
from kccm.testing.daemonworld import has_taint as has
from kccm.testing.daemonworld import set_ready as _set_ready
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "kccm-az-e2e"


def _start(emulator: AzureEmulator, plane: ControlPlane, tmp: Path) -> tuple[Daemons, Daemon]:
    files = emulator.cloud_files(tmp, vmType="vmss")
    return start_world_daemon(
        "azure",
        Path(files.azure_json),
        plane,
        tmp,
        cluster=CLUSTER,
        allocate_node_cidrs=True,
        env=files.env,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    kube = KubeApiClient(load_cluster_config(str(control_plane.admin_kubeconfig)), qps=0, burst=0)
    with azure_emulator(tls=emulator_tls()) as emulator:
        baseline = emulator.state()
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-azure-e2e")
        daemons, daemon = _start(emulator, control_plane, tmp_path_factory.mktemp("az-e2e"))
        env = World(emulator, daemon, dict(baseline))
        try:
            env.steady = await env.quiet_state()
            yield env
        finally:
            daemons.stop_all(grace=30)
            stopped = daemon.proc.returncode
            await kube.close()
        emulator.assert_clean(baseline)
        assert stopped == 0, f"kccm did not stop cleanly ({stopped})"


@pytest.fixture
async def settled(world: World) -> AsyncIterator[World]:
    yield world
    await world.back_to_steady()


async def _has_taint(kube: KubeApiClient, name: str, wanted: bool) -> bool:
    return await has(kube, name, SHUTDOWN, wanted)


def _routes(world: World) -> set[str]:
    """Route names on the emulator's route tables (``<table>/<route>: <cidr> -> <hop>``)."""
    return {r.split(":", 1)[0].split("/", 1)[1] for r in world.emulator.state().get("routes", [])}


async def test_nodes_are_initialised_and_routed(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """A zonal availability-set VM with a public IP and a scale set VM: providerID, addresses,
    instance type, zone and region as upstream labels them, the uninitialized taint gone, and
    a route per Node's pod CIDR on the route table."""
    world, admin = settled, settled.admin
    tag = uuid.uuid4().hex[:4]
    vm = await blocking(
        admin.add_vm, f"az-vm-{tag}", public_ip=True, zone="1", size="Standard_D4s_v3"
    )
    vmss = await blocking(admin.add_vmss, f"ss{tag}", capacity=1)
    instance = vmss["instances"][0]
    names = [vm["name"], instance["properties"]["osProfile"]["computerName"].lower()]
    try:
        for i, name in enumerate(names):
            cidr = f"10.244.{20 + i}.0/24"
            await kube.create(NODES, kubelet_node(kube_cleanup.add(NODES, name), cidr))
        nodes = {
            n["metadata"]["name"]: n
            for n in await settled.until(lambda: initialised_nodes(kube, names))
        }
        first, second = nodes[names[0]], nodes[names[1]]
        assert first["spec"]["providerID"] == f"azure://{vm['id']}"
        assert second["spec"]["providerID"] == f"azure://{instance['id']}"
        labels = first["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "Standard_D4s_v3"
        assert labels["topology.kubernetes.io/zone"] == "eastus-1"
        assert labels["topology.kubernetes.io/region"] == "eastus"
        types = [a["type"] for a in first["status"]["addresses"]]
        assert sorted(types) == ["ExternalIP", "Hostname", "InternalIP"]
        await world.until(
            lambda: _true_if(
                all(any(r.startswith(f"{n}____") for r in _routes(world)) for n in names)
            )
        )
    finally:
        await delete_until_gone(kube, NODES, names)
        await world.until(
            lambda: _true_if(not any(r.startswith(tuple(names)) for r in _routes(world)))
        )
        await blocking(admin.delete_vm, vm["id"])
        await blocking(admin.delete_vm, vmss["id"])


async def _true_if(value: bool) -> bool | None:
    return True if value else None


async def test_a_deallocated_vm_gets_the_shutdown_taint_and_loses_it(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"az-off-{uuid.uuid4().hex[:4]}")
    vm = await blocking(admin.add_vm, name)
    try:
        await kube.create(NODES, kubelet_node(name))
        await world.until(lambda: initialised_nodes(kube, [name]))
        await blocking(admin.set_power, vm["id"], "deallocated")
        await _set_ready(kube, name, "Unknown")
        await world.until(lambda: _true_if_async(_has_taint(kube, name, True)))
        await blocking(admin.set_power, vm["id"], "running")
        await _set_ready(kube, name, "True")
        await world.until(lambda: _true_if_async(_has_taint(kube, name, False)))
    finally:
        await delete_until_gone(kube, NODES, [name])
        await blocking(admin.delete_vm, vm["id"])


async def _true_if_async(check: Awaitable[bool]) -> bool | None:
    return True if await check else None


async def test_an_arm_error_keeps_the_node_and_a_deleted_vm_deletes_it(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """While ARM refuses the VM reads (403, not retried), the NotReady Node stays (an error is
    never "gone"); once the VM is deleted, the Node is deleted."""
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"az-gone-{uuid.uuid4().hex[:4]}")
    vm = await blocking(admin.add_vm, name)
    deleted = False
    try:
        await kube.create(NODES, kubelet_node(name))
        await world.until(lambda: initialised_nodes(kube, [name]))
        await blocking(
            admin.fault, f"/virtualMachines/{name}", method="GET", status=403,
            code="AuthorizationFailed", times=0,
        )  # fmt: skip
        await _set_ready(kube, name, "Unknown")
        # the lifecycle controller met the error (the 403 is not retried), and kept the Node
        await world.until(lambda: world.daemon.logged(f"error checking if node {name} exists"))
        assert not await absent(kube, NODES, name), "an ARM error deleted the Node"
        world.emulator.clear_faults()
        await blocking(admin.delete_vm, vm["id"])
        deleted = True
        await world.until(lambda: _true_if_async(absent(kube, NODES, name)))
    finally:
        await delete_until_gone(kube, NODES, [name])
        if not deleted:
            await blocking(admin.delete_vm, vm["id"])


async def test_a_load_balancer_service_gets_an_address_and_leaves_nothing(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"az-lb-{uuid.uuid4().hex[:4]}")
    vm = await blocking(admin.add_vm, name)
    svc = f"web-{uuid.uuid4().hex[:4]}"
    try:
        await kube.create(NODES, kubelet_node(name))
        await world.until(lambda: initialised_nodes(kube, [name]))
        await kube.create(
            SERVICES,
            {
                "metadata": {"name": svc},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
            },
            namespace="default",
        )
        await world.until(lambda: _ingress(kube, svc))
        await kube.delete(SERVICES, svc, namespace="default")
        await world.until(lambda: _true_if_async(absent(kube, SERVICES, svc, "default")))
        await world.until(lambda: _no_balancer(world))
    finally:
        if not await absent(kube, SERVICES, svc, "default"):
            await delete_until_gone(kube, SERVICES, [svc], "default")
        await delete_until_gone(kube, NODES, [name])
        await blocking(admin.delete_vm, vm["id"])


async def _ingress(kube: KubeApiClient, name: str) -> str | None:
    found = await kube.get(SERVICES, name, namespace="default")
    ingress = ((found.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return str(ingress[0].get("ip")) if ingress and ingress[0].get("ip") else None


async def _no_balancer(world: World) -> bool | None:
    state = await blocking(world.emulator.state)
    return True if not state.get("loadBalancers") else None
