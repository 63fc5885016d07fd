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

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import absent, delete_until_gone, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, DaemonExited, Daemons, apply_rbac
from kccm.testing.kubelet import kubelet_node, ready_condition
from kccm.testing.pytest_plugin import KubeCleanup

launcher = pytest.importorskip("kccm.emulators.azure")

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "kccm-az-e2e"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
T = TypeVar("T")

eventually = functools.partial(shared_eventually, within=120.0, interval=0.2)


def blocking(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
    return asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class World:
    emulator: Any
    daemon: Daemon
    steady: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def admin(self) -> Any:
        return self.emulator.admin

    async def until(self, probe: Callable[[], Awaitable[T | None]]) -> T:
        async def watched() -> T | None:
            if self.daemon.proc.poll() is not None:
                logs = await blocking(self.daemon.logs)
                raise DaemonExited(f"kccm exited ({self.daemon.proc.returncode}):\n{logs[-3000:]}")
            return await probe()

        return await eventually(watched)


def _start(emulator: Any, plane: ControlPlane, tmp: Path) -> tuple[Daemons, Daemon]:
    files = emulator.cloud_files(tmp, vmType="vmss")
    daemons = Daemons(tmp)
    daemon = daemons.start(
        "azure",
        Path(files.azure_json),
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        f"--cluster-name={CLUSTER}",
        "--cluster-cidr=10.244.0.0/16",
        "--allocate-node-cidrs=true",
        "--configure-cloud-routes=true",
        "--leader-elect=false",
        "--node-monitor-period=1s",
        "--route-reconciliation-period=2s",
        "--v=2",
        env=files.env,
    )
    return daemons, daemon


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    from kccm.testing.certs import emulator_tls

    kube = KubeApiClient(load_cluster_config(str(control_plane.admin_kubeconfig)), qps=0, burst=0)
    with launcher.azure_emulator(tls=emulator_tls()) as emulator:
        baseline = emulator.state()
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-azure-e2e")
        daemons, daemon = _start(emulator, control_plane, tmp_path_factory.mktemp("az-e2e"))
        env = World(emulator, daemon)
        try:
            env.steady = await blocking(emulator.state)
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
    world.emulator.clear_faults()
    await world.until(lambda: _state_is(world, world.steady))


async def _state_is(world: World, wanted: dict[str, list[Any]]) -> bool:
    return await blocking(world.emulator.state) == wanted


async def _taints(kube: KubeApiClient, name: str) -> set[str]:
    node = await kube.get(NODES, name)
    return {t["key"] for t in node["spec"].get("taints") or []}


async def _has_taint(kube: KubeApiClient, name: str, wanted: bool) -> bool:
    return (SHUTDOWN in await _taints(kube, name)) == wanted


async def _set_ready(kube: KubeApiClient, name: str, status: str) -> None:
    await kube.patch(
        NODES, name, {"status": {"conditions": [ready_condition(status)]}}, subresource="status"
    )


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
