"""Upstream's openstack-cloud-controller-manager v1.36.0 against kccm's OpenStack emulator and the
real apiserver: the third of the emulator's honesty checks (issue 26).

OCCM (built from Go modules by ``make occm``) runs its cloud-node, cloud-node-lifecycle,
service and route controllers with the emulator's own cloud.conf. A Node registered as kubelet
``--cloud-provider=external`` registers it (the uninitialized taint, named after a seeded
server) is initialised: ``openstack:///<server uuid>``, the server's addresses, the flavor,
zone and region labels (``pkg/openstack/instances.go``, ``InstanceMetadata``). A LoadBalancer
Service gets an Octavia balancer named ``kube_service_kubernetes_<ns>_<name>`` and a floating
IP from the public network in its status (``pkg/openstack/loadbalancer.go``,
``ensureOctaviaLoadBalancer``, ``ensureFloatingIP``). The Node's pod CIDR is routed through its
address on ``router1`` (``pkg/openstack/routes.go``, ``CreateRoute``, ``extraroute-atomic``).
Deleting the Service, then the Node, leaves nothing in the emulator.

Whatever OCCM needs that the emulator does not give fails here: OCCM logs the request it
could not complete, and the test's output shows OCCM's warnings and errors.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from occm_support import (
    CLUSTER_NAME,
    CloudReader,
    Occm,
    OccmProcesses,
    error_answers,
    occm_processes,
    require_occm,
    routes_made,
)

from kccm.emulators.openstack.launcher import Emulator, openstack_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import UNINITIALIZED_TAINT, kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 120.0
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
POD_CIDR = "10.244.7.0/24"
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
"""The shared :func:`kccm.testing.controllers.eventually`, bounded for another process's pace."""


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """The emulator (HTTPS with its throw-away CA as ``[Global] ca-file`` when the indirect
    parameter is true)."""
    require_occm()  # skip (or fail under KCCM_REQUIRE_CONTROL_PLANE=1) before starting anything
    with openstack_emulator(
        tls=emulator_tls() if getattr(request, "param", False) else None
    ) as emu:
        yield emu


OVER_HTTPS = pytest.mark.parametrize(
    "emulator", [False, True], ids=["http", "https"], indirect=True
)
"""Run a test against the emulator over HTTP and over HTTPS (Go's TLS client, the CA file)."""


@pytest.fixture
def occms(tmp_path: Path) -> Iterator[OccmProcesses]:
    yield from occm_processes(tmp_path)


@pytest.fixture
async def world(
    emulator: Emulator,
    occms: OccmProcesses,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    request: pytest.FixtureRequest,
) -> AsyncIterator[World]:
    """A seeded server, its Node (registered uninitialised, with a pod CIDR) and OCCM running
    against both, once OCCM has initialised the Node and routed its pod CIDR; an indirect
    parameter is merged into the emulator's cloud.conf. The Node is deleted while OCCM still
    runs; then no request OCCM made may have had an error answer."""
    baseline = emulator.admin.state()
    name = kube_cleanup.add(NODES, unique_name("occm-node"))
    server = emulator.admin.add_server(name)
    await kube.create(NODES, kubelet_node(name, POD_CIDR))
    conf = emulator.cloud_conf(getattr(request, "param", None))
    occm = occms.start(conf, control_plane.admin_kubeconfig)
    node = (await eventually(lambda: _initialised(occm, kube, name)))[0]
    reader = CloudReader.of(emulator)
    router_id = emulator.config["router_id"]
    await eventually(lambda: asyncio.to_thread(routes_made, reader, router_id, [POD_CIDR]))
    world = World(emulator, occm, reader, server, node, baseline, emulator.admin.state())
    yield world
    await delete_until_gone(kube, NODES, [name], within=BUDGET)
    requests = emulator.admin.requests()
    assert error_answers([r for r in requests if r["seq"] not in world.expected_errors]) == []


@dataclass
class World:
    emulator: Emulator
    occm: Occm
    reader: CloudReader
    server: dict[str, Any]
    node: Obj
    baseline: dict[str, list[Any]]
    """The emulator before the server was seeded."""
    ready: dict[str, list[Any]]
    """The emulator once OCCM initialised the Node and routed its pod CIDR."""
    expected_errors: set[int] = field(default_factory=set)
    """Sequence numbers of the emulator's requests a test made fail on purpose."""

    @property
    def router_id(self) -> str:
        return str(self.emulator.config["router_id"])


async def _initialised(occm: Occm, kube: KubeApiClient, name: str) -> list[Obj] | None:
    occm.alive()
    return await initialised_nodes(kube, [name])


async def _routes_to(reader: CloudReader, router_id: str, cidr: str) -> list[dict[str, str]]:
    router = await asyncio.to_thread(reader.router, router_id)
    return [r for r in router["routes"] if r["destination"] == cidr]


def _addresses(node: Obj) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for address in node["status"]["addresses"]:
        found.setdefault(address["type"], set()).add(address["address"])
    return found


def _server_ips(server: dict[str, Any], network: str = "private") -> set[str]:
    return {a["addr"] for a in server["addresses"][network]}


@OVER_HTTPS
async def test_occm_initialises_the_node_of_a_seeded_server(world: World) -> None:
    node, server = world.node, world.server
    assert node["spec"]["providerID"] == f"openstack:///{server['id']}"
    assert UNINITIALIZED_TAINT["key"] not in {t["key"] for t in node["spec"].get("taints") or []}
    addresses = _addresses(node)
    assert addresses["InternalIP"] == _server_ips(server)
    assert addresses["Hostname"] == {node["metadata"]["name"]}
    labels = node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "m1.small"
    assert labels["topology.kubernetes.io/zone"] == "nova"
    assert labels["topology.kubernetes.io/region"] == "RegionOne"


async def test_occm_routes_the_pod_cidr_on_router1_and_removes_the_route(
    world: World, kube: KubeApiClient
) -> None:
    """``CreateRoute`` (extraroute-atomic): the route via the Node's IPv4 address and the pod
    CIDR in that port's ``allowed_address_pairs``. Once the Node is gone, its route is a
    blackhole and ``DeleteRoute`` removes it but returns before the address pair: OCCM leaves
    the pair on the port (``routes.go``: "If this was a blackhole route we are done")."""
    (internal,) = {a for a in _addresses(world.node)["InternalIP"] if ":" not in a}
    routes = await _routes_to(world.reader, world.router_id, POD_CIDR)
    assert routes == [{"destination": POD_CIDR, "nexthop": internal}]
    (port,) = await asyncio.to_thread(world.reader.ports, device_id=world.server["id"])
    assert {"ip_address": POD_CIDR} in [
        {"ip_address": p["ip_address"]} for p in port["allowed_address_pairs"]
    ]

    await delete_until_gone(kube, NODES, [world.node["metadata"]["name"]], within=BUDGET)

    async def route_gone() -> bool:
        world.occm.alive()
        return not await _routes_to(world.reader, world.router_id, POD_CIDR)

    await eventually(route_gone)
    admin = world.emulator.admin
    left = admin.state()
    assert left["allowed_address_pairs"] == [f"{port['id']}: {POD_CIDR}"]  # OCCM's, see above
    admin.delete_server(world.server["id"])
    admin.assert_clean(world.baseline)


def _port(name: str, port: int, protocol: str = "TCP") -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": protocol}


def lb_service(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            **spec,
        },
    }


async def _published(kube: KubeApiClient, ns: str, name: str, occm: Occm) -> Obj | None:
    occm.alive()
    svc = await kube.get(SERVICES, name, namespace=ns)
    ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return svc if ingress and ingress[0].get("ip") else None


@OVER_HTTPS
async def test_occm_balances_a_service_with_a_floating_ip_and_deletes_it(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    ns, reader = kube_namespace, world.reader
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web", world.occm))

    name = f"kube_service_{CLUSTER_NAME}_{ns}_web"
    (lb,) = await asyncio.to_thread(reader.load_balancers, name)
    assert lb["provisioning_status"] == "ACTIVE"
    assert svc["metadata"]["annotations"][LB_ID] == lb["id"]
    ip = svc["status"]["loadBalancer"]["ingress"][0]["ip"]
    (fip,) = await asyncio.to_thread(reader.floating_ips, port_id=lb["vip_port_id"])
    assert fip["floating_ip_address"] == ip
    assert fip["floating_network_id"] == world.emulator.config["public_network_id"]
    (pool,) = await asyncio.to_thread(reader.pools, lb["id"])
    (member,) = await asyncio.to_thread(reader.members, pool["id"])
    assert member["address"] in _addresses(world.node)["InternalIP"]
    assert member["protocol_port"] == svc["spec"]["ports"][0]["nodePort"]

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


# -- Service variants: what OCCM asks of Octavia and Neutron beyond a plain balancer ----------

Checker = Callable[[World, Obj, dict[str, Any]], None]
"""Asserts on (world, published Service, the balancer as the demo user reads it); blocking."""


def _listeners(world: World, lb: dict[str, Any]) -> list[dict[str, Any]]:
    found = world.reader.get(f"/load-balancer/v2/lbaas/listeners?loadbalancer_id={lb['id']}")
    return sorted(found["listeners"], key=lambda x: x["protocol_port"])


def _pool_of(world: World, listener: dict[str, Any]) -> dict[str, Any]:
    found = world.reader.get(f"/load-balancer/v2/lbaas/pools/{listener['default_pool_id']}")
    return dict(found["pool"])


def _fip_ip(world: World, lb: dict[str, Any]) -> str | None:
    fips = world.reader.floating_ips(port_id=lb["vip_port_id"])
    return fips[0]["floating_ip_address"] if fips else None


def two_ports(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    listeners = _listeners(world, lb)
    assert [(x["protocol"], x["protocol_port"]) for x in listeners] == [("TCP", 80), ("TCP", 443)]
    node_ports = sorted(p["nodePort"] for p in svc["spec"]["ports"])
    members = [world.reader.members(_pool_of(world, x)["id"]) for x in listeners]
    assert sorted(m[0]["protocol_port"] for m in members) == node_ports


def udp(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    (listener,) = _listeners(world, lb)
    assert (listener["protocol"], _pool_of(world, listener)["protocol"]) == ("UDP", "UDP")


def source_ranges(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    (listener,) = _listeners(world, lb)
    assert listener["allowed_cidrs"] == ["10.1.0.0/16"]


def local_policy(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    """``buildMonitorCreateOpts``: an HTTP monitor of /healthz, the members watched on the
    healthCheckNodePort (``buildBatchUpdateMemberOpts``)."""
    pool = _pool_of(world, _listeners(world, lb)[0])
    monitor = world.reader.get(f"/load-balancer/v2/lbaas/healthmonitors/{pool['healthmonitor_id']}")
    hm = monitor["healthmonitor"]
    assert (hm["type"], hm["url_path"], hm["http_method"]) == ("HTTP", "/healthz", "GET")
    (member,) = world.reader.members(pool["id"])
    assert member["monitor_port"] == svc["spec"]["healthCheckNodePort"]


def ovn_local_policy(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    """``lb-provider = ovn``: SOURCE_IP_PORT pools, and no HTTP monitor (``canUseHTTPMonitor``):
    a TCP one on the node port."""
    assert lb["provider"] == "ovn"
    pool = _pool_of(world, _listeners(world, lb)[0])
    assert pool["lb_algorithm"] == "SOURCE_IP_PORT"
    monitor = world.reader.get(f"/load-balancer/v2/lbaas/healthmonitors/{pool['healthmonitor_id']}")
    assert monitor["healthmonitor"]["type"] == "TCP"
    (member,) = world.reader.members(pool["id"])
    assert member["monitor_port"] is None


def internal(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    assert svc["status"]["loadBalancer"]["ingress"][0]["ip"] == lb["vip_address"]
    assert _fip_ip(world, lb) is None


def proxy_protocol(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    assert _pool_of(world, _listeners(world, lb)[0])["protocol"] == "PROXY"


def security_groups(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    """``ensureSecurityGroup`` (loadbalancer_sg.go): ``lb-sg-<Service uid>-<ns>-<name>``
    (``getSecurityGroupName``) allowing the node port, on the Node's port."""
    meta = svc["metadata"]
    name = f"lb-sg-{meta['uid']}-{meta['namespace']}-{meta['name']}"
    (group,) = world.reader.get(f"/network/v2.0/security-groups?name={name}")["security_groups"]
    node_port = svc["spec"]["ports"][0]["nodePort"]
    ranges = {
        (r["port_range_min"], r["port_range_max"])
        for r in group["security_group_rules"]
        if r["direction"] == "ingress"
    }
    assert (node_port, node_port) in ranges
    (port,) = world.reader.ports(device_id=world.server["id"])
    assert group["id"] in port["security_groups"]


def serial_calls(world: World, svc: Obj, lb: dict[str, Any]) -> None:
    (listener,) = _listeners(world, lb)
    (member,) = world.reader.members(_pool_of(world, listener)["id"])
    assert member["protocol_port"] == svc["spec"]["ports"][0]["nodePort"]


ANNOTATION = "loadbalancer.openstack.org/"
VARIANTS = [
    pytest.param(
        None,
        {"ports": [_port("http", 80), _port("https", 443)]},
        {},
        two_ports,
        id="two-ports",
    ),
    pytest.param(None, {"ports": [_port("dns", 53, "UDP")]}, {}, udp, id="udp"),
    pytest.param(
        None, {"loadBalancerSourceRanges": ["10.1.0.0/16"]}, {}, source_ranges, id="source-ranges"
    ),
    pytest.param(
        None,
        {"externalTrafficPolicy": "Local"},
        {f"{ANNOTATION}enable-health-monitor": "true"},
        local_policy,
        id="local-policy-monitor",
    ),
    pytest.param(
        {"LoadBalancer": {"lb-provider": "ovn", "lb-method": "SOURCE_IP_PORT"}},
        {"externalTrafficPolicy": "Local"},
        {f"{ANNOTATION}enable-health-monitor": "true"},
        ovn_local_policy,
        id="ovn-local-policy-monitor",
    ),
    pytest.param(
        None,
        {},
        {"service.beta.kubernetes.io/openstack-internal-load-balancer": "true"},
        internal,
        id="internal",
    ),
    pytest.param(None, {}, {f"{ANNOTATION}proxy-protocol": "true"}, proxy_protocol, id="proxy"),
    pytest.param(
        {"LoadBalancer": {"manage-security-groups": "true"}},
        {},
        {},
        security_groups,
        id="manage-security-groups",
    ),
    pytest.param(
        {"LoadBalancer": {"provider-requires-serial-api-calls": "true"}},
        {},
        {},
        serial_calls,
        id="serial-api-calls",
    ),
]


@pytest.mark.parametrize(("world", "spec", "annotations", "check"), VARIANTS, indirect=["world"])
async def test_occm_balances_service_variants_and_deletes_them(
    world: World,
    kube: KubeApiClient,
    kube_namespace: str,
    spec: dict[str, Any],
    annotations: dict[str, str],
    check: Checker,
) -> None:
    ns = kube_namespace
    body = lb_service("web", **spec)
    body["metadata"]["annotations"] = annotations
    await kube.create(SERVICES, body, namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web", world.occm))
    name = f"kube_service_{CLUSTER_NAME}_{ns}_web"
    (lb,) = await asyncio.to_thread(world.reader.load_balancers, name)
    assert svc["metadata"]["annotations"][LB_ID] == lb["id"]
    await asyncio.to_thread(check, world, svc, lb)

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)


async def _listener_ports(world: World, lb_id: str) -> list[int]:
    listeners = await asyncio.to_thread(_listeners, world, {"id": lb_id})
    return [x["protocol_port"] for x in listeners]


async def _member_addresses(world: World, lb_id: str, occm: Occm) -> set[str]:
    occm.alive()
    (pool,) = await asyncio.to_thread(world.reader.pools, lb_id)
    return {m["address"] for m in await asyncio.to_thread(world.reader.members, pool["id"])}


async def test_occm_follows_a_port_change_and_nodes_joining_and_leaving(
    world: World, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """``updateOctaviaLoadBalancer``/``ensureOctaviaListener``: a changed port is a new
    listener (the old one deleted); a Node joining or leaving is one batch member update
    (``PUT pools/{id}/members``)."""
    ns, admin = kube_namespace, world.emulator.admin
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    svc = await eventually(lambda: _published(kube, ns, "web", world.occm))
    lb_id = svc["metadata"]["annotations"][LB_ID]
    (first,) = {a for a in _addresses(world.node)["InternalIP"] if ":" not in a}

    svc["spec"]["ports"][0]["port"] = 8080
    await kube.replace(SERVICES, svc)

    async def moved() -> bool:
        world.occm.alive()
        return await _listener_ports(world, lb_id) == [8080]

    await eventually(moved)

    # A Node joins the balancer once initialised: registered excluded from balancers, the
    # label removed once OCCM gave it its addresses. (A Node that joins at once may miss them:
    # the service controller syncs backends on a providerID change, and the addresses come
    # with a later status update; only the periodic sync would add it then.)
    name = kube_cleanup.add(NODES, unique_name("occm-join"))
    server = admin.add_server(name)
    mark = admin.last_seq()
    registered = kubelet_node(name)
    registered["metadata"]["labels"][EXCLUDE] = "true"
    await kube.create(NODES, registered)
    (joined,) = await eventually(lambda: _initialised(world.occm, kube, name))
    (second,) = {a for a in _addresses(joined)["InternalIP"] if ":" not in a}
    await kube.patch(NODES, name, {"metadata": {"labels": {EXCLUDE: None}}})

    async def members_are(wanted: set[str]) -> bool:
        return await _member_addresses(world, lb_id, world.occm) == wanted

    await eventually(lambda: members_are({first, second}))
    await delete_until_gone(kube, NODES, [name], within=BUDGET)
    await eventually(lambda: members_are({first}))
    writes = {(r["method"], r["path"].rsplit("/", 1)[-1]) for r in admin.mutating(mark)}
    assert writes == {("PUT", "members")}, admin.mutating(mark)

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    admin.delete_server(server["id"])
    admin.assert_clean(world.ready)


async def test_occm_renews_an_expired_token(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """Keystone's 401 for an expired token makes gophercloud authenticate again and repeat
    the request (``ProviderClient.Reauthenticate``): the emulator's expiry must look like
    Keystone's for that."""
    ns, admin = kube_namespace, world.emulator.admin
    mark = admin.last_seq()
    assert admin.expire_tokens() >= 1
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    await eventually(lambda: _published(kube, ns, "web", world.occm))
    requests = admin.requests(mark)
    refused = [r for r in requests if r["status"] == 401]
    assert refused
    world.expected_errors |= {r["seq"] for r in refused}
    renewed = [
        r
        for r in requests
        if r["path"].endswith("/auth/tokens") and r["method"] == "POST" and r["status"] == 201
    ]
    assert renewed
    assert renewed[0]["seq"] > refused[0]["seq"]

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    admin.assert_clean(world.ready)


async def test_occm_shares_a_balancer_between_services(
    world: World, kube: KubeApiClient, kube_namespace: str
) -> None:
    """``loadbalancer.openstack.org/load-balancer-id`` on a second Service: its listener on
    the owner's balancer, its name among the balancer's tags, the owner's floating IP; when
    it goes, its listener and tag go (``ensureLoadBalancerDeleted``: a tags PUT) and the
    owner's balancer stays."""
    ns, reader = kube_namespace, world.reader
    await kube.create(SERVICES, lb_service("web"), namespace=ns)
    owner = await eventually(lambda: _published(kube, ns, "web", world.occm))
    lb_id = owner["metadata"]["annotations"][LB_ID]
    extra = lb_service("extra", ports=[_port("alt", 8080)])
    extra["metadata"]["annotations"] = {LB_ID: lb_id}
    await kube.create(SERVICES, extra, namespace=ns)
    shared = await eventually(lambda: _published(kube, ns, "extra", world.occm))
    ip = owner["status"]["loadBalancer"]["ingress"][0]["ip"]
    assert shared["status"]["loadBalancer"]["ingress"][0]["ip"] == ip
    names = [f"kube_service_{CLUSTER_NAME}_{ns}_{n}" for n in ("web", "extra")]

    async def shared_as(tags: list[str], ports: list[int]) -> bool:
        world.occm.alive()
        lb = await asyncio.to_thread(reader.get, f"/load-balancer/v2/lbaas/loadbalancers/{lb_id}")
        found = sorted(lb["loadbalancer"]["tags"])
        return found == sorted(tags) and await _listener_ports(world, lb_id) == ports

    await eventually(lambda: shared_as(names, [80, 8080]))
    await delete_until_gone(kube, SERVICES, ["extra"], ns, within=BUDGET)
    await eventually(lambda: shared_as(names[:1], [80]))

    await delete_until_gone(kube, SERVICES, ["web"], ns, within=BUDGET)
    world.emulator.admin.assert_clean(world.ready)
