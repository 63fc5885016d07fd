"""The scenarios of bench/azure_side_by_side.py, as tests/integration/azure/test_upstream_lb.py
and test_upstream_routes.py run them: each an action and the emulator state that ends it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from azure_sbs_objects import base_name

from kccm.emulators.azure.launcher import AzureEmulator
from kccm.kube.client import KubeApiClient
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NAMESPACES, NODES, SERVICES
from kccm.testing.kubelet import kubelet_node, ready_condition

POD_CIDRS = ("10.244.31.0/24", "10.244.32.0/24", "10.244.33.0/24", "10.244.34.0/24")
INTERNAL = "service.beta.kubernetes.io/azure-load-balancer-internal"
WITHIN = 180.0


@dataclass
class Machine:
    node: str
    vm_id: str
    nic_id: str
    ip: str
    pod_cidr: str


@dataclass
class Run:
    """One daemon's world: its emulator, the apiserver, its namespace, the Services' UIDs by
    name and the seeded machines by Node name."""

    who: str
    emu: AzureEmulator
    kube: KubeApiClient
    namespace: str
    uids: dict[str, str] = field(default_factory=dict)
    machines: dict[str, Machine] = field(default_factory=dict)
    left: Machine | None = None
    """The Node that left: its VM is deleted once that scenario is counted."""
    doomed: str = ""
    """The Node whose VM the lifecycle scenario deleted."""
    scale_set: str = ""
    """The seeded scale set's id (deleted at the end instead of the machines' VMs)."""
    node_agent: Callable[[str, str], None] | None = None
    """Starts what initialises a registered Node (upstream: its cloud-node-manager; kccm:
    nothing, its cloud-node controller does)."""
    node_ports: dict[int, str] = field(default_factory=dict)
    """The Services' node ports (and health-check node ports) -> ``<name>:<port name>``."""

    async def until(self, probe: Callable[[], Awaitable[bool]], alive: Callable[[], None]) -> None:
        deadline = time.monotonic() + WITHIN
        while not await probe():
            alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.who}: not done within {WITHIN:g} s")
            await asyncio.sleep(0.25)  # the emulator's state has no watch

    def network(self, kind: str, name: str) -> dict[str, Any] | None:
        c = self.emu.config
        rid = (f"/subscriptions/{c['subscription']}/resourceGroups/{c['resource_group']}"
               f"/providers/Microsoft.Network/{kind}/{name}")  # fmt: skip
        state_label = {"loadBalancers": "loadBalancers", "publicIPAddresses": "publicIPAddresses"}
        if kind in state_label and rid not in self.emu.admin.state()[state_label[kind]]:
            return None
        return self.emu.admin.resource(rid)

    def routes(self) -> set[tuple[str, str]]:
        table = self.network("routeTables", self.emu.config["route_table"]) or {}
        return {(r["properties"]["addressPrefix"], r["properties"].get("nextHopIpAddress", ""))
                for r in table["properties"].get("routes") or []}  # fmt: skip

    async def routed(self) -> bool:
        wanted = {(m.pod_cidr, m.ip) for m in self.machines.values() if m.pod_cidr}
        return await asyncio.to_thread(self.routes) == wanted

    def security_ports(self, address: str) -> set[str]:
        nsg = self.network("networkSecurityGroups", self.emu.config["nsg"]) or {}
        found: set[str] = set()
        for rule in nsg["properties"].get("securityRules") or []:
            p = rule["properties"]
            destinations = {
                p.get("destinationAddressPrefix"),
                *(p.get("destinationAddressPrefixes") or []),
            }
            if address in destinations:
                found |= {p.get("destinationPortRange"), *(p.get("destinationPortRanges") or [])}
        return found - {None}

    def members(self) -> int:
        return len(self.emu.admin.state()["poolMembers"])

    async def service(self, name: str) -> Obj | None:
        try:
            return await self.kube.get(SERVICES, name, namespace=self.namespace)
        except NotFound:
            return None

    async def ingress(self, name: str) -> str | None:
        svc = await self.service(name)
        found = ((svc or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        return str(found[0]["ip"]) if found and found[0].get("ip") else None

    async def close(self, alive: Callable[[], None]) -> None:
        """The Nodes deleted while the daemon runs (their routes go), the VMs and the
        namespace after."""
        for name in list(self.machines):
            await _delete(self.kube, NODES, name)
        await self.until(lambda: _empty_routes(self), alive)
        doomed = [self.scale_set] if self.scale_set else [m.vm_id for m in self.machines.values()]
        for vm_id in doomed:
            await asyncio.to_thread(self.emu.admin.delete_vm, vm_id)
        await _delete(self.kube, NAMESPACES, self.namespace)


async def _empty_routes(run: Run) -> bool:
    return not await asyncio.to_thread(run.routes)


async def _delete(
    kube: KubeApiClient, resource: Any, name: str, namespace: str | None = None
) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(resource, name, namespace=namespace)


async def seed_node(run: Run, index: int, *, register: bool = True) -> Machine:
    """VM ``sbs-node-<index>`` (zone 1 + index % 3) and its Node as cloud-node-manager
    leaves it."""
    name = f"sbs-node-{index}"
    vm = await asyncio.to_thread(run.emu.admin.add_vm, name, zone=str(1 + index % 3))
    nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
    nic = await asyncio.to_thread(run.emu.admin.resource, nic_id)
    ip = str(nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"])
    machine = Machine(name, vm["id"], nic_id, ip, POD_CIDRS[index])
    if register:
        await register_node(run, machine)
    return machine


async def register_node(run: Run, machine: Machine) -> None:
    node = kubelet_node(machine.node, machine.pod_cidr)
    parts = machine.vm_id.split("/")
    parts[2], parts[4] = parts[2].lower(), parts[4].lower()
    node["spec"] = {"providerID": "azure://" + "/".join(parts), "podCIDR": machine.pod_cidr,
                    "podCIDRs": [machine.pod_cidr]}  # fmt: skip
    node["status"]["addresses"] = [{"type": "InternalIP", "address": machine.ip},
                                   {"type": "Hostname", "address": machine.node}]  # fmt: skip
    await run.kube.create(NODES, node)
    run.machines[machine.node] = machine


def lb_service(name: str, port: int, annotations: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {"type": "LoadBalancer", "selector": {"app": name},
                 "ports": [{"name": "http", "port": port, "protocol": "TCP"}], **spec},
    }  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    name: str
    act: Callable[[Run], Awaitable[None]]
    done: Callable[[Run], Awaitable[bool]]
    prepare: Callable[[Run], Awaitable[None]] | None = None


def create(name: str, port: int, annotations: dict[str, str] | None = None,
           **spec: Any) -> Callable[[Run], Awaitable[None]]:  # fmt: skip
    async def act(run: Run) -> None:
        if not run.uids:
            await _ensure_namespace(run)
        svc = await run.kube.create(SERVICES, lb_service(name, port, annotations, **spec),
                                    namespace=run.namespace)  # fmt: skip
        run.uids[name] = svc["metadata"]["uid"]
        for given in svc["spec"]["ports"]:
            run.node_ports[int(given["nodePort"])] = f"nodePort:{name}:{given['name']}"
        if svc["spec"].get("healthCheckNodePort"):
            run.node_ports[int(svc["spec"]["healthCheckNodePort"])] = f"healthCheck:{name}"

    return act


async def _ensure_namespace(run: Run) -> None:
    try:
        await run.kube.get(NAMESPACES, run.namespace)
    except NotFound:
        await run.kube.create(NAMESPACES, {"metadata": {"name": run.namespace}})


def published(name: str, port: int, *, internal: bool = False) -> Callable[[Run], Awaitable[bool]]:
    """The Service's address published, its rule ``<base>-TCP-<port>`` on the balancer, every
    Node in the pool, and (public) an allow rule for the port."""

    async def done(run: Run) -> bool:
        ip = await run.ingress(name)
        if ip is None:
            return False
        lb_name = "kubernetes-internal" if internal else "kubernetes"
        lb = await asyncio.to_thread(run.network, "loadBalancers", lb_name)
        rules = {
            r["name"] for r in ((lb or {}).get("properties") or {}).get("loadBalancingRules") or []
        }
        if f"{base_name(run.uids[name])}-TCP-{port}" not in rules:
            return False
        if await asyncio.to_thread(run.members) != len(run.machines):
            return False
        return internal or str(port) in await asyncio.to_thread(run.security_ports, ip)

    return done


async def _move_port(run: Run) -> None:
    patch = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8081}]
    await run.kube.patch(SERVICES, "web", patch, patch_type=PatchType.JSON, namespace=run.namespace)


async def _moved(run: Run) -> bool:
    ip = await run.ingress("web")
    lb = await asyncio.to_thread(run.network, "loadBalancers", "kubernetes") or {}
    rules = {r["name"] for r in lb.get("properties", {}).get("loadBalancingRules") or []}
    base = base_name(run.uids["web"])
    if ip is None or f"{base}-TCP-8081" not in rules or f"{base}-TCP-80" in rules:
        return False
    return await asyncio.to_thread(run.security_ports, ip) == {"8081"}


def delete(name: str) -> Callable[[Run], Awaitable[None]]:
    async def act(run: Run) -> None:
        await _delete(run.kube, SERVICES, name, run.namespace)

    return act


def gone(name: str, lb_name: str = "kubernetes") -> Callable[[Run], Awaitable[bool]]:
    """The Service deleted (its finalizer released) and its frontend off the balancer."""

    async def done(run: Run) -> bool:
        if await run.service(name) is not None:
            return False
        lb = await asyncio.to_thread(run.network, "loadBalancers", lb_name) or {}
        frontends = {
            f["name"] for f in lb.get("properties", {}).get("frontendIPConfigurations") or []
        }
        return base_name(run.uids[name]) not in frontends

    return done


async def _join(run: Run) -> None:
    await seed_node(run, 2)


async def _pool_and_routes(run: Run) -> bool:
    return await run.routed() and await asyncio.to_thread(run.members) == len(run.machines)


async def _leave(run: Run) -> None:
    machine = run.machines.pop("sbs-node-2")
    await _delete(run.kube, NODES, machine.node)
    run.left = machine


async def _doomed(run: Run) -> None:
    """Uncounted: the VM the lifecycle scenario deletes, its Node registered and routed."""
    if run.left is not None:
        await asyncio.to_thread(run.emu.admin.delete_vm, run.left.vm_id)
        run.left = None
    await seed_node(run, 3)


async def _vm_deleted(run: Run) -> None:
    machine = run.machines.pop("sbs-node-3")
    await asyncio.to_thread(run.emu.admin.delete_vm, machine.vm_id)
    conditions = {"status": {"conditions": [ready_condition("Unknown")]}}
    await run.kube.patch(NODES, machine.node, conditions, patch_type=PatchType.STRATEGIC,
                         subresource="status")  # fmt: skip
    run.doomed = machine.node


async def _node_deleted(run: Run) -> bool:
    try:
        await run.kube.get(NODES, run.doomed)
    except NotFound:
        return await run.routed()
    return False


async def _registered(run: Run) -> None:
    """A new VM's Node as kubelet registers it (tainted, no providerID, no pod CIDR)."""
    vm = await asyncio.to_thread(run.emu.admin.add_vm, "sbs-node-5", zone="3")
    nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
    run.machines["sbs-node-5"] = Machine("sbs-node-5", vm["id"], nic_id, "", "")
    await run.kube.create(NODES, kubelet_node("sbs-node-5"))
    if run.node_agent is not None:
        run.node_agent("sbs-node-5", vm["id"])


async def _initialised(run: Run) -> bool:
    node = await run.kube.get(NODES, "sbs-node-5")
    taints = {t["key"] for t in node["spec"].get("taints") or []}
    labels = node["metadata"].get("labels") or {}
    return (
        str(node["spec"].get("providerID", "")).startswith("azure://")
        and "node.cloudprovider.kubernetes.io/uninitialized" not in taints
        and "topology.kubernetes.io/zone" in labels
    )


LOCAL: dict[str, Any] = {"externalTrafficPolicy": "Local",
         "loadBalancerSourceRanges": ["10.20.0.0/16", "192.0.2.0/24"]}  # fmt: skip

SCENARIOS = (
    Scenario("public Service created", create("web", 80), published("web", 80)),
    Scenario("its port changed 80 → 8081", _move_port, _moved),
    Scenario("a second Service on the balancer", create("two", 81), published("two", 81)),
    Scenario("the first deleted (the second stays)", delete("web"), gone("web")),
    Scenario("a third Node joins", _join, _pool_and_routes),
    Scenario("it leaves (Node deleted)", _leave, _pool_and_routes),
    Scenario("the last Service deleted", delete("two"), gone("two")),
    Scenario(
        "internal Service created",
        create("inner", 5000, {INTERNAL: "true"}),
        published("inner", 5000, internal=True),
    ),
    Scenario("internal Service deleted", delete("inner"), gone("inner", "kubernetes-internal")),
    Scenario(
        "Local policy + source ranges created", create("local", 80, **LOCAL), published("local", 80)
    ),
    Scenario("Local policy Service deleted", delete("local"), gone("local")),
    Scenario("a Node registered uninitialised → initialised", _registered, _initialised),
    Scenario(
        "VM deleted, Node not Ready → Node deleted", _vm_deleted, _node_deleted, prepare=_doomed
    ),
)
