"""The openstack provider passes the conformance kit against kccm's OpenStack emulator (a real
HTTP server: Keystone, Nova, Neutron, Octavia)."""

from __future__ import annotations

import io
import ipaddress
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from kccm.cloudprovider import Interface, Node, Service, ThreadPoolAdapter
from kccm.providers.openstack import OpenStackCloud, new_openstack_cloud
from kccm.providers.openstack.api import OpenStackAPI, OpenStackNotFound
from kccm.providers.openstack.instances import OpenStackInstances
from kccm.testing.conformance import CloudProviderConformance, make_node, make_service

NODES = 3
LBAAS = "/v2.0/lbaas"
SETTLE_TIMEOUT = 30.0


class OctaviaTamper:
    """Changes and deletes a balancer through Octavia and Neutron directly, with a client of
    its own (not counted in the provider's ledger), as an operator in Horizon would."""

    def __init__(self) -> None:
        self._apis: dict[int, OpenStackAPI] = {}

    def _api(self, cloud: Interface) -> OpenStackAPI:
        assert isinstance(cloud, OpenStackCloud)
        return self._apis.setdefault(id(cloud), OpenStackAPI(cloud.config))

    def _balancer(self, cloud: Interface, cluster: str, service: Service) -> dict[str, Any] | None:
        lb = cloud.load_balancer()
        assert lb is not None
        name = lb.get_load_balancer_name(cluster, service)
        found = list(
            self._api(cloud).paged(
                "load-balancer",
                f"{LBAAS}/loadbalancers",
                "loadbalancers",
                {"name": name},
                operation="tamper",
            )
        )
        return found[0] if found else None

    def _settle(self, api: OpenStackAPI, lb_id: str, *, gone: bool = False) -> None:
        """Until the balancer is ACTIVE again (or gone): Octavia has no event to await."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            try:
                found = api.request(
                    "load-balancer", "GET", f"{LBAAS}/loadbalancers/{lb_id}", operation="tamper"
                )["loadbalancer"]
            except OpenStackNotFound:
                if gone:
                    return
                raise
            if not gone and found["provisioning_status"] == "ACTIVE":
                return
            time.sleep(0.02)
        raise AssertionError(f"balancer {lb_id} did not settle")

    def _pools(self, api: OpenStackAPI, lb_id: str) -> list[dict[str, Any]]:
        params = {"loadbalancer_id": lb_id}
        return list(api.paged("load-balancer", f"{LBAAS}/pools", "pools", params, operation="t"))

    def change(self, cloud: Interface, cluster: str, service: Service) -> None:
        """Empty every pool (the batch member update, as the Octavia CLI does)."""
        api, lb = self._api(cloud), self._balancer(cloud, cluster, service)
        assert lb is not None
        for pool in self._pools(api, lb["id"]):
            api.request(
                "load-balancer",
                "PUT",
                f"{LBAAS}/pools/{pool['id']}/members",
                json={"members": []},
                operation="tamper",
            )
            self._settle(api, lb["id"])

    def delete(self, cloud: Interface, cluster: str, service: Service) -> None:
        """The balancer (cascade) and its floating IP."""
        api, lb = self._api(cloud), self._balancer(cloud, cluster, service)
        assert lb is not None
        fips = api.paged(
            "network",
            "/v2.0/floatingips",
            "floatingips",
            {"port_id": lb["vip_port_id"]},
            operation="tamper",
        )
        for fip in list(fips):
            api.request("network", "DELETE", f"/v2.0/floatingips/{fip['id']}", operation="t")
        api.request(
            "load-balancer",
            "DELETE",
            f"{LBAAS}/loadbalancers/{lb['id']}",
            params={"cascade": "true"},
            operation="tamper",
        )
        self._settle(api, lb["id"], gone=True)

    def is_intact(
        self, cloud: Interface, cluster: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        """A listener per Service port, whose pool has exactly the nodes' first InternalIPv4
        on the node port."""
        api, lb = self._api(cloud), self._balancer(cloud, cluster, service)
        if lb is None:
            return False
        listeners = list(
            api.paged(
                "load-balancer",
                f"{LBAAS}/listeners",
                "listeners",
                {"loadbalancer_id": lb["id"]},
                operation="tamper",
            )
        )
        by_port = {li["protocol_port"]: li.get("default_pool_id") for li in listeners}
        if sorted(by_port) != sorted(p["port"] for p in service["spec"]["ports"]):
            return False
        for port in service["spec"]["ports"]:
            pool_id = by_port[port["port"]]
            if not pool_id:
                return False
            members = api.paged(
                "load-balancer",
                f"{LBAAS}/pools/{pool_id}/members",
                "members",
                operation="tamper",
            )
            found = {(m["address"], m["protocol_port"]) for m in members}
            if found != {(_ipv4(n), port["nodePort"]) for n in nodes}:
                return False
        return True


def _ipv4(node: Node) -> str:
    for address in node["status"]["addresses"]:
        if (
            address["type"] == "InternalIP"
            and ipaddress.ip_address(address["address"]).version == 4
        ):
            return str(address["address"])
    raise AssertionError(f"node {node['metadata']['name']} has no InternalIP")


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    launcher = pytest.importorskip("kccm.testing.openstack.launcher")
    with launcher.openstack_emulator() as emu:
        servers = [emu.admin.add_server(f"conformance-node-{i}") for i in range(NODES)]
        baseline = emu.admin.state()
        yield emu
        emu.admin.assert_clean(baseline)
        for server in servers:
            emu.admin.delete_server(server["id"])


class TestOpenStackCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, emulator: Any) -> OpenStackCloud:
        return new_openstack_cloud(io.StringIO(emulator.cloud_conf()))

    @pytest.fixture
    def lb_nodes(self, cloud: OpenStackCloud) -> list[Node]:
        """The emulator's servers as Nodes: providerID and addresses from the provider."""
        instances = cloud.instances_v2()
        assert isinstance(instances, OpenStackInstances)
        nodes = []
        for i in range(NODES):
            name = f"conformance-node-{i}"
            meta = instances.instance_metadata(make_node(name))
            node = make_node(name, provider_id=meta.provider_id)
            node["status"]["addresses"] = [a.to_dict() for a in meta.node_addresses]
            nodes.append(node)
        return nodes

    @pytest.fixture
    def load_balancer_tamper(self) -> OctaviaTamper:
        return OctaviaTamper()

    @pytest.fixture
    def known_node(self, lb_nodes: list[Node]) -> Node:
        return lb_nodes[0]

    @pytest.fixture
    def unknown_provider_id(self) -> str:
        """``openstack:///<uuid>`` (a providerID without the third slash is malformed, an error
        upstream, never "does not exist")."""
        return f"openstack:///{uuid.uuid4()}"

    @pytest.mark.parametrize(("name", "namespace"), [("web", "default"), ("n" * 63, "s" * 63)])
    async def test_load_balancer_name_is_stable_unique_and_short(
        self, cloud: Interface, call: ThreadPoolAdapter, name: str, namespace: str
    ) -> None:
        """Deliberately OCCM's names, not the kit's rule: ``kube_service_<cluster>_<namespace>_
        <name>`` cut to 255 bytes (``GetLoadBalancerName``, loadbalancer.go), so balancers OCCM
        made are adopted. They are stable and differ between Services of different names, but
        not between two Services of one name one after the other (no UID in the name), and
        they are longer than the kit's 32 characters (Octavia allows 255)."""
        lb = cloud.load_balancer()
        if lb is None:
            pytest.skip("the provider does not support LoadBalancer")
        svc = make_service(name, namespace=namespace)
        other = make_service(name[:-1] + "x", namespace=namespace)
        first = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", svc)
        again = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", svc)
        different = await call.call("name", lb.get_load_balancer_name, "kccm-conformance", other)
        assert first == again
        assert first != different
        assert first.startswith("kube_service_kccm-conformance_")
        assert 0 < len(first.encode()) <= 255
