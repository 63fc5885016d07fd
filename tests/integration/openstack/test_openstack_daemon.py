"""The kccm daemon with ``--cloud-provider=openstack`` on the real apiserver and the OpenStack
emulator (``kccm.emulators.openstack``), faults injected along the way.

One emulator and one daemon for the module (``--cluster-name=kccm-os-e2e``, routes on
``router1`` for the pod CIDRs in ``--cluster-cidr``), with two servers whose Nodes (podCIDRs
10.244.0.0/24 and 10.244.1.0/24) every test may use. Each test makes and removes its own
servers, Nodes and Services; the module leaves the emulator as it found it (``admin.state()``).

Faults (``admin.fault``): 503s from Nova and Octavia, latency on Nova and Octavia, 409
"immutable" storms on the listener create and delete and on the member batch update, a 503
on a router update, and every Keystone token expired mid-run (twice). Each fault must be met
(``admin.faults()`` empty afterwards). The daemon runs as the shipped ServiceAccount with the
shipped RBAC alone (``deploy/rbac.yaml``: the ``loadbalancer.openstack.org/load-balancer-id``
annotation goes through ``services/status``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
import pytest_asyncio
from openstack_daemon_support import (
    CLUSTER,
    INTERNAL,
    LB_ID,
    MONITOR,
    ROOT,
    SHUTDOWN,
    UNINITIALIZED,
    World,
    annotated,
    balancer_gone,
    balancer_where,
    blocking,
    fixed_ipv4,
    get_service,
    has_taint,
    ingress_ip,
    lb_service,
    node_gone,
    routes_are,
    serves,
    set_ready,
    shows,
    start_daemon,
)
from openstack_operator import BalancerView, Operator

from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP as SHARE_GROUP
from kccm.emulators.openstack.launcher import openstack_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import apply_rbac
from kccm.testing.daemonworld import module_world
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    """The emulator, the daemon (shipped ServiceAccount and RBAC) and two base Nodes with
    their routes; afterwards the Nodes go while the daemon runs (their routes with them), the
    daemon must stop cleanly, and the emulator must hold what it held before."""
    kube = KubeApiClient(load_cluster_config(str(control_plane.admin_kubeconfig)), qps=0, burst=0)
    with openstack_emulator(lb_active_delay=0.2) as emulator:
        baseline = emulator.admin.state()
        await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-openstack-e2e")
        daemons, daemon = start_daemon(emulator, control_plane, tmp_path_factory.mktemp("os-e2e"))
        env = World(emulator, daemon, baseline, ops=Operator(emulator))
        names: list[str] = []

        async def remove_base() -> None:
            for server in env.base.values():
                await blocking(emulator.admin.delete_server, server["id"])

        async with module_world(
            env,
            kube,
            daemons,
            nodes=names,
            routes_gone=lambda: routes_removed(env),
            remove_base=remove_base,
            label="openstack e2e",
        ):
            tag = uuid.uuid4().hex[:6]
            for i in range(2):
                server = await blocking(emulator.admin.add_server, f"os-base-{tag}-{i}")
                env.base[server["name"]] = server
                names.append(server["name"])
                await kube.create(NODES, kubelet_node(server["name"], f"10.244.{i}.0/24"))
            await env.until(lambda: initialised_nodes(kube, names))
            routes = {(f"10.244.{i}.0/24", fixed_ipv4(s)) for i, s in enumerate(env.base.values())}
            await env.until(lambda: routes_are(env, routes))
            # OCCM's CreateRoute writes the router first, the port's allowed_address_pairs after:
            # the steady state is taken once both are there (under load the pairs came later)
            cidrs = {cidr for cidr, _ in routes}
            await env.until(lambda: address_pairs_are(env, cidrs))
            env.steady = await env.quiet_state()
            yield env


async def address_pairs_are(env: World, cidrs: set[str]) -> bool:
    """The emulator's ports carry exactly these allowed address pairs ("<port>: <cidr>")."""
    pairs = (await blocking(env.admin.state))["allowed_address_pairs"]
    return {pair.rsplit(": ", 1)[-1] for pair in pairs} == cidrs


async def routes_removed(env: World) -> bool:
    """No route on the router and no allowed address pair on a port: DeleteRoute removes the
    router's route first and the pair after, and puts the route back when the port write
    fails (so the base servers are deleted only once both are gone)."""
    return await routes_are(env, set()) and await address_pairs_are(env, set())


@pytest.fixture
async def settled(world: World) -> AsyncIterator[World]:
    """The world, which the test must leave as the module fixture made it: no balancer,
    floating IP, route, port or server of its own left in the emulator, no fault pending."""
    yield world
    await world.back_to_steady()


# -- Nodes ----------------------------------------------------------------------------------


async def test_nodes_are_initialised_from_nova_through_faults(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """Two servers of different flavors and zones; Nova answers 503 twice and slowly, and
    every token expires after the first Node was read: both Nodes get providerID, addresses
    and labels, and lose the uninitialized taint."""
    world, admin = settled, settled.admin
    tag = uuid.uuid4().hex[:6]
    wanted = {
        f"os-init-{tag}-a": ("m1.small", "nova"),
        f"os-init-{tag}-b": ("m1.large", "az-2"),
    }
    servers = {}
    for name, (flavor, az) in wanted.items():
        servers[name] = await blocking(admin.add_server, name, flavor=flavor, az=az)
    since = await blocking(admin.last_seq)
    await blocking(admin.fault, "compute", "GET", r"/servers", 503, times=2)
    await blocking(admin.fault, "compute", "GET", r"/servers", kind="latency", latency=0.3, times=1)
    started = time.monotonic()
    try:
        first, second = list(wanted)
        await kube.create(NODES, kubelet_node(kube_cleanup.add(NODES, first)))
        await world.until(lambda: initialised_nodes(kube, [first]))
        expired = await blocking(admin.expire_tokens)
        await kube.create(NODES, kubelet_node(kube_cleanup.add(NODES, second)))
        nodes = await world.until(lambda: initialised_nodes(kube, list(wanted)))
        world.figures["nodes_initialised_through_faults_s"] = round(time.monotonic() - started, 1)
        for node in nodes:
            name = node["metadata"]["name"]
            server, (flavor, az) = servers[name], wanted[name]
            assert node["spec"]["providerID"] == f"openstack:///{server['id']}"
            addresses = {(a["type"], a["address"]) for a in node["status"]["addresses"]}
            assert ("InternalIP", fixed_ipv4(server)) in addresses
            labels = node["metadata"]["labels"]
            assert labels["node.kubernetes.io/instance-type"] == flavor
            assert labels["topology.kubernetes.io/zone"] == az
            assert labels["topology.kubernetes.io/region"] == "RegionOne"
            assert UNINITIALIZED not in {t["key"] for t in node["spec"].get("taints") or []}
        calls = await blocking(admin.requests, since)
        assert [c["status"] for c in calls if c["service"] == "compute"].count(503) == 2
        assert expired > 0
        assert any(c["status"] == 401 for c in calls), "no request met the expired token"
        assert await blocking(admin.faults) == []
    finally:
        await delete_until_gone(kube, NODES, list(wanted))
        for server in servers.values():
            await blocking(admin.delete_server, server["id"])


@dataclass
class Lifecycle:
    """A server and its Node; what happens to the server; what kccm then does."""

    provider_id: bool
    """Whether the Node is initialised by kccm (else: an untainted Node without providerID,
    as a kubelet without ``--cloud-provider=external`` registers it)."""
    act: str
    """``shutoff``, ``delete`` (the server)."""


LIFECYCLE = [
    pytest.param(Lifecycle(True, "shutoff"), id="server-shutoff-gets-the-shutdown-taint"),
    pytest.param(Lifecycle(True, "delete"), id="server-deleted-node-deleted"),
    pytest.param(
        Lifecycle(False, "delete"),
        id="no-providerid-server-gone-node-deleted-unlike-occm-3114",
    ),
]


@pytest.mark.parametrize("case", LIFECYCLE)
async def test_node_follows_its_server(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup, case: Lifecycle
) -> None:
    """The node lifecycle controller, once kubelet stops posting (Ready Unknown): a SHUTOFF
    server's Node gets the shutdown taint (and loses it when the server is ACTIVE and the
    Node Ready again); a deleted server's Node is deleted, also when the Node has no
    providerID (looked up by name: kccm's deliberate difference from OCCM, which leaves it,
    kubernetes/cloud-provider-openstack#3114)."""
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"os-life-{uuid.uuid4().hex[:6]}")
    server = await blocking(admin.add_server, name)
    gone = False
    try:
        if case.provider_id:
            await kube.create(NODES, kubelet_node(name))
            await world.until(lambda: initialised_nodes(kube, [name]))
        else:  # the server goes first: nothing can give this Node a providerID
            await blocking(admin.delete_server, server["id"])
            gone = True
            node = kubelet_node(name)
            node["spec"] = {}
            await kube.create(NODES, node)
        if case.act == "shutoff":
            await blocking(admin.set_server_status, server["id"], "SHUTOFF")
            await set_ready(kube, name, "Unknown")
            await world.until(lambda: has_taint(kube, name, SHUTDOWN, True))
            await blocking(admin.set_server_status, server["id"], "ACTIVE")
            await set_ready(kube, name, "True")
            await world.until(lambda: has_taint(kube, name, SHUTDOWN, False))
            return
        if not gone:
            await blocking(admin.delete_server, server["id"])
            gone = True
        await set_ready(kube, name, "Unknown")
        await world.until(lambda: node_gone(kube, name))
    finally:
        await delete_until_gone(kube, NODES, [name])
        if not gone:
            await blocking(admin.delete_server, server["id"])


# -- LoadBalancer Services ------------------------------------------------------------------


async def test_a_load_balancer_service_through_its_life(
    settled: World, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """Create (Octavia answers the first create 503, reads slowly), port change (a 409
    storm on the listener writes), a Node joins (tokens expired, a 409 storm on the member
    batch update) and leaves, delete: the balancer, its members and floating IP follow, the
    Service's status carries the floating IP and its annotation the balancer's id."""
    world, admin, ns, name = settled, settled.admin, kube_namespace, "web"
    base = {fixed_ipv4(s) for s in world.base.values()}
    await blocking(admin.fault, "load-balancer", "POST", r"/lbaas/loadbalancers$", 503)
    await blocking(
        admin.fault, "load-balancer", "GET", r"/lbaas/", kind="latency", latency=0.2, times=6
    )
    started = time.monotonic()

    # -- create ---------------------------------------------------------------------------
    await kube.create(SERVICES, lb_service(name), namespace=ns)
    svc = await get_service(kube, ns, name)
    node_port = svc["spec"]["ports"][0]["nodePort"]
    view = await world.until(
        lambda: balancer_where(
            world, ns, name, lambda v: bool(v.floating_ip) and serves(v, 80, node_port, base)
        )
    )
    assert await world.until(lambda: ingress_ip(kube, ns, name)) == view.floating_ip
    svc = await world.until(lambda: annotated(kube, ns, name))
    assert svc["metadata"]["annotations"][LB_ID] == view.id
    world.figures["service_created_s"] = round(time.monotonic() - started, 1)

    # -- port change, through a 409 storm ---------------------------------------------------
    phase = time.monotonic()
    for method in ("POST", "DELETE"):  # the new listener, the old one
        await blocking(
            admin.fault, "load-balancer", method, r"/lbaas/listeners", kind="conflict", times=2
        )
    port = [{"op": "replace", "path": "/spec/ports/0/port", "value": 8080}]
    await kube.patch(SERVICES, name, port, patch_type=PatchType.JSON, namespace=ns)
    await world.until(
        lambda: balancer_where(world, ns, name, lambda v: serves(v, 8080, node_port, base))
    )
    world.figures["port_changed_s"] = round(time.monotonic() - phase, 1)

    # -- a Node joins (tokens expired, a 409 storm on the members), then leaves -------------
    phase = time.monotonic()
    await blocking(admin.expire_tokens)
    await blocking(admin.fault, "load-balancer", "PUT", r"/members$", kind="conflict", times=2)
    joiner = await blocking(
        admin.add_server, kube_cleanup.add(NODES, f"os-join-{uuid.uuid4().hex[:6]}")
    )
    try:
        await kube.create(NODES, kubelet_node(joiner["name"]))
        everyone = base | {fixed_ipv4(joiner)}
        await world.until(
            lambda: balancer_where(world, ns, name, lambda v: serves(v, 8080, node_port, everyone))
        )
        await delete_until_gone(kube, NODES, [joiner["name"]])
        await world.until(
            lambda: balancer_where(world, ns, name, lambda v: serves(v, 8080, node_port, base))
        )
    finally:
        await delete_until_gone(kube, NODES, [joiner["name"]])
        await blocking(admin.delete_server, joiner["id"])
    world.figures["node_joined_and_left_s"] = round(time.monotonic() - phase, 1)
    assert await world.until(lambda: ingress_ip(kube, ns, name)) == view.floating_ip

    # -- delete ------------------------------------------------------------------------------
    phase = time.monotonic()
    await delete_until_gone(kube, SERVICES, [name], ns)
    await world.until(lambda: balancer_gone(world, ns, name))
    assert await blocking(world.ops.floating_ips, floating_ip_address=view.floating_ip) == []
    world.figures["service_deleted_s"] = round(time.monotonic() - phase, 1)
    assert await blocking(admin.faults) == [], "a fault was never met"


@dataclass
class Variant:
    """A Service of one kind, what the balancer and the status must show, and a change."""

    annotations: dict[str, str]
    spec: dict[str, Any]
    check: Callable[[BalancerView, Obj, str], bool]
    """(balancer, Service, ingress IP) -> as wanted."""
    change: list[dict[str, Any]] | None = None
    after: Callable[[BalancerView, Obj, str], bool] | None = None


def _source_ranges(*cidrs: str) -> Callable[[BalancerView, Obj, str], bool]:
    def check(view: BalancerView, svc: Obj, ip: str) -> bool:
        return (
            all(li.allowed_cidrs == frozenset(cidrs) for li in view.listeners.values())
            and ip == view.floating_ip
        )

    return check


def _internal(view: BalancerView, svc: Obj, ip: str) -> bool:
    return view.floating_ip is None and ip == view.vip_address


def _local_monitor(view: BalancerView, svc: Obj, ip: str) -> bool:
    hcnp = svc["spec"]["healthCheckNodePort"]
    (listener,) = view.listeners.values()
    return (
        listener.monitor == ("HTTP", "/healthz")
        and bool(listener.members)
        and all(m[2] == hcnp for m in listener.members)
        and ip == view.floating_ip
    )


VARIANTS = [
    pytest.param(
        Variant(
            {},
            {"loadBalancerSourceRanges": ["10.1.0.0/16", "192.168.7.0/24"]},
            _source_ranges("10.1.0.0/16", "192.168.7.0/24"),
            [{"op": "replace", "path": "/spec/loadBalancerSourceRanges", "value": ["10.1.0.0/16"]}],
            _source_ranges("10.1.0.0/16"),
        ),
        id="source-ranges-are-the-listeners-allowed-cidrs",
    ),
    pytest.param(
        Variant({INTERNAL: "true"}, {}, _internal), id="internal-publishes-the-vip-no-floating-ip"
    ),
    pytest.param(
        Variant({MONITOR: "true"}, {"externalTrafficPolicy": "Local"}, _local_monitor),
        id="local-policy-monitors-the-health-check-node-port",
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
            await world.until(lambda check=check: shows(world, kube, ns, name, check))
            if change:
                await kube.patch(SERVICES, name, change, patch_type=PatchType.JSON, namespace=ns)
    finally:
        await delete_until_gone(kube, SERVICES, [name], ns)
    await world.until(lambda: balancer_gone(world, ns, name))


async def _invalid_annotation_events(kube: KubeApiClient, ns: str, name: str) -> list[str]:
    events = await kube.list(EVENTS, namespace=ns)
    return sorted(
        str(e.get("message", ""))
        for e in events.items
        if e.get("reason") == "InvalidAnnotation"
        and e.get("type") == "Warning"
        and (e.get("involvedObject") or {}).get("name") == name
    )


async def test_a_value_occm_ignores_gives_its_default_and_a_warning(
    settled: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """``internal: "True"`` and ``enable-health-monitor: "yes"``: OCCM's
    ``getBoolFromServiceAnnotation`` reads neither and uses false; kccm makes the same
    external, unmonitored balancer and records one Warning per value on the Service."""
    world, ns, name = settled, kube_namespace, "occm-ignores"
    values = {INTERNAL: "True", MONITOR: "yes"}
    await kube.create(SERVICES, lb_service(name, 443, values), namespace=ns)

    def external(view: BalancerView, svc: Obj, ip: str) -> bool:
        (listener,) = view.listeners.values()
        return view.floating_ip is not None and ip == view.floating_ip and listener.monitor is None

    async def warned() -> list[str] | None:
        found = await _invalid_annotation_events(kube, ns, name)
        return found if all(any(key in m for m in found) for key in values) else None

    try:
        await world.until(lambda: shows(world, kube, ns, name, external))
        messages = await world.until(warned)
        assert any('"True"' in m and "using the default false" in m for m in messages)
    finally:
        await delete_until_gone(kube, SERVICES, [name], ns)
    await world.until(lambda: balancer_gone(world, ns, name))


async def _group_where(
    world: World, name: str, check: Callable[[BalancerView], bool]
) -> BalancerView | None:
    view = await blocking(world.ops.view, name)
    ok = view is not None and view.provisioning_status == "ACTIVE" and check(view)
    return view if ok else None


async def _group_gone(world: World, name: str) -> bool:
    return await blocking(world.ops.view, name) is None


async def test_a_share_group_is_one_balancer_and_the_last_service_leaves_nothing(
    settled: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """Two Services of share group ``shop`` (ports 80 and 443): one Octavia balancer
    ``kube_service_<cluster>_<ns>_shop.share`` with both listeners, each tagged with its own
    Service's name, one floating IP in both Services' status and no balancer of their own;
    one leaving the group (annotation removed) gets a balancer of its own and leaves the
    other's listener and the address; deleting the last leaves no balancer, listener, pool
    or floating IP (the ``settled`` fixture checks the rest)."""
    world, ns = settled, kube_namespace
    group, name = {SHARE_GROUP: "shop"}, f"kube_service_{CLUSTER}_{ns}_shop.share"
    members = {"web": 80, "api": 443}
    for member, port in members.items():
        await kube.create(SERVICES, lb_service(member, port, group), namespace=ns)
    try:
        view = await world.until(
            lambda: _group_where(world, name, lambda v: set(v.listeners) == {80, 443})
        )
        for member in members:
            ip = await world.until(partial(ingress_ip, kube, ns, member))
            assert ip == view.floating_ip
            assert await world.view(ns, member) is None, f"{member} got a balancer of its own"
        listeners = await blocking(world.ops.listeners, view.id)
        owners = {li["protocol_port"]: li["tags"] for li in listeners}
        assert owners == {port: [world.balancer_name(ns, m)] for m, port in members.items()}
        # web leaves the group (annotation removed): a balancer of its own, its listener
        # off the group's; then it is deleted
        key = "/metadata/annotations/" + SHARE_GROUP.replace("/", "~1")
        leave = [{"op": "remove", "path": key}]
        await kube.patch(SERVICES, "web", leave, patch_type=PatchType.JSON, namespace=ns)
        api_only = {world.balancer_name(ns, "api")}
        left = await world.until(
            lambda: _group_where(
                world, name, lambda v: set(v.listeners) == {443} and v.tags == api_only
            )
        )
        assert left.floating_ip == view.floating_ip

        def own(view: BalancerView, svc: Obj, ip: str) -> bool:
            return set(view.listeners) == {80} and ip == view.floating_ip != left.floating_ip

        await world.until(lambda: shows(world, kube, ns, "web", own))
        await delete_until_gone(kube, SERVICES, ["web"], ns)
        await world.until(lambda: balancer_gone(world, ns, "web"))
    finally:
        await delete_until_gone(kube, SERVICES, list(members), ns)
    await world.until(lambda: _group_gone(world, name))
    assert await blocking(world.ops.floating_ips, floating_ip_address=view.floating_ip) == []


# -- routes ---------------------------------------------------------------------------------


async def routed_with_pairs(
    world: World, routes: set[tuple[str, str]], server_id: str, pairs: set[str]
) -> bool:
    """The router's routes are ``routes`` and the server's ports allow exactly ``pairs``
    (the route goes first, the port follows: two writes)."""
    if not await routes_are(world, routes):
        return False
    return await blocking(world.ops.port_pairs, server_id) == pairs


async def test_routes_follow_nodes_with_pod_cidrs(
    settled: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """A Node with a podCIDR gets a route on router1 (next hop its fixed IP) and the CIDR in
    its port's ``allowed_address_pairs``, through a 503 on the first router write; its
    deletion removes both. The base Nodes' routes stay."""
    world, admin = settled, settled.admin
    name = kube_cleanup.add(NODES, f"os-route-{uuid.uuid4().hex[:6]}")
    server = await blocking(admin.add_server, name)
    cidr = "10.244.9.0/24"
    base = {(f"10.244.{i}.0/24", fixed_ipv4(s)) for i, s in enumerate(world.base.values())}
    await blocking(admin.fault, "network", "PUT", r"/routers/", 503)
    try:
        await kube.create(NODES, kubelet_node(name, cidr))
        routed = base | {(cidr, fixed_ipv4(server))}
        await world.until(lambda: routed_with_pairs(world, routed, server["id"], {cidr}))
        await delete_until_gone(kube, NODES, [name])
        await world.until(lambda: routed_with_pairs(world, base, server["id"], set()))
        assert await blocking(admin.faults) == []
    finally:
        await delete_until_gone(kube, NODES, [name])
        await world.until(lambda: routes_are(world, base))
        await blocking(admin.delete_server, server["id"])
