"""Support for ``test_azure_daemon.py``: the module's :class:`World` (the Azure emulator, the
kccm daemon, base machines), starting the daemon with its RBAC and upstream's files, and
readers of what the emulator holds (without a logged call: ``admin.resource``/``state``).

Names as upstream v1.36.5 makes them (``pkg/provider/azure_loadbalancer.go``,
``azure_standard.go``; docs/providers/azure-loadbalancer.md): a Service with UID ``u`` has
``base`` = ``a`` + ``u`` without dashes cut to 32 characters, its frontend ``base``, rules and
probes ``base-<Protocol>-<port>``, its public IP ``<cluster>-base``; the balancer is
``<cluster>`` (``<cluster>-internal`` for internal Services) with one backend pool
``<cluster>``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.emulators.azure.launcher import AzureEmulator, AzureEmulatorError
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.testing import daemonworld
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemon, Daemons
from kccm.testing.daemonworld import (
    SHUTDOWN,
    UNINITIALIZED,
    EmulatorWorld,
    blocking,
    get_service,
    has_taint,
    ingress_ip,
    node_gone,
    set_ready,
)
from kccm.testing.daemonworld import patient as eventually
from kccm.testing.upstream import PROXY_VARS

__all__ = [
    "CLUSTER",
    "INTERNAL",
    "ROOT",
    "SHUTDOWN",
    "UNINITIALIZED",
    "Machine",
    "View",
    "World",
    "base_name",
    "blocking",
    "eventually",
    "get_service",
    "has_taint",
    "in_subnet",
    "ingress_ip",
    "lb_service",
    "machine_of",
    "node_gone",
    "provider_id",
    "routes",
    "routes_are",
    "serves",
    "set_ready",
    "shows",
    "start_daemon",
    "view",
]

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "kccm-az-e2e"
INTERNAL = "service.beta.kubernetes.io/azure-load-balancer-internal"


def base_name(uid: str) -> str:
    """``cloudprovider.DefaultLoadBalancerName``: the frontend, rule and probe prefix."""
    return ("a" + uid.replace("-", ""))[:32]


@dataclass(frozen=True)
class Machine:
    """A seeded VM: its Node's name (the VM's), id, NIC IP configuration id, private IP."""

    name: str
    vm_id: str
    ipconfig_id: str
    ip: str


@dataclass
class World(EmulatorWorld[AzureEmulator]):
    """The module's emulator, daemon and base machines (:class:`EmulatorWorld`: ``until``,
    ``state_is``, ``quiet_state``, ``back_to_steady``)."""

    base: list[Machine] = field(default_factory=list)

    @property
    def config(self) -> dict[str, Any]:
        return self.emulator.config

    def quiet(self, state: Mapping[str, list[Any]]) -> bool:
        """No ARM operation pending: a write's operation in progress (``lro_delay``) is in
        the state until it completes a moment later."""
        return not state["pendingOperations"]

    def rid(self, provider: str, kind: str, name: str) -> str:
        c = self.config
        return (
            f"/subscriptions/{c['subscription']}/resourceGroups/{c['resource_group']}"
            f"/providers/{provider}/{kind}/{name}"
        )

    def network(self, kind: str, name: str) -> dict[str, Any] | None:
        """A ``Microsoft.Network`` resource of the world's group, None when there is none."""
        try:
            return dict(self.admin.resource(self.rid("Microsoft.Network", kind, name)))
        except AzureEmulatorError as exc:
            if " 404 " in str(exc):
                return None
            raise

    async def add_machine(self, name: str, **spec: Any) -> Machine:
        vm = await blocking(self.admin.add_vm, name, **spec)
        return await blocking(machine_of, self.emulator, vm)


def machine_of(emulator: AzureEmulator, vm: dict[str, Any]) -> Machine:
    nic_id = vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
    nic = emulator.admin.resource(nic_id)
    ipc = nic["properties"]["ipConfigurations"][0]
    return Machine(
        str(vm["name"]), str(vm["id"]), str(ipc["id"]), str(ipc["properties"]["privateIPAddress"])
    )


def start_daemon(
    emulator: AzureEmulator,
    plane: ControlPlane,
    tmp: Path,
    *,
    keys: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Daemons, Daemon]:
    """kccm as the shipped ServiceAccount on the emulator's ``azure.json`` (upstream's file,
    unchanged but for ``keys``) and environment file (and ``env``), routes on the config's
    route table (pod CIDRs the test's)."""
    files = emulator.cloud_files(tmp / "cloud", **(keys or {}))
    return daemonworld.start_world_daemon(
        "azure",
        files.azure_json,
        plane,
        tmp,
        cluster=CLUSTER,
        allocate_node_cidrs=False,
        env={**files.env, **(env or {})},
        unset=[*PROXY_VARS, *(v.upper() for v in PROXY_VARS)],
    )


# -- Nodes ------------------------------------------------------------------------------------


def provider_id(resource_id: str) -> str:
    """``azure://`` + the resource id, its resource group in lower case (upstream's
    ``ConvertResourceGroupNameToLower``)."""
    parts = resource_id.split("/")
    parts[4] = parts[4].lower()
    return "azure://" + "/".join(parts)


# -- routes -----------------------------------------------------------------------------------


def routes(world: World) -> set[tuple[str, str]]:
    """(address prefix, next hop) of every route in the config's route table."""
    table = world.network("routeTables", world.config["route_table"]) or {}
    return {
        (r["properties"]["addressPrefix"], r["properties"].get("nextHopIpAddress", ""))
        for r in table.get("properties", {}).get("routes") or []
    }


async def routes_are(world: World, wanted: set[tuple[str, str]]) -> bool:
    return await blocking(routes, world) == wanted


# -- Services and balancers -------------------------------------------------------------------


def lb_service(
    name: str, port: int = 80, annotations: dict[str, str] | None = None, **spec: Any
) -> Obj:
    """:func:`kccm.testing.daemonworld.lb_service` selecting ``app: name``."""
    return daemonworld.lb_service(name, port, annotations, selector={"app": name}, **spec)


@dataclass(frozen=True)
class Rule:
    frontend: str
    frontend_port: int
    backend_port: int
    probe: str


@dataclass(frozen=True)
class Probe:
    protocol: str
    port: int
    path: str


@dataclass(frozen=True)
class Allow:
    """An NSG security rule, its lists as sets."""

    access: str
    sources: frozenset[str]
    destinations: frozenset[str]
    ports: frozenset[str]


@dataclass
class View:
    """A Service's part of a balancer, as the emulator holds it."""

    balancer: str
    frontend_ip: str
    """The frontend's address: its public IP's, or its private one."""
    public_ip: str | None
    """The name of the frontend's public IP (None for a private frontend)."""
    rules: dict[str, Rule]
    probes: dict[str, Probe]
    members: frozenset[str]
    """The IP configuration ids in the balancer's pool ``<cluster>``."""
    security: list[Allow]
    """The NSG rules naming the frontend's address."""


def _last(resource_id: str) -> str:
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def _pool_members(lb: dict[str, Any]) -> frozenset[str]:
    pools = lb["properties"].get("backendAddressPools") or []
    return frozenset(
        str(ipc["id"])
        for pool in pools
        if pool["name"] == CLUSTER
        for ipc in (pool.get("properties") or {}).get("backendIPConfigurations") or []
    )


def _frontend_ip(world: World, frontend: dict[str, Any]) -> tuple[str, str | None]:
    props = frontend["properties"]
    pip_ref = (props.get("publicIPAddress") or {}).get("id")
    if pip_ref:
        pip = world.admin.resource(pip_ref)
        return str(pip["properties"].get("ipAddress", "")), _last(pip_ref)
    return str(props.get("privateIPAddress", "")), None


def _sets(props: dict[str, Any], one: str, many: str) -> frozenset[str]:
    found = {str(props[one])} if props.get(one) else set()
    return frozenset(found | {str(x) for x in props.get(many) or ()})


def security_rules(world: World) -> list[Allow]:
    nsg = world.network("networkSecurityGroups", world.config["nsg"]) or {}
    return [
        Allow(
            str(p.get("access", "")),
            _sets(p, "sourceAddressPrefix", "sourceAddressPrefixes"),
            _sets(p, "destinationAddressPrefix", "destinationAddressPrefixes"),
            _sets(p, "destinationPortRange", "destinationPortRanges"),
        )
        for r in nsg.get("properties", {}).get("securityRules") or []
        for p in [r["properties"]]
    ]


def view(world: World, uid: str, internal: bool = False) -> View | None:
    """The Service's frontend, rules, probes on its balancer, the pool's members and the NSG
    rules naming its address; None while there is no frontend ``base``."""
    name = CLUSTER + ("-internal" if internal else "")
    lb = world.network("loadBalancers", name)
    base = base_name(uid)
    frontends = {f["name"]: f for f in (lb or {}).get("properties", {}).get(
        "frontendIPConfigurations") or []}  # fmt: skip
    if lb is None or base not in frontends:
        return None
    address, pip = _frontend_ip(world, frontends[base])
    props = lb["properties"]
    rules = {
        r["name"]: Rule(
            _last(r["properties"]["frontendIPConfiguration"]["id"]),
            int(r["properties"]["frontendPort"]),
            int(r["properties"]["backendPort"]),
            _last((r["properties"].get("probe") or {}).get("id", "")),
        )
        for r in props.get("loadBalancingRules") or []
        if r["name"].startswith(base)
    }
    probes = {
        p["name"]: Probe(
            str(p["properties"]["protocol"]),
            int(p["properties"]["port"]),
            str(p["properties"].get("requestPath") or ""),
        )
        for p in props.get("probes") or []
        if p["name"].startswith(base)
    }
    allowed = [a for a in security_rules(world) if address and address in a.destinations]
    return View(name, address, pip, rules, probes, _pool_members(lb), allowed)


def in_subnet(address: str, cidr: str) -> bool:
    try:
        return ipaddress.ip_address(address) in ipaddress.ip_network(cidr)
    except ValueError:
        return False


async def shows(
    world: World,
    kube: KubeApiClient,
    ns: str,
    name: str,
    check: Callable[[View, Obj], bool],
    internal: bool = False,
) -> View | None:
    """The Service's view once its status publishes the frontend's address and ``check``
    (view, Service) holds."""
    svc = await get_service(kube, ns, name)
    found = await blocking(view, world, svc["metadata"]["uid"], internal)
    ip = await ingress_ip(kube, ns, name)
    if found is None or ip is None or ip != found.frontend_ip:
        return None
    return found if check(found, svc) else None


def serves(
    found: View,
    svc: Obj,
    ports: dict[int, int],
    members: set[str] | frozenset[str],
    allowed: bool = True,
) -> bool:
    """Rules ``base-TCP-<port>`` for exactly ``ports`` (port -> backend port), each with its
    probe, the pool's members ``members``, and an allow rule naming the Service's address for
    each port; with ``allowed`` False no security rule names it (an internal Service without
    source ranges: upstream's ``IsAllowFromInternet`` is false and no rule is made)."""
    base = base_name(svc["metadata"]["uid"])
    wanted = {f"{base}-TCP-{port}": port for port in ports}
    if set(found.rules) != set(wanted):
        return False
    for rule_name, port in wanted.items():
        rule = found.rules[rule_name]
        if rule.frontend != base or rule.frontend_port != port or rule.probe not in found.probes:
            return False
    if found.members != frozenset(members):
        return False
    if not allowed:
        return found.security == []
    allowed_ports = {p for a in found.security if a.access == "Allow" for p in a.ports}
    return {str(p) for p in ports} <= allowed_ports
