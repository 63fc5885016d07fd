"""The openstack provider passes the conformance kit against kccm's OpenStack emulator (a real
HTTP server: Keystone, Nova, Neutron, Octavia)."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kccm.cloudprovider import Interface, Node, ThreadPoolAdapter
from kccm.providers.openstack import OpenStackCloud, new_openstack_cloud
from kccm.providers.openstack.instances import OpenStackInstances
from kccm.testing.conformance import CloudProviderConformance, make_node, make_service

NODES = 3


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
