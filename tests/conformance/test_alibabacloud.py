"""The alibabacloud provider passes the conformance kit against the Alibaba Cloud emulator
(``kccm.emulators.alibabacloud``: ECS, VPC and SLB as a real HTTP server, signature checked).

One emulator per module with three ECS instances in one VPC and its route table; the Nodes are
those instances as upstream names them (providerID ``<region>.<instance>``), and the routes'
Node directory lists them. The tamper changes and deletes balancers through the SLB API as an
operator would (``aliyun slb DeleteLoadBalancerListener``, ``RemoveVServerGroupBackendServers``,
``SetLoadBalancerDeleteProtection`` then ``DeleteLoadBalancer``), with a client of its own,
never through the provider. The module leaves the emulator as it found it.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.provider import AlibabaCloud, Parts, build_parts
from kccm.providers.alibabacloud.routes import NodeDirectory
from kccm.testing.conformance import CloudProviderConformance, make_node

VPC, VSWITCH, REGION = "vpc-conformance", "vsw-conformance", "cn-hangzhou"
INSTANCES = 3


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@dataclass
class World:
    emulator: AlibabaEmulator
    instances: list[dict[str, Any]]
    table: str

    def parts(self) -> Parts:
        config = {
            "region": REGION,
            "vpcid": VPC,
            "vswitchid": VSWITCH,
            "accessKeyID": _b64("kccm-ak"),
            "accessKeySecret": _b64("kccm-secret"),
            "clusterID": "conformance",
        }
        text = "global:\n" + "".join(f"  {k}: {v!r}\n" for k, v in config.items())
        return build_parts(load_alibaba_config(text), self.emulator.endpoint_env())

    def nodes(self) -> list[Node]:
        return [
            make_node(
                i["InstanceId"],
                provider_id=f"{REGION}.{i['InstanceId']}",
                address=i["VpcAttributes"]["PrivateIpAddress"]["IpAddress"][0],
            )
            for i in self.instances
        ]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with alibaba_emulator(region=REGION) as emulator:
        baseline = emulator.state()
        instances = [
            emulator.admin.add_instance(vpc=VPC, vswitch=VSWITCH, private_ip=f"10.0.4.{i + 1}")
            for i in range(INSTANCES)
        ]
        made = World(emulator, instances, emulator.admin.add_route_table(VPC))
        yield made
        emulator.admin.delete_route_table(made.table)
        for instance in instances:
            emulator.admin.delete_instance(instance["InstanceId"])
        emulator.assert_clean(baseline)


@dataclass
class SlbTamper:
    """The kit's ``LoadBalancerTamper``: an operator at the SLB API."""

    world: World

    def _call(self, action: str, **params: Any) -> dict[str, Any]:
        return self.world.parts().rpc.call("slb", action, {"RegionId": REGION, **params})

    def _lb(self, service: Service) -> dict[str, Any] | None:
        answer = self._call(
            "DescribeLoadBalancers", LoadBalancerName=default_load_balancer_name(service)
        )
        found = answer["LoadBalancers"]["LoadBalancer"]
        return self.world.emulator.admin.balancer(found[0]["LoadBalancerId"]) if found else None

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        lb = self._lb(service)
        assert lb is not None
        for item in lb["Listeners"]:
            self._call(
                "DeleteLoadBalancerListener",
                LoadBalancerId=lb["LoadBalancerId"],
                ListenerPort=item["ListenerPort"],
                ListenerProtocol=item["ListenerProtocol"],
            )
        for group in lb["VServerGroups"]:
            if group["BackendServers"]:
                self._call(
                    "RemoveVServerGroupBackendServers",
                    VServerGroupId=group["VServerGroupId"],
                    BackendServers=json.dumps(group["BackendServers"]),
                )

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        lb = self._lb(service)
        assert lb is not None
        lb_id = lb["LoadBalancerId"]
        self._call("SetLoadBalancerDeleteProtection", LoadBalancerId=lb_id, DeleteProtection="off")
        self._call("DeleteLoadBalancer", LoadBalancerId=lb_id)

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        """A running listener per Service port (and no other), its group's members exactly
        the nodes' instances on the port's nodePort."""
        lb = self._lb(service)
        if lb is None:
            return False
        ports = {p["port"]: p["nodePort"] for p in service["spec"]["ports"]}
        listeners = {i["ListenerPort"]: i for i in lb["Listeners"]}
        if set(listeners) != set(ports):
            return False
        groups = {g["VServerGroupId"]: g["BackendServers"] for g in lb["VServerGroups"]}
        instances = {n["spec"]["providerID"].split(".", 1)[1] for n in nodes}
        return all(
            item["Status"] == "running"
            and {(m["ServerId"], m["Port"]) for m in groups.get(item["VServerGroupId"], [])}
            == {(i, ports[port]) for i in instances}
            for port, item in listeners.items()
        )


class TestAlibabaCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, world: World) -> AlibabaCloud:
        cloud = AlibabaCloud(world.parts())
        cloud.parts.routes.directory = NodeDirectory(world.nodes)
        return cloud

    @pytest.fixture
    def lb_nodes(self, world: World) -> list[Node]:
        return world.nodes()

    @pytest.fixture
    def known_node(self, world: World) -> Node:
        return world.nodes()[0]

    @pytest.fixture
    def unknown_provider_id(self) -> str:
        """Well-formed (``<region>.i-<hex>``) and naming no instance."""
        return f"{REGION}.i-{uuid.uuid4().hex[:20]}"

    @pytest.fixture
    def load_balancer_tamper(self, world: World) -> SlbTamper:
        return SlbTamper(world)

    async def test_a_known_instance_exists_runs_and_has_metadata(
        self, cloud: Interface, known_node: Node | None, call: Any
    ) -> None:
        """Deliberately replaces the kit's check, whose ``<provider>://`` prefix upstream's
        providerIDs do not have: cloud-provider-alibaba-cloud v2.14.0 writes
        ``<region>.<instance-id>`` (``pkg/controller/node/manager.go``), and kccm keeps it
        so that Nodes upstream initialised stay valid. Exists, runs, and the metadata carries
        that ID."""
        v2 = cloud.instances_v2()
        assert v2 is not None
        assert known_node is not None
        assert await call.call("exists", v2.instance_exists, known_node) is True
        assert await call.call("shutdown", v2.instance_shutdown, known_node) is False
        meta = await call.call("metadata", v2.instance_metadata, known_node)
        assert meta.provider_id == known_node["spec"]["providerID"]
        assert meta.provider_id.startswith(f"{REGION}.i-")
