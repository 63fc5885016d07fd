"""The aws provider passes the conformance kit against moto running as a real HTTP server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import botocore.session
import pytest

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS
from kccm.emulators import aws as support
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import TYPE
from kccm.providers.aws.balancers import is_nlb
from kccm.providers.aws.config import load_aws_config
from kccm.providers.aws.nlboptions import EIP_ALLOCATIONS
from kccm.testing.conformance import CloudProviderConformance, make_service


@pytest.fixture(scope="module")
def moto_world() -> Iterator[Any]:
    with support.moto_emulator() as moto, support.no_leaked_balancers(moto.url):
        yield support.build_world(moto.url, f"conf{uuid.uuid4().hex[:6]}", instances=3)


@pytest.fixture(autouse=True)
def _shared_botocore_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every AWSCloud still makes its own boto3 session and clients; botocore's service models
    are parsed once per process, not per session (``kccm.emulators.aws.clients.shared_loader``)."""
    monkeypatch.setattr(botocore.session, "create_loader", support.shared_loader)


def _elb(url: str) -> Any:
    return support.client(url, "elb")


def _instances(nodes: Sequence[Node]) -> set[str]:
    return {n["spec"]["providerID"].rsplit("/", 1)[-1] for n in nodes}


@dataclass
class NLBTamper:
    """Changes and deletes an NLB in moto directly, as an operator in the AWS console would."""

    url: str

    def _balancer(self, service: Service) -> dict[str, Any] | None:
        _, elbv2 = support.clients(self.url)
        try:
            found = elbv2.describe_load_balancers(Names=[default_load_balancer_name(service)])
        except elbv2.exceptions.LoadBalancerNotFoundException:
            return None
        return dict(found["LoadBalancers"][0])

    def change(self, service: Service) -> None:
        """Drop the first listener and deregister every target of the other groups."""
        _, elbv2 = support.clients(self.url)
        lb = self._balancer(service)
        assert lb is not None
        listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
        elbv2.delete_listener(ListenerArn=listeners[0]["ListenerArn"])
        for listener in listeners[1:]:
            arn = listener["DefaultActions"][0]["TargetGroupArn"]
            targets = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
            if targets:
                elbv2.deregister_targets(TargetGroupArn=arn, Targets=[t["Target"] for t in targets])

    def delete(self, service: Service) -> None:
        _, elbv2 = support.clients(self.url)
        lb = self._balancer(service)
        assert lb is not None
        listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
        elbv2.delete_load_balancer(LoadBalancerArn=lb["LoadBalancerArn"])
        for listener in listeners:
            elbv2.delete_target_group(
                TargetGroupArn=listener["DefaultActions"][0]["TargetGroupArn"]
            )

    def is_intact(self, service: Service, nodes: Sequence[Node]) -> bool:
        """Every Service port has a listener forwarding to a group on its node port, whose
        targets are exactly the nodes' instances."""
        _, elbv2 = support.clients(self.url)
        lb = self._balancer(service)
        if lb is None:
            return False
        listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
        by_port = {li["Port"]: li["DefaultActions"][0]["TargetGroupArn"] for li in listeners}
        for port in service["spec"]["ports"]:
            arn = by_port.get(port["port"])
            if arn is None:
                return False
            health = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
            found = {(t["Target"]["Id"], t["Target"]["Port"]) for t in health}
            if found != {(i, port["nodePort"]) for i in _instances(nodes)}:
                return False
        return len(by_port) == len(service["spec"]["ports"])


@dataclass
class ClassicTamper:
    """The same for a Classic ELB (a Service without the type annotation)."""

    url: str

    def _balancer(self, service: Service) -> dict[str, Any] | None:
        elb = _elb(self.url)
        try:
            found = elb.describe_load_balancers(
                LoadBalancerNames=[default_load_balancer_name(service)]
            )
        except elb.exceptions.AccessPointNotFoundException:
            return None
        return dict(found["LoadBalancerDescriptions"][0])

    def change(self, service: Service) -> None:
        """Drop the first listener and deregister every instance."""
        lb = self._balancer(service)
        assert lb is not None
        first = lb["ListenerDescriptions"][0]["Listener"]["LoadBalancerPort"]
        elb, name = _elb(self.url), lb["LoadBalancerName"]
        elb.delete_load_balancer_listeners(LoadBalancerName=name, LoadBalancerPorts=[first])
        if lb["Instances"]:
            elb.deregister_instances_from_load_balancer(
                LoadBalancerName=name, Instances=lb["Instances"]
            )

    def delete(self, service: Service) -> None:
        """The balancer and its own ``k8s-elb-`` group: while that group remains the provider
        still reports the balancer as existing, so that a delete can finish the clean-up."""
        lb = self._balancer(service)
        assert lb is not None
        _elb(self.url).delete_load_balancer(LoadBalancerName=lb["LoadBalancerName"])
        ec2, _ = support.clients(self.url)
        for group in ec2.describe_security_groups(GroupIds=lb["SecurityGroups"])["SecurityGroups"]:
            if group["GroupName"].startswith("k8s-elb-"):
                ec2.delete_security_group(GroupId=group["GroupId"])

    def is_intact(self, service: Service, nodes: Sequence[Node]) -> bool:
        """Every Service port has a listener to its node port; the registered instances are
        exactly the nodes'."""
        lb = self._balancer(service)
        if lb is None:
            return False
        by_port = {
            d["Listener"]["LoadBalancerPort"]: d["Listener"]["InstancePort"]
            for d in lb["ListenerDescriptions"]
        }
        wanted = {p["port"]: p["nodePort"] for p in service["spec"]["ports"]}
        return by_port == wanted and {i["InstanceId"] for i in lb["Instances"]} == _instances(nodes)


@dataclass
class MotoTamper:
    """The conformance kit's ``LoadBalancerTamper``: the balancer of the Service's kind."""

    url: str

    def _of(self, service: Service) -> NLBTamper | ClassicTamper:
        return NLBTamper(self.url) if is_nlb(service) else ClassicTamper(self.url)

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        self._of(service).change(service)

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        self._of(service).delete(service)

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        return self._of(service).is_intact(service, nodes)


class TestAWSCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, moto_world: Any, monkeypatch: pytest.MonkeyPatch) -> AWSCloud:
        for key, value in support.CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        return AWSCloud(load_aws_config(moto_world.cloud_config()))

    @pytest.fixture
    def lb_nodes(self, moto_world: Any) -> list[Node]:
        return [support.node_for(moto_world, i) for i in moto_world.instances]

    @pytest.fixture
    def load_balancer_tamper(self, moto_world: Any) -> MotoTamper:
        return MotoTamper(moto_world.url)

    @pytest.fixture
    def known_node(self, moto_world: Any) -> Node:
        return support.node_for(moto_world, next(iter(moto_world.instances)))

    describes_draining = False  # an NLB target kept draining is registered as any other
    sharing_annotations = {TYPE: "nlb"}  # a Classic ELB is not shared

    @pytest.fixture
    def drain_service(self) -> dict[str, Any]:
        """An NLB (a Classic ELB's Nodes go at once: upstream's connection draining is its)."""
        service = make_service("conf-drain")
        service["metadata"]["annotations"] = {TYPE: "nlb"}
        return service

    @pytest.fixture
    def retention_service(self, moto_world: Any) -> Iterator[dict[str, Any]]:
        """An NLB naming one Elastic IP allocation per subnet (AWS assigns the addresses of
        any other balancer: nothing to keep), asking for retention; the allocations the test
        did not release are released after it."""
        ec2, _ = support.clients(moto_world.url)
        ids = [ec2.allocate_address(Domain="vpc")["AllocationId"] for _ in moto_world.subnet_ids]
        service = make_service("conf-retain")
        service["metadata"]["annotations"] = {
            TYPE: "nlb",
            EIP_ALLOCATIONS: ",".join(ids),
            ANNOTATION_RETAIN_ADDRESS: "true",
        }
        yield service
        left = ec2.describe_addresses(Filters=[{"Name": "allocation-id", "Values": ids}])
        for address in left["Addresses"]:
            ec2.release_address(AllocationId=address["AllocationId"])

    @pytest.fixture
    def unknown_provider_id(self) -> str:
        """Well-formed (upstream MapToAWSInstanceID accepts it) and naming no instance."""
        return f"aws:///{support.ZONES[0]}/i-{uuid.uuid4().hex[:17]}"


@pytest.mark.parametrize(
    "kind", [pytest.param("", id="classic-elb"), pytest.param("nlb", id="nlb")]
)
def test_the_tamper_sees_drift_that_the_next_ensure_repairs(
    moto_world: Any, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The tamper the kit uses (and the provider's repair) for both kinds of balancer."""
    for key, value in support.CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    cloud = AWSCloud(load_aws_config(moto_world.cloud_config()))
    lb = cloud.load_balancer()
    assert lb is not None
    service = make_service(f"tamper-{kind or 'classic'}", ports=(80, 443))
    if kind:
        service["metadata"]["annotations"] = {TYPE: kind}
    nodes = [support.node_for(moto_world, i) for i in moto_world.instances]
    tamper = MotoTamper(moto_world.url)
    for damage in (tamper.change, tamper.delete):
        lb.ensure_load_balancer("k", service, nodes)
        assert tamper.is_intact(cloud, "k", service, nodes)
        damage(cloud, "k", service)
        assert not tamper.is_intact(cloud, "k", service, nodes)
    lb.ensure_load_balancer("k", service, nodes)
    assert tamper.is_intact(cloud, "k", service, nodes)
    lb.ensure_load_balancer_deleted("k", service)


def _recording(lb: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every AWS call ``lb`` makes from now on: (operation, parameters)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    real = lb._api.call

    def call(service: str, operation: str, **params: Any) -> Any:
        calls.append((operation, params))
        return real(service, operation, **params)

    lb._api.call = call
    return calls


def test_a_re_created_nlb_gets_its_kept_elastic_ips_back_by_owner(
    moto_world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 on moto: the kept allocations (tagged with the owner) go into the re-created
    Service's CreateLoadBalancer though it names none, and their mark goes; a Service without
    kccm's annotation makes no DescribeAddresses (the default path is unchanged); after the
    release nothing is left allocated."""
    for key, value in support.CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    cloud = AWSCloud(load_aws_config(moto_world.cloud_config()))
    lb = cloud.load_balancer()
    assert lb is not None
    ec2, _ = support.clients(moto_world.url)
    ids = sorted(ec2.allocate_address(Domain="vpc")["AllocationId"] for _ in moto_world.subnet_ids)
    nodes = [support.node_for(moto_world, i) for i in moto_world.instances]
    first = make_service("eip-kept")
    first["metadata"]["annotations"] = {
        TYPE: "nlb",
        EIP_ALLOCATIONS: ",".join(ids),
        ANNOTATION_RETAIN_ADDRESS: "true",
    }
    again = make_service("eip-kept")
    again["metadata"]["annotations"] = {TYPE: "nlb", ANNOTATION_RETAIN_ADDRESS: "true"}
    plain = make_service("eip-plain")
    plain["metadata"]["annotations"] = {TYPE: "nlb"}
    try:
        lb.ensure_load_balancer("k", first, nodes)
        kept = lb.ensure_load_balancer_deleted_keeping_address("k", first)
        assert sorted(a.id for a in kept) == ids
        assert {a.owner for a in kept} == {"default/eip-kept"}
        calls = _recording(lb)
        lb.ensure_load_balancer("k", again, nodes)
        (create,) = [p for op, p in calls if op == "create_load_balancer"]
        assert sorted(m["AllocationId"] for m in create["SubnetMappings"]) == ids
        assert lb.list_retained_addresses("k") == []
        calls.clear()
        lb.ensure_load_balancer("k", plain, nodes)
        assert "describe_addresses" not in [op for op, _ in calls]
        lb.ensure_load_balancer_deleted_keeping_address("k", again)
        assert sorted(a.id for a in lb.list_retained_addresses("k")) == ids
        for allocation in ids:
            assert lb.release_retained_address("k", allocation) is True
        left = ec2.describe_addresses(Filters=[{"Name": "allocation-id", "Values": ids}])
        assert left["Addresses"] == []
    finally:
        lb.ensure_load_balancer_deleted("k", again)
        lb.ensure_load_balancer_deleted("k", plain)
        left = ec2.describe_addresses(Filters=[{"Name": "allocation-id", "Values": ids}])
        for address in left["Addresses"]:
            ec2.release_address(AllocationId=address["AllocationId"])
