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
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
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
)

from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.controllers import delete_until_gone, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import UNINITIALIZED_TAINT, kubelet_node
from kccm.testing.openstack.launcher import Emulator, openstack_emulator
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

BUDGET = 120.0
LB_ID = "loadbalancer.openstack.org/load-balancer-id"
POD_CIDR = "10.244.7.0/24"
eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
"""The shared :func:`kccm.testing.controllers.eventually`, bounded for another process's pace."""


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    require_occm()  # skip (or fail under KCCM_REQUIRE_CONTROL_PLANE=1) before starting anything
    with openstack_emulator() as emu:
        yield emu


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
) -> AsyncIterator[World]:
    """A seeded server, its Node (registered uninitialised, with a pod CIDR) and OCCM running
    against both, once OCCM has initialised the Node and routed its pod CIDR. The Node is
    deleted while OCCM still runs."""
    baseline = emulator.admin.state()
    name = kube_cleanup.add(NODES, unique_name("occm-node"))
    server = emulator.admin.add_server(name)
    await kube.create(NODES, kubelet_node(name, POD_CIDR))
    occm = occms.start(emulator.cloud_conf(), control_plane.admin_kubeconfig)
    node = (await eventually(lambda: _initialised(occm, kube, name)))[0]
    reader = CloudReader(emulator.base_url)
    router_id = emulator.config["router_id"]
    await eventually(lambda: _routes_to(reader, router_id, POD_CIDR))
    yield World(emulator, occm, reader, server, node, baseline, emulator.admin.state())
    await delete_until_gone(kube, NODES, [name], within=BUDGET)
    assert error_answers(emulator.admin.requests()) == []


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
