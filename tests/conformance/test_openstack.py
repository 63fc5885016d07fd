"""The openstack provider passes the conformance kit against the OpenStack emulator
(``kccm.emulators.openstack``: Keystone, Nova, Neutron and Octavia as a real HTTP server).

One emulator per module with three servers on the ``private`` network; the Nodes are those
servers as kubelet and kccm make them. The tamper changes and deletes balancers through the
Octavia and Neutron APIs as an operator would (``openstack loadbalancer listener delete``,
``... member delete``, ``openstack floating ip unset --port``, ``openstack loadbalancer
delete --cascade``), never through the provider. The module leaves the emulator as it found it.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import Interface, Node, Service
from kccm.emulators.openstack.launcher import Emulator, openstack_emulator
from kccm.providers.openstack import OpenStackCloud, new_openstack_cloud
from kccm.providers.openstack.loadbalancer.names import load_balancer_name
from kccm.testing.conformance import CloudProviderConformance, make_service
from kccm.testing.modules import load_module

operator = load_module(
    "openstack_operator",
    Path(__file__).resolve().parents[1] / "integration" / "openstack" / "openstack_operator.py",
)

SERVERS = 3


@dataclass
class World:
    """The module's emulator, its servers and the floating IPs the tamper detached (an
    operator's from then on: provider-made, but on no port, so no balancer claims them)."""

    emulator: Emulator
    servers: list[dict[str, Any]]
    ops: Any = None
    detached: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ops = operator.Operator(self.emulator)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with openstack_emulator() as emulator:
        baseline = emulator.admin.state()
        tag = uuid.uuid4().hex[:6]
        servers = [emulator.admin.add_server(f"conf-{tag}-{i}") for i in range(SERVERS)]
        made = World(emulator, servers)
        yield made
        for fip_id in made.detached:
            made.ops.delete_floating_ip(fip_id)
        for server in servers:
            emulator.admin.delete_server(server["id"])
        emulator.admin.assert_clean(baseline)


def node_of(server: dict[str, Any]) -> Node:
    """The Node of an emulator server: providerID ``openstack:///<uuid>``, its fixed IPv4 as
    InternalIP."""
    fixed = [
        a["addr"]
        for addresses in server["addresses"].values()
        for a in addresses
        if a["version"] == 4 and a.get("OS-EXT-IPS:type", "fixed") == "fixed"
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": server["name"], "uid": str(uuid.uuid4()), "labels": {}},
        "spec": {"providerID": f"openstack:///{server['id']}"},
        "status": {"addresses": [{"type": "InternalIP", "address": fixed[0]}]},
    }


def _addresses(nodes: Sequence[Node]) -> set[str]:
    return {
        a["address"] for n in nodes for a in n["status"]["addresses"] if a["type"] == "InternalIP"
    }


@dataclass
class OctaviaTamper:
    """The kit's ``LoadBalancerTamper``: an operator at the Octavia and Neutron APIs."""

    world: World
    damage: tuple[str, ...] = ("listener", "members", "floating-ip")
    """What :meth:`change` does: drop the first listener, remove the members of every pool,
    disassociate the floating IP (a subset for the single-drift cases below)."""

    def _lb(self, cluster_name: str, service: Service) -> dict[str, Any]:
        lb = self.world.ops.load_balancer(load_balancer_name(cluster_name, service))
        assert lb is not None, f"no balancer for {service['metadata']['name']}"
        return dict(lb)

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        ops, lb = self.world.ops, self._lb(cluster_name, service)
        ops.wait_active(lb["id"])
        listeners = sorted(ops.listeners(lb["id"]), key=lambda li: li["protocol_port"])
        if "listener" in self.damage:
            ops.delete_listener(lb["id"], listeners[0]["id"])
        if "members" in self.damage:
            for listener in listeners:
                ops.remove_members(lb["id"], listener["default_pool_id"])
        if "floating-ip" in self.damage:
            fip = ops.floating_ip_on(lb["vip_port_id"])
            assert fip is not None
            ops.disassociate(fip["id"])
            self.world.detached.append(fip["id"])

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        """The floating IP is released first (``openstack floating ip delete``), as
        ``--cascade`` leaves it; then the balancer with everything in it."""
        ops, lb = self.world.ops, self._lb(cluster_name, service)
        fip = ops.floating_ip_on(lb["vip_port_id"])
        if fip is not None:
            ops.delete_floating_ip(fip["id"])
        ops.wait_active(lb["id"])
        ops.cascade_delete(lb["id"])

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        """A listener per Service port (and no other), each pool's members exactly the
        nodes' addresses on the port's nodePort, a floating IP on the VIP port."""
        view = self.world.ops.view(load_balancer_name(cluster_name, service))
        if view is None or view.floating_ip is None:
            return False
        ports = {p["port"]: p["nodePort"] for p in service["spec"]["ports"]}
        if set(view.listeners) != set(ports):
            return False
        return all(
            {(address, port) for address, port, _ in listener.members}
            == {(address, ports[number]) for address in _addresses(nodes)}
            for number, listener in view.listeners.items()
        )


class TestOpenStackCloud(CloudProviderConformance):
    max_load_balancer_name_length = 255
    """OCCM's ``kube_service_<cluster>_<namespace>_<name>``, cut to 255 (``Sprintf255``)."""
    describes_draining = False
    """Octavia's status tree has no member weight: the weights are checked below instead."""

    @pytest.fixture
    def cloud(self, world: World) -> OpenStackCloud:
        return new_openstack_cloud(io.StringIO(world.emulator.cloud_conf()))

    @pytest.fixture
    def lb_nodes(self, world: World) -> list[Node]:
        return [node_of(s) for s in world.servers]

    @pytest.fixture
    def known_node(self, world: World) -> Node:
        return node_of(world.servers[0])

    @pytest.fixture
    def unknown_provider_id(self) -> str:
        """Well-formed (a server UUID) and naming no server."""
        return f"openstack:///{uuid.uuid4()}"

    @pytest.fixture
    def load_balancer_tamper(self, world: World) -> OctaviaTamper:
        return OctaviaTamper(world)

    @pytest.mark.parametrize(
        ("name", "namespace"),
        [
            pytest.param("web", "default", id="short-name"),
            pytest.param("s" * 63, "n" * 63, id="longest-service-and-namespace"),
        ],
    )
    async def test_load_balancer_name_is_stable_unique_and_short(
        self, cloud: Interface, call: Any, name: str, namespace: str
    ) -> None:
        """Deliberately replaces the kit's check, whose "a new UID is a new name" and 32
        characters OCCM's names cannot meet: upstream ``GetLoadBalancerName`` is
        ``kube_service_<cluster>_<namespace>_<name>`` cut to 255 bytes
        (``pkg/openstack/loadbalancer.go`` v1.36.0), so that the balancers an OCCM user has
        are adopted. Stable, distinct between Services of different names (not between two
        Services of one name one after the other: no UID in the name), Octavia's 255 at most."""
        lb = self._lb(cloud)
        svc = make_service(name, namespace=namespace)
        other = make_service(f"{name[:62]}x", namespace=namespace)
        first = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", svc)
        again = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", svc)
        different = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", other)
        assert first == again == f"kube_service_kccm-conformance_{namespace}_{name}"
        assert first != different
        assert 0 < len(first.encode()) <= self.max_load_balancer_name_length


def _weights(world: World, service: Service) -> dict[str, int]:
    """Member name -> weight, over every pool of the Service's balancer."""
    lb = world.ops.load_balancer(load_balancer_name("kccm-conformance", service))
    assert lb is not None
    return {
        str(m["name"]): int(m["weight"])
        for li in world.ops.listeners(lb["id"])
        for m in world.ops.members(li["default_pool_id"])
    }


def test_a_draining_member_gets_weight_zero_then_goes(world: World) -> None:
    """kccm's drain on Octavia (docs/behaviour.md "Draining a Node's targets"): the member of
    a draining Node is kept with weight 0 (no new connections), through an update and an
    ensure; the plain update at the end of the drain removes it."""
    cloud = new_openstack_cloud(io.StringIO(world.emulator.cloud_conf()))
    lb = cloud.load_balancer()
    nodes = [node_of(s) for s in world.servers]
    leaving, staying = nodes[:1], nodes[1:]
    gone = leaving[0]["metadata"]["name"]
    kept = {n["metadata"]["name"]: 1 for n in staying}
    svc = make_service("conf-drain-weights")
    try:
        lb.ensure_load_balancer("kccm-conformance", svc, nodes)
        lb.update_load_balancer_draining("kccm-conformance", svc, staying, leaving)
        assert _weights(world, svc) == {gone: 0, **kept}
        lb.ensure_load_balancer_draining("kccm-conformance", svc, staying, leaving)
        assert _weights(world, svc) == {gone: 0, **kept}
        lb.update_load_balancer("kccm-conformance", svc, staying)
        assert _weights(world, svc) == kept
    finally:
        lb.ensure_load_balancer_deleted("kccm-conformance", svc)


DAMAGE = [
    pytest.param(("listener",), id="listener-dropped"),
    pytest.param(("members",), id="members-removed"),
    pytest.param(("floating-ip",), id="floating-ip-disassociated"),
    pytest.param(("listener", "members", "floating-ip"), id="all-three"),
    pytest.param((), id="cascade-deleted"),
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_the_tamper_sees_drift_that_the_next_ensure_repairs(
    world: World, damage: tuple[str, ...]
) -> None:
    """The tamper the kit uses, one kind of damage at a time, on a two-port Service: each is
    seen by ``is_intact``, repaired by the next ensure, after which an ensure writes nothing."""
    cloud = new_openstack_cloud(io.StringIO(world.emulator.cloud_conf()))
    lb = cloud.load_balancer()
    assert lb is not None
    service = make_service(f"tamper-{'-'.join(damage) or 'deleted'}", ports=(80, 443))
    nodes = [node_of(s) for s in world.servers]
    tamper = OctaviaTamper(world, damage)
    hurt = tamper.change if damage else tamper.delete
    lb.ensure_load_balancer("k", service, nodes)
    try:
        assert tamper.is_intact(cloud, "k", service, nodes)
        hurt(cloud, "k", service)
        assert not tamper.is_intact(cloud, "k", service, nodes)
        lb.ensure_load_balancer("k", service, nodes)
        assert tamper.is_intact(cloud, "k", service, nodes)
        before = world.emulator.admin.last_seq()
        lb.ensure_load_balancer("k", service, nodes)
        assert world.emulator.admin.mutating(before) == []
    finally:
        lb.ensure_load_balancer_deleted("k", service)
