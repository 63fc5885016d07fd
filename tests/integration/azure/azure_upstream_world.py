"""The world upstream's Azure CCM runs in for a test: kccm's Azure emulator with seeded VMs,
their Nodes on the real apiserver (initialised as cloud-node-manager leaves them: providerID,
no uninitialized taint, a pod CIDR each) and the CCM running against both, ready once it
routed every pod CIDR. Readers of the emulator as a test compares upstream's work with it.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import urllib.request
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from azure_upstream_support import Upstream, UpstreamProcesses, upstream_env

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.azure.provider import new_azure_cloud
from kccm.testing.controllers import delete_until_gone
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 120.0
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
POD_CIDRS = ("10.244.31.0/24", "10.244.32.0/24", "10.244.33.0/24")
FAST_ROUTES = {"routeUpdateIntervalInSeconds": 1, "routeUpdateWaitingInSeconds": 1}
"""azure.json keys upstream reads (``pkg/provider/config``): the route batch runs every second,
not every 30 s, and a route table write is awaited 1 s, not 30 s (``updateRoutes``)."""


@dataclass
class Machine:
    """A seeded VM (or scale-set instance) and its Node's name."""

    node: str
    vm: dict[str, Any]
    pod_cidr: str
    ip: str = ""


@dataclass
class World:
    emulator: AzureEmulator
    ccm: Upstream
    kube: KubeApiClient
    machines: list[Machine]
    baseline: dict[str, list[str]]
    """The emulator before anything was seeded."""
    own_vms: bool = True
    """Whether the world seeded the VMs (and deletes them at its end)."""
    ready: dict[str, list[str]] = field(default_factory=dict)
    """The emulator once the CCM routed every Node's pod CIDR."""

    @property
    def config(self) -> dict[str, Any]:
        return self.emulator.config

    def rid(self, kind: str, name: str) -> str:
        """The id of a ``Microsoft.Network`` resource in the world's resource group."""
        c = self.config
        return (
            f"/subscriptions/{c['subscription']}/resourceGroups/{c['resource_group']}"
            f"/providers/Microsoft.Network/{kind}/{name}"
        )

    def resource(self, resource_id: str) -> dict[str, Any]:
        return self.emulator.admin.resource(resource_id)

    def state(self) -> dict[str, list[str]]:
        return self.emulator.admin.state()

    def named(self, label: str) -> dict[str, dict[str, Any]]:
        """The resources of a state label (``loadBalancers``, ``publicIPAddresses``) by name."""
        return {i.rsplit("/", 1)[1]: self.resource(i) for i in self.state().get(label, [])}

    def routes(self) -> dict[str, tuple[str, str]]:
        table = self.resource(self.rid("routeTables", self.config["route_table"]))
        return {
            r["name"]: (r["properties"]["addressPrefix"], r["properties"].get("nextHopIpAddress"))
            for r in table["properties"].get("routes") or []
        }

    def security_rules(self) -> dict[str, dict[str, Any]]:
        nsg = self.resource(self.rid("networkSecurityGroups", self.config["nsg"]))
        return {r["name"]: r["properties"] for r in nsg["properties"].get("securityRules") or []}

    def pool_members(self) -> list[str]:
        return self.state()["poolMembers"]

    def calls(self, since: int = 0) -> list[str]:
        """``<METHOD> <path> <api-version>`` of every ARM call after ``since``."""
        return [
            f"{r['method']} {r['path']} {r.get('api_version') or ''}".rstrip()
            for r in self.emulator.admin.requests(since)
            if r["service"] == "arm"
        ]


def private_ip(emulator: AzureEmulator, vm: dict[str, Any]) -> str:
    """The VM's private address: its NIC's; a scale-set instance's as the instance metadata
    service reports it (the emulator's test API does not render scale-set NICs)."""
    if "/virtualMachineScaleSets/" in vm["id"]:
        return imds_private_ip(emulator, vm["id"])
    nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
    nic = emulator.admin.resource(nic_id)
    return str(nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"])


def imds_private_ip(emulator: AzureEmulator, vm_id: str) -> str:
    """Ask the emulator's metadata service about ``vm_id`` the way upstream does (through
    it as the HTTP proxy of ``169.254.169.254``)."""
    emulator.admin.set_imds_vm(vm_id)
    proxy = urllib.request.ProxyHandler({"http": emulator.imds_url})
    request = urllib.request.Request(
        "http://169.254.169.254/metadata/instance?api-version=2021-10-01&format=json",
        headers={"Metadata": "True"},
    )
    with urllib.request.build_opener(proxy).open(request, timeout=30) as answer:
        found = json.load(answer)
    return str(found["network"]["interface"][0]["ipv4"]["ipAddress"][0]["privateIpAddress"])


def provider_id(resource_id: str) -> str:
    parts = resource_id.split("/")
    parts[2], parts[4] = parts[2].lower(), parts[4].lower()
    return "azure://" + "/".join(parts)


def initialised_node(machine: Machine) -> Obj:
    """The Node as kubelet registers it and cloud-node-manager leaves it."""
    node = kubelet_node(machine.node, machine.pod_cidr)
    node["spec"] = {
        "providerID": provider_id(machine.vm["id"]),
        "podCIDR": machine.pod_cidr,
        "podCIDRs": [machine.pod_cidr],
    }
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": machine.ip},
        {"type": "Hostname", "address": machine.node},
    ]
    return node


async def add_machine(
    emulator: AzureEmulator,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    pod_cidr: str,
    *,
    zone: str = "1",
) -> Machine:
    """A VM and its initialised Node."""
    name = unique_name("az-node")
    vm = await asyncio.to_thread(emulator.admin.add_vm, name, zone=zone)
    machine = Machine(name, vm, pod_cidr, await asyncio.to_thread(private_ip, emulator, vm))
    kube_cleanup.add(NODES, name)
    await kube.create(NODES, initialised_node(machine))
    return machine


async def cidr_routed(world: World, cidr: str) -> bool:
    """Whether the route table routes ``cidr`` (the CCM still alive: it programs them)."""
    world.ccm.alive()
    return cidr in {p for p, _ in (await asyncio.to_thread(world.routes)).values()}


async def cidr_unrouted(world: World, cidr: str) -> bool:
    """Whether ``cidr``'s route is gone: upstream's route controller removes a deleted Node's
    route on its next reconcile, not with the Node's deletion."""
    return not await cidr_routed(world, cidr)


def routed(world: World, machines: Sequence[Machine]) -> bool:
    """Whether the route table routes each Machine's pod CIDR through its address."""
    found = set(world.routes().values())
    return all((m.pod_cidr, m.ip) in found for m in machines)


async def open_world(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    kubeconfig: Path,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    *,
    seeded: Sequence[Machine] = (),
    **azure_json: Any,
) -> AsyncIterator[World]:
    """A fixture body (see the module docstring): two VMs and their Nodes, or the
    ``seeded`` machines whose Nodes the caller made (scale-set instances: the emulator
    before the CCM starts is then the baseline). At its end the Nodes are deleted while the
    CCM runs, their routes must go, and with the seeded VMs deleted the emulator is as it
    was."""
    baseline = await asyncio.to_thread(emulator.admin.state)
    machines = list(seeded) or [
        await add_machine(emulator, kube, kube_cleanup, cidr, zone=str(1 + i % 3))
        for i, cidr in enumerate(POD_CIDRS[:2])
    ]
    files = emulator.cloud_files(upstream.tmp / "cloud", **(FAST_ROUTES | azure_json))
    ccm = upstream.start_ccm(files.azure_json, kubeconfig, upstream_env(files.env))
    world = World(emulator, ccm, kube, machines, baseline, own_vms=not seeded)
    await eventually(lambda: _alive_and(ccm, lambda: routed(world, machines)))
    world.ready = await asyncio.to_thread(emulator.admin.state)
    yield world
    await close_world(world)


async def close_world(world: World) -> None:
    print(request_log(world.emulator))  # shown with -rP: docs/measurements.md's call tables
    names = [m.node for m in world.machines]
    await delete_until_gone(world.kube, NODES, names, within=BUDGET)
    await eventually(lambda: _alive_and(world.ccm, lambda: not world.routes()))
    for machine in world.machines if world.own_vms else ():
        await asyncio.to_thread(world.emulator.admin.delete_vm, machine.vm["id"])
    world.emulator.admin.assert_clean(world.baseline)


async def _alive_and(ccm: Upstream, probe: Callable[[], Any]) -> Any:
    ccm.alive()
    return await asyncio.to_thread(probe)


def request_log(emulator: AzureEmulator, since: int = 0) -> str:
    """The emulator's request log, one call a line, the subscription and resource group as
    ``{sub}`` and ``{rg}``."""
    config = emulator.config
    lines = ["--- Azure emulator requests ---"]
    for r in emulator.admin.requests(since):
        path = r["path"].replace(config["subscription"], "{sub}")
        path = path.replace(f"resourceGroups/{config['resource_group']}/", "resourceGroups/{rg}/")
        version = r.get("api_version") or ""
        extra = [q for q in (r.get("query") or "").split("&") if q and "api-version" not in q]
        path += f"?{'&'.join(extra)}" if extra else ""
        lines.append(
            f"{r['seq']:4} {r['service']:5} {r['method']:6} {path} {version} {r['status']}"
        )
    return "\n".join(lines)


def lb_service(name: str, port: int = 80, **annotations: str) -> Obj:
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": name},
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        },
    }


async def published(world: World, namespace: str, name: str) -> Obj | None:
    """The Service once its status names an ingress IP."""
    world.ccm.alive()
    svc = await world.kube.get(SERVICES, name, namespace=namespace)
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return svc if ingress and ingress[0].get("ip") else None


def ingress_ip(svc: Obj) -> str:
    return str(svc["status"]["loadBalancer"]["ingress"][0]["ip"])


def kccm_balancers(
    emulator: AzureEmulator, directory: Path, monkeypatch: pytest.MonkeyPatch, **azure_json: Any
) -> Any:
    """kccm's azure provider's balancers from the emulator's azure.json, as the daemon makes
    them (its environment set for the rest of the test)."""
    files = emulator.cloud_files(directory, **azure_json)
    for key, value in files.env.items():
        monkeypatch.setenv(key, value)
    config = io.StringIO(Path(files.azure_json).read_text())
    return new_azure_cloud(config).load_balancer()
