"""The load balancer part of the conformance kit, on the classic load balancer over the
in-memory SLB (the provider's other capabilities await the Alibaba Cloud emulator)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from slb_fake import FakeSlb

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.cloudprovider.apicalls import CloudAPICalls
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.testing.conformance import CloudProviderConformance, LoadBalancerTamper, make_node


class ClbOnly:
    """An ``alibabacloud`` provider with only its load balancer."""

    def __init__(self) -> None:
        self.slb = FakeSlb()
        config = load_alibaba_config("global:\n  clusterID: conformance\n")
        self.balancers = ClassicLoadBalancers(self.slb, config, "vpc-1")

    async def initialize(self, client_builder: object, stop: object) -> None:
        return None

    def load_balancer(self) -> ClassicLoadBalancers:
        return self.balancers

    def instances(self) -> None:
        return None

    def instances_v2(self) -> None:
        return None

    def zones(self) -> None:
        return None

    def clusters(self) -> None:
        return None

    def routes(self) -> None:
        return None

    def provider_name(self) -> str:
        return "alibabacloud"

    def has_cluster_id(self) -> bool:
        return True

    def cloud_api_calls(self) -> CloudAPICalls:
        return self.slb.ledger


def _balancer(cloud: Interface, service: Service) -> dict[str, object] | None:
    assert isinstance(cloud, ClbOnly)
    name = default_load_balancer_name(service)
    found = [b for b in cloud.slb.balancers.values() if b["LoadBalancerName"] == name]
    return found[0] if found else None


class SlbTamper:
    """Drift in the in-memory SLB: the listeners gone and the members emptied, or the whole
    balancer deleted."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, ClbOnly)
        balancer = _balancer(cloud, service)
        assert balancer is not None
        cloud.slb.listeners[str(balancer["LoadBalancerId"])].clear()
        for group in cloud.slb.vgroups.values():
            group["backends"].clear()

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, ClbOnly)
        balancer = _balancer(cloud, service)
        assert balancer is not None
        balancer["DeleteProtection"] = "off"
        cloud.slb.call("slb", "DeleteLoadBalancer", {"LoadBalancerId": balancer["LoadBalancerId"]})

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        assert isinstance(cloud, ClbOnly)
        balancer = _balancer(cloud, service)
        if balancer is None:
            return False
        listeners = cloud.slb.listeners[str(balancer["LoadBalancerId"])]
        ports = sorted(port for port, _ in listeners)
        wanted = sorted(p["port"] for p in service["spec"]["ports"])
        members = set()
        for item in listeners.values():
            group = cloud.slb.vgroups[str(item["VServerGroupId"])]
            members |= set(group["backends"])
        instances = {n["spec"]["providerID"].split(".")[-1] for n in nodes}
        return ports == wanted and members == instances


class TestAlibabaClassicLoadBalancer(CloudProviderConformance):
    @pytest.fixture
    def cloud(self) -> ClbOnly:
        return ClbOnly()

    @pytest.fixture
    def lb_nodes(self) -> list[Node]:
        return [
            make_node(
                f"conformance-node-{i}", provider_id=f"cn-hangzhou.i-{i}", address=f"10.0.0.{i}"
            )
            for i in range(1, 4)
        ]

    @pytest.fixture
    def load_balancer_tamper(self) -> LoadBalancerTamper:
        return SlbTamper()
