"""The kccm daemon with ``--cloud-provider=azure`` on the real apiserver and the Azure emulator
(``kccm.emulators.azure``, HTTPS with its own CA), faults injected along the way.

One emulator and one daemon for the module (``--cluster-name=kccm-az-e2e``, routes on the
config's route table ``kccm-rt``), started on the ``azure.json`` and environment file the
emulator writes for upstream's binaries (``"cloud": "AzureStackCloud"``, ADFS sign-in), with
two VMs whose Nodes (podCIDRs 10.244.0.0/24 and 10.244.1.0/24) every test may use. Each test
makes and removes its own VMs, Nodes and Services; the module leaves the emulator as it found
it (``admin.assert_clean``).

Faults (``admin.fault``): 500s and 429s (``Retry-After``) from Compute, an expired token, 412s
on balancer, security group and route table writes, latency. Each must be met
(``admin.faults()`` empty afterwards). The daemon runs as the shipped ServiceAccount with the
shipped RBAC alone (``deploy/rbac.yaml``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from azure_daemon_support import (
    INTERNAL,
    ROOT,
    SHUTDOWN,
    UNINITIALIZED,
    View,
    World,
    base_name,
    blocking,
    get_service,
    has_taint,
    in_subnet,
    ingress_ip,
    lb_service,
    machine_of,
    node_gone,
    provider_id,
    routes_are,
    serves,
    set_ready,
    shows,
    start_daemon,
    view,
)
from azure_nsg_support import USER_RULE, drop_user_rule, emulator_arm, user_rule

from kccm.emulators.azure.launcher import azure_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import apply_rbac
from kccm.testing.daemonworld import module_world
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup

VMS = "/providers/Microsoft.Compute/virtualMachines"
RANGES = "/spec/loadBalancerSourceRanges"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    """The emulator, the daemon (shipped ServiceAccount and RBAC) and two base Nodes with
    their routes; afterwards the Nodes go while the daemon runs (their routes with them), the
    daemon must stop cleanly, and the emulator must hold what it held before."""
    kube = KubeApiClient(load_cluster_config(str(control_plane.admin_kubeconfig)), qps=0, burst=0)
    with azure_emulator(tls=emulator_tls(), lro_delay=0.1) as emulator:
        baseline = await blocking(emulator.admin.state)
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-azure-e2e")
        daemons, daemon = start_daemon(emulator, control_plane, tmp_path_factory.mktemp("az-e2e"))
        env = World(emulator, daemon, baseline)
        names: list[str] = []

        async def remove_base() -> None:
            for machine in env.base:
                await blocking(emulator.admin.delete_vm, machine.vm_id)

        async with module_world(
            env,
            kube,
            daemons,
            nodes=names,
            routes_gone=lambda: routes_are(env, set()),
            remove_base=remove_base,
            label="azure e2e",
        ):
            tag = uuid.uuid4().hex[:6]
            for i in range(2):
                machine = await env.add_machine(f"az-base-{tag}-{i}", zone=str(i + 1))
                env.base.append(machine)
                names.append(machine.name)
                await kube.create(NODES, kubelet_node(machine.name, f"10.244.{i}.0/24"))
            await env.until(lambda: initialised_nodes(kube, names))
            routed = {(f"10.244.{i}.0/24", m.ip) for i, m in enumerate(env.base)}
            await env.until(lambda: routes_are(env, routed))
            env.steady = await env.quiet_state()
            yield env


@pytest.fixture
async def settled(world: World) -> AsyncIterator[World]:
    """The world, which the test must leave as the module fixture made it: no balancer,
    public IP, security rule, route, pool membership or VM of its own left in the emulator,
    no fault pending."""
    yield world
    await world.back_to_steady()


def base_members(world: World) -> set[str]:
    return {m.ipconfig_id for m in world.base}


# -- Nodes ------------------------------------------------------------------------------------


async def test_nodes_are_initialised_from_arm_through_faults(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """A zonal VM and a VM in an availability set (fault domain 1); Compute answers 500
    twice, throttles once (429, Retry-After 1) and slowly: both Nodes get providerID,
    InternalIP, instance type, zone and region as upstream labels them, and lose the
    uninitialized taint."""
    world, admin = settled, settled.admin
    tag = uuid.uuid4().hex[:6]
    zonal, aset = f"az-init-{tag}-a", f"az-init-{tag}-b"
    machines = {
        zonal: await world.add_machine(zonal, zone="2", size="Standard_D4s_v3"),
        aset: await world.add_machine(
            aset, availability_set=f"as-{tag}", fault_domain=1, size="Standard_B2s"
        ),
    }
    wanted = {  # name -> (instance type, zone)
        zonal: ("Standard_D4s_v3", "eastus-2"),
        aset: ("Standard_B2s", "1"),
    }
    since = await blocking(admin.last_seq)
    await blocking(admin.fault, VMS, method="GET", kind="error", status=500, times=2)
    await blocking(admin.fault, VMS, method="GET", kind="throttle", retry_after=1)
    await blocking(admin.fault, VMS, method="GET", kind="latency", latency=0.3)
    started = time.monotonic()
    try:
        await kube.create(NODES, kubelet_node(kube_cleanup.add(NODES, zonal)))
        await world.until(lambda: initialised_nodes(kube, [zonal]))
        await kube.create(NODES, kubelet_node(kube_cleanup.add(NODES, aset)))
        nodes = await world.until(lambda: initialised_nodes(kube, list(wanted)))
        world.figures["nodes_initialised_through_faults_s"] = round(time.monotonic() - started, 1)
        for node in nodes:
            name = node["metadata"]["name"]
            machine, (size, zone) = machines[name], wanted[name]
            assert node["spec"]["providerID"] == provider_id(machine.vm_id)
            addresses = {(a["type"], a["address"]) for a in node["status"]["addresses"]}
            assert ("InternalIP", machine.ip) in addresses
            assert ("Hostname", name) in addresses
            labels = node["metadata"]["labels"]
            assert labels["node.kubernetes.io/instance-type"] == size
            assert labels["topology.kubernetes.io/zone"] == zone
            assert labels["topology.kubernetes.io/region"] == "eastus"
            assert UNINITIALIZED not in {t["key"] for t in node["spec"].get("taints") or []}
        calls = await blocking(admin.requests, since)
        statuses = [c["status"] for c in calls if c["service"] == "arm"]
        assert statuses.count(500) == 2
        assert statuses.count(429) == 1
        assert await blocking(admin.faults) == []
    finally:
        await delete_until_gone(kube, NODES, list(wanted))
        for machine in machines.values():
            await blocking(admin.delete_vm, machine.vm_id)


@dataclass
class Lifecycle:
    """What happens to an initialised Node's VM, and how ARM answers meanwhile."""

    act: str
    """``deallocated``, ``stopped`` (power states) or ``delete``."""
    fault: dict[str, Any] | None = None
    """A fault on every VM read while the Node is not Ready: kccm must keep the Node until
    ARM answers again (then it goes, its VM being gone)."""


LIFECYCLE = [
    pytest.param(Lifecycle("deallocated"), id="vm-deallocated-shutdown-taint-and-back"),
    pytest.param(Lifecycle("stopped"), id="vm-stopped-shutdown-taint-and-back"),
    pytest.param(Lifecycle("delete"), id="vm-deleted-node-deleted"),
    pytest.param(
        Lifecycle("delete", {"kind": "error", "status": 500}),
        id="vm-deleted-arm-500-keeps-the-node-until-arm-answers",
    ),
    pytest.param(
        Lifecycle("delete", {"kind": "throttle", "retry_after": 1}),
        id="vm-deleted-arm-429-keeps-the-node-until-arm-answers",
    ),
]


@pytest.mark.parametrize("case", LIFECYCLE)
async def test_node_follows_its_vm(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup, case: Lifecycle
) -> None:
    """The node lifecycle controller, once kubelet stops posting (Ready Unknown): a
    deallocated or stopped VM's Node gets the shutdown taint (and loses it when the VM runs
    and the Node is Ready again); a deleted VM's Node is deleted, but never while ARM answers
    an error or throttles: only ARM's 404 says a VM is gone."""
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"az-life-{uuid.uuid4().hex[:6]}")
    machine = await world.add_machine(name)
    gone = False
    try:
        await kube.create(NODES, kubelet_node(name))
        await world.until(lambda: initialised_nodes(kube, [name]))
        if case.act != "delete":
            await blocking(admin.set_power, machine.vm_id, case.act)
            await set_ready(kube, name, "Unknown")
            await world.until(lambda: has_taint(kube, name, SHUTDOWN, True))
            await blocking(admin.set_power, machine.vm_id, "running")
            await set_ready(kube, name, "True")
            await world.until(lambda: has_taint(kube, name, SHUTDOWN, False))
            return
        await blocking(admin.delete_vm, machine.vm_id)
        gone = True
        if case.fault is not None:
            await blocking(admin.fault, VMS, method="GET", times=0, **case.fault)
            await set_ready(kube, name, "Unknown")
            # the lifecycle controller met the error (500s after the ARM client's 3 retries)
            await world.until(lambda: world.daemon.logged(f"error checking if node {name} exists"))
            assert not await node_gone(kube, name), "a Node was deleted on an ARM error"
            await blocking(admin.clear_faults)
        else:
            await set_ready(kube, name, "Unknown")
        await world.until(lambda: node_gone(kube, name))
    finally:
        await delete_until_gone(kube, NODES, [name])
        if not gone:
            await blocking(admin.delete_vm, machine.vm_id)


# -- LoadBalancer Services --------------------------------------------------------------------


async def test_a_load_balancer_service_through_its_life(
    settled: World, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """Create (the first balancer write answered 500, the first security group write 412,
    reads slow), port change (a 412 on the balancer), a Node joins and leaves, delete: the
    balancer's frontend, rule, probe, pool members, public IP and security rule follow, the
    Service's status carries the public IP's address."""
    world, admin, ns, name = settled, settled.admin, kube_namespace, "web"
    base = base_members(world)
    await blocking(admin.fault, r"/loadBalancers/", method="PUT", kind="error", status=500)
    await blocking(admin.fault, r"/networkSecurityGroups/", method="PUT", kind="precondition")
    await blocking(admin.fault, r"/publicIPAddresses", method="GET", kind="latency", latency=0.2)
    started = time.monotonic()

    # -- create ---------------------------------------------------------------------------
    await kube.create(SERVICES, lb_service(name), namespace=ns)
    found = await world.until(
        lambda: shows(world, kube, ns, name, lambda v, s: serves(v, s, {80: 80}, base))
    )
    svc = await get_service(kube, ns, name)
    assert found.public_ip == f"kccm-az-e2e-{base_name(svc['metadata']['uid'])}"
    world.figures["service_created_s"] = round(time.monotonic() - started, 1)

    # -- port change, through a 412 on the balancer ----------------------------------------
    phase = time.monotonic()
    await blocking(admin.fault, r"/loadBalancers/", method="PUT", kind="precondition")
    port = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}]
    await kube.patch(SERVICES, name, port, patch_type=PatchType.JSON, namespace=ns)
    await world.until(
        lambda: shows(world, kube, ns, name, lambda v, s: serves(v, s, {8080: 8080}, base))
    )
    world.figures["port_changed_s"] = round(time.monotonic() - phase, 1)

    # -- a Node joins, then leaves ----------------------------------------------------------
    phase = time.monotonic()
    joiner = await world.add_machine(kube_cleanup.add(NODES, f"az-join-{uuid.uuid4().hex[:6]}"))
    try:
        await kube.create(NODES, kubelet_node(joiner.name))
        everyone = base | {joiner.ipconfig_id}
        await world.until(
            lambda: shows(world, kube, ns, name, lambda v, s: serves(v, s, {8080: 8080}, everyone))
        )
        await delete_until_gone(kube, NODES, [joiner.name])
        await world.until(
            lambda: shows(world, kube, ns, name, lambda v, s: serves(v, s, {8080: 8080}, base))
        )
    finally:
        await delete_until_gone(kube, NODES, [joiner.name])
        await blocking(admin.delete_vm, joiner.vm_id)
    world.figures["node_joined_and_left_s"] = round(time.monotonic() - phase, 1)
    assert await ingress_ip(kube, ns, name) == found.frontend_ip

    # -- delete ------------------------------------------------------------------------------
    phase = time.monotonic()
    uid = svc["metadata"]["uid"]
    await delete_until_gone(kube, SERVICES, [name], ns)
    assert await blocking(view, world, uid) is None
    assert await blocking(world.network, "publicIPAddresses", found.public_ip) is None
    world.figures["service_deleted_s"] = round(time.monotonic() - phase, 1)
    assert await blocking(admin.faults) == [], "a fault was never met"


@dataclass
class Variant:
    """A Service of one kind, what its balancer must show, and a change."""

    annotations: dict[str, str]
    spec: dict[str, Any]
    check: Callable[[World, View, Obj], bool]
    internal: bool = False
    change: list[dict[str, Any]] | None = None
    after: Callable[[World, View, Obj], bool] | None = None


def _source_ranges(*cidrs: str) -> Callable[[World, View, Obj], bool]:
    """One allow rule for the port from exactly ``cidrs`` to the Service's address."""

    def check(world: World, found: View, svc: Obj) -> bool:
        allowed = [a for a in found.security if a.access == "Allow"]
        return (
            serves(found, svc, {443: 443}, base_members(world))
            and found.public_ip is not None
            and [a.sources for a in allowed] == [frozenset(cidrs)]
        )

    return check


def _internal(world: World, found: View, svc: Obj) -> bool:
    return (
        found.public_ip is None
        and in_subnet(found.frontend_ip, world.config["subnet_cidr"])
        and serves(found, svc, {443: 443}, base_members(world), allowed=False)
    )


def _local(world: World, found: View, svc: Obj) -> bool:
    hcnp = svc["spec"].get("healthCheckNodePort")
    (probe,) = found.probes.values() or [None]
    return (
        probe is not None
        and (probe.protocol.lower(), probe.port, probe.path) == ("http", hcnp, "/healthz")
        and serves(found, svc, {443: 443}, base_members(world))
    )


VARIANTS = [
    pytest.param(
        Variant(
            {},
            {"loadBalancerSourceRanges": ["10.1.0.0/16", "192.168.7.0/24"]},
            _source_ranges("10.1.0.0/16", "192.168.7.0/24"),
            change=[{"op": "replace", "path": RANGES, "value": ["10.1.0.0/16"]}],
            after=_source_ranges("10.1.0.0/16"),
        ),
        id="source-ranges-are-the-security-rule-sources",
    ),
    pytest.param(
        Variant({INTERNAL: "true"}, {}, _internal, internal=True),
        id="internal-publishes-a-subnet-address-no-public-ip",
    ),
    pytest.param(
        Variant({}, {"externalTrafficPolicy": "Local"}, _local),
        id="local-policy-probes-the-health-check-node-port",
    ),
]


@pytest.mark.parametrize("variant", VARIANTS)
async def test_load_balancer_service_variants(
    settled: World, kube: KubeApiClient, kube_namespace: str, variant: Variant
) -> None:
    world, ns, name = settled, kube_namespace, "variant"
    await kube.create(
        SERVICES, lb_service(name, 443, variant.annotations, **variant.spec), namespace=ns
    )
    try:
        for check, change in ((variant.check, variant.change), (variant.after, None)):
            if check is None:
                break
            await world.until(
                lambda check=check: shows(
                    world, kube, ns, name, lambda v, s: check(world, v, s), variant.internal
                )
            )
            if change:
                await kube.patch(SERVICES, name, change, patch_type=PatchType.JSON, namespace=ns)
    finally:
        await delete_until_gone(kube, SERVICES, [name], ns)


async def test_two_services_on_the_shared_balancer_changed_at_once(
    settled: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """Two Services on the one balancer ``kccm-az-e2e``; both ports changed in one go (a 412
    on the balancer's first write meanwhile): each keeps its frontend and address, neither
    overwrites the other's rules; deleting one leaves the other as it was."""
    world, admin, ns = settled, settled.admin, kube_namespace
    base = base_members(world)
    names = ("left", "right")

    async def serving(name: str, port: int) -> View | None:
        return await shows(world, kube, ns, name, lambda v, s: serves(v, s, {port: port}, base))

    for name in names:
        await kube.create(SERVICES, lb_service(name), namespace=ns)
    try:
        first = {name: await world.until(lambda name=name: serving(name, 80)) for name in names}
        await blocking(admin.fault, r"/loadBalancers/", method="PUT", kind="precondition")
        patches = [
            kube.patch(
                SERVICES,
                name,
                [{"op": "replace", "path": "/spec/ports/0/port", "value": 9000 + i}],
                patch_type=PatchType.JSON,
                namespace=ns,
            )
            for i, name in enumerate(names)
        ]
        await asyncio.gather(*patches)
        for i, name in enumerate(names):
            found = await world.until(lambda name=name, i=i: serving(name, 9000 + i))
            assert found.frontend_ip == first[name].frontend_ip
        await delete_until_gone(kube, SERVICES, [names[0]], ns)
        still = await world.until(lambda: serving(names[1], 9001))
        assert still.frontend_ip == first[names[1]].frontend_ip
        assert await blocking(admin.faults) == []
    finally:
        await delete_until_gone(kube, SERVICES, list(names), ns)


def _security_rules(world: World) -> dict[str, list[str]]:
    group = world.network("networkSecurityGroups", world.config["nsg"]) or {}
    found = {}
    for rule in (group.get("properties") or {}).get("securityRules") or ():
        props = rule["properties"]
        found[rule["name"]] = props.get("destinationAddressPrefixes") or [
            props["destinationAddressPrefix"]
        ]
    return found


async def test_a_stale_security_rule_destination_goes_at_the_next_sync(
    settled: World, kube: KubeApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    """A Service's managed rule also names an address no Service or Node has (what a Service
    deleted while kccm was down leaves), and a user's rule names it too: the daemon's next
    sync of the Service (an annotation change) drops it from the managed rule alone, as
    upstream's ``RetainSecurityGroup`` does (the daemon hands the provider its caches)."""
    world, ns, stale = settled, kube_namespace, "20.99.0.7"
    base = base_members(world)
    await kube.create(SERVICES, lb_service("keep"), namespace=ns)
    arm = await blocking(emulator_arm, world.emulator, tmp_path)
    path = world.rid("Microsoft.Network", "networkSecurityGroups", world.config["nsg"])
    try:
        found = await world.until(
            lambda: shows(world, kube, ns, "keep", lambda v, s: serves(v, s, {80: 80}, base))
        )
        ip = found.frontend_ip

        def tamper() -> str:
            group = arm.get(path)
            rules = group["properties"]["securityRules"]
            (managed,) = [r for r in rules if r["properties"].get("destinationAddressPrefix") == ip]
            managed["properties"].pop("destinationAddressPrefix", None)
            managed["properties"]["destinationAddressPrefixes"] = [ip, stale]
            rules.append(user_rule(stale))
            arm.put(path, group, if_match=group.get("etag"))
            return str(managed["name"])

        name = await blocking(tamper)
        poke = {"metadata": {"annotations": {"kccm.test/poke": "1"}}}
        await kube.patch(SERVICES, "keep", poke, namespace=ns)

        async def pruned() -> dict[str, list[str]] | None:
            rules = await blocking(_security_rules, world)
            return rules if rules[name] == [ip] else None

        rules = await world.until(pruned)
        assert rules[USER_RULE] == [stale]
    finally:
        await blocking(drop_user_rule, arm, path)
        await delete_until_gone(kube, SERVICES, ["keep"], ns)


# -- routes -----------------------------------------------------------------------------------


async def test_routes_follow_nodes_with_pod_cidrs(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """A Node with a podCIDR gets a route on the config's route table (next hop its private
    IP), through a 412 on the first table write; its deletion removes it. The base Nodes'
    routes stay."""
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"az-route-{uuid.uuid4().hex[:6]}")
    machine = await blocking(machine_of, world.emulator, await blocking(admin.add_vm, name))
    cidr = "10.244.9.0/24"
    base = {(f"10.244.{i}.0/24", m.ip) for i, m in enumerate(world.base)}
    await blocking(admin.fault, r"/routeTables/", method="PUT", kind="precondition")
    try:
        await kube.create(NODES, kubelet_node(name, cidr))
        await world.until(lambda: routes_are(world, base | {(cidr, machine.ip)}))
        await delete_until_gone(kube, NODES, [name])
        await world.until(lambda: routes_are(world, base))
        assert await blocking(admin.faults) == []
    finally:
        await delete_until_gone(kube, NODES, [name])
        await world.until(lambda: routes_are(world, base))
        await blocking(admin.delete_vm, machine.vm_id)
