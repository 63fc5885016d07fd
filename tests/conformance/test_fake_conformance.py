"""The fake provider passes the conformance kit, with every capability and with V2 only."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.conformance import CloudProviderConformance, LoadBalancerTamper, make_node


class FakeTamper:
    """Drift in the fake cloud: a balancer without ports or hosts, or none at all."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, FakeCloud)
        cloud.alter_balancer(default_load_balancer_name(service), ports=(), hosts=())

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, FakeCloud)
        cloud.remove_balancer(default_load_balancer_name(service))

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        assert isinstance(cloud, FakeCloud)
        balancer = cloud.balancers.get(default_load_balancer_name(service))
        if balancer is None:
            return False
        ports = [p.port for p in balancer.ports]
        hosts = sorted(n["metadata"]["name"] for n in nodes)
        wanted_ports = [p["port"] for p in service["spec"]["ports"]]
        return ports == wanted_ports and list(balancer.hosts) == hosts


class TestFakeCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self) -> FakeCloud:
        fake = FakeCloud()
        fake.add_instance(FakeInstance(name="known", instance_id="i-known"))
        return fake

    @pytest.fixture
    def known_node(self) -> Node:
        return make_node("known", provider_id="fake://i-known")

    @pytest.fixture
    def load_balancer_tamper(self) -> LoadBalancerTamper:
        return FakeTamper()


class TestFakeCloudWithoutLegacyInstances(TestFakeCloud):
    @pytest.fixture
    def cloud(self) -> FakeCloud:
        fake = FakeCloud(enable_instances=False, enable_zones=False)
        fake.add_instance(FakeInstance(name="known", instance_id="i-known"))
        return fake
