"""Service NLBs against moto: what is created, kept in sync and deleted."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aws_lb import lb_of, nodes

from kccm.cloudprovider import CloudProviderError, ImplementedElsewhere, default_load_balancer_name
from kccm.emulators.aws import World, clients, leftovers
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import ServiceAnnotationError

P = "service.beta.kubernetes.io/aws-load-balancer-"


def service(
    ports: tuple[tuple[int, int], ...] = ((80, 30080),),
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": {P + "type": "nlb", **(annotations or {})},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "nodePort": n} for p, n in ports
            ],
            **spec,
        },
    }


def state(world: World, svc: dict[str, Any]) -> dict[str, Any]:
    """The NLB of ``svc`` as moto has it: listeners (port -> target group name), groups with
    their targets and health checks, tags."""
    _, elbv2 = clients(world.url)
    lb = elbv2.describe_load_balancers(Names=[default_load_balancer_name(svc)])["LoadBalancers"][0]
    arn = lb["LoadBalancerArn"]
    described = elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"]
    forward = {
        (li["Port"], li["Protocol"]): li["DefaultActions"][0]["TargetGroupArn"] for li in described
    }
    groups = (
        {
            g["TargetGroupArn"]: g
            for g in elbv2.describe_target_groups(TargetGroupArns=sorted(set(forward.values())))[
                "TargetGroups"
            ]
        }
        if forward
        else {}
    )
    listeners = {key: groups[arn]["TargetGroupName"] for key, arn in forward.items()}
    targets = {
        g["TargetGroupName"]: sorted(
            (t["Target"]["Id"], t["Target"]["Port"])
            for t in elbv2.describe_target_health(TargetGroupArn=g["TargetGroupArn"])[
                "TargetHealthDescriptions"
            ]
        )
        for g in groups.values()
    }
    tags = {
        t["Key"]: t["Value"]
        for t in elbv2.describe_tags(ResourceArns=[arn])["TagDescriptions"][0]["Tags"]
    }
    attributes = {
        a["Key"]: a["Value"]
        for a in elbv2.describe_load_balancer_attributes(LoadBalancerArn=arn)["Attributes"]
    }
    return {
        "lb": lb,
        "groups": list(groups.values()),
        "listeners": listeners,
        "targets": targets,
        "tags": tags,
        "attributes": attributes,
    }


def test_ensure_creates_an_nlb_like_upstream(cloud: AWSCloud, world: World) -> None:
    svc = service(((80, 30080), (443, 30443)), {P + "additional-resource-tags": "team=web"})
    status = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = state(world, svc)
    lb = found["lb"]
    assert lb["Type"] == "network"
    assert lb["Scheme"] == "internet-facing"
    assert lb["LoadBalancerName"] == ("a" + svc["metadata"]["uid"].replace("-", ""))[:32]
    assert [i.hostname for i in status.ingress] == [lb["DNSName"]]
    assert found["tags"] == {
        "kubernetes.io/service-name": "shop/web",
        f"kubernetes.io/cluster/{world.cluster_id}": "owned",
        "team": "web",
    }
    assert sorted(found["listeners"]) == [(80, "TCP"), (443, "TCP")]
    assert all(name.startswith("k8s-shop-web-") for name in found["listeners"].values())
    for group in found["groups"]:
        assert (group["HealthCheckProtocol"], group["HealthCheckPort"]) == ("TCP", "traffic-port")
        assert found["targets"][group["TargetGroupName"]] == sorted(
            (i, group["Port"]) for i in world.instances
        )
    assert sorted(g["Port"] for g in found["groups"]) == [30080, 30443]
    assert {z["SubnetId"] for z in lb["AvailabilityZones"]} == set(world.subnet_ids)  # one per zone


def test_ensure_is_idempotent_and_makes_no_writes_the_second_time(
    cloud: AWSCloud, world: World
) -> None:
    svc = service(((80, 30080), (443, 30443)), {P + "additional-resource-tags": "team=web"})
    first = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    created = cloud.cloud_api_calls().snapshot()
    assert created.writes["elbv2:create_load_balancer"] == 1  # the ledger classes writes
    assert created.writes["elbv2:create_target_group"] == 2
    assert "elbv2:describe_load_balancers" in created.reads
    before = cloud.cloud_api_calls().snapshot()
    second = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    lb_of(cloud).update_load_balancer("k", svc, nodes(world))
    calls = cloud.cloud_api_calls().snapshot().since(before)
    assert first == second
    assert calls.writes == {}
    assert calls.total_reads > 0  # it did look


def test_targets_follow_the_nodes(cloud: AWSCloud, world: World) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world, 1))
    lb.update_load_balancer("k", svc, nodes(world))
    [targets] = state(world, svc)["targets"].values()
    assert [t for t, _ in targets] == sorted(world.instances)
    lb.update_load_balancer("k", svc, [])
    [targets] = state(world, svc)["targets"].values()
    assert targets == []


def test_target_node_labels_select_the_targets(cloud: AWSCloud, world: World) -> None:
    chosen = nodes(world)
    chosen[0]["metadata"]["labels"] = {"pool": "edge"}
    svc = service(annotations={P + "target-node-labels": "pool=edge"})
    lb_of(cloud).ensure_load_balancer("k", svc, chosen)
    [targets] = state(world, svc)["targets"].values()
    assert [t for t, _ in targets] == [chosen[0]["metadata"]["uid"]]


def test_local_traffic_policy_health_checks_the_health_check_node_port(
    cloud: AWSCloud, world: World
) -> None:
    svc = service(externalTrafficPolicy="Local", healthCheckNodePort=32100)
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    [group] = state(world, svc)["groups"]
    assert (group["HealthCheckProtocol"], group["HealthCheckPort"], group["HealthCheckPath"]) == (
        "HTTP",
        "32100",
        "/healthz",
    )
    assert group["HealthCheckIntervalSeconds"] == 10


def test_changed_ports_replace_listeners_and_groups_leaving_nothing_behind(
    cloud: AWSCloud, world: World
) -> None:
    svc = service(((80, 30080), (81, 30081)))
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    old = set(state(world, svc)["listeners"].values())
    svc["spec"]["ports"] = [
        {"port": 80, "protocol": "TCP", "nodePort": 30090},
        {"port": 8080, "protocol": "TCP", "nodePort": 30091},
    ]
    lb.ensure_load_balancer("k", svc, nodes(world))
    found = state(world, svc)
    assert sorted(found["listeners"]) == [(80, "TCP"), (8080, "TCP")]
    assert sorted(g["Port"] for g in found["groups"]) == [30090, 30091]
    assert not old & {g["TargetGroupName"] for g in found["groups"]}
    assert len(leftovers(world.url, world.vpc_id)["target_groups"]) == 2  # the old ones are deleted


def test_annotations_shape_the_nlb(cloud: AWSCloud, world: World) -> None:
    svc = service(
        annotations={
            P + "internal": "true",
            P + "cross-zone-load-balancing-enabled": "true",
            P + "healthcheck-healthy-threshold": "5",
        }
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = state(world, svc)
    assert found["lb"]["Scheme"] == "internal"
    assert found["attributes"]["load_balancing.cross_zone.enabled"] == "true"
    assert found["groups"][0]["HealthyThresholdCount"] == 5
    svc["metadata"]["annotations"][P + "healthcheck-healthy-threshold"] = "4"
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert state(world, svc)["groups"][0]["HealthyThresholdCount"] == 4  # modified in place


def test_delete_removes_everything_it_created(cloud: AWSCloud, world: World) -> None:
    svc = service(((80, 30080), (443, 30443)))
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    lb.ensure_load_balancer_deleted("k", svc)
    assert leftovers(world.url, world.vpc_id) == {
        "load_balancers": [],
        "target_groups": [],
        "routes": [],
    }
    assert lb.get_load_balancer("k", svc) == (None, False)
    lb.ensure_load_balancer_deleted("k", svc)


def test_delete_also_finds_a_group_an_interrupted_ensure_left(
    cloud: AWSCloud, world: World
) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    _, elbv2 = clients(world.url)
    found = state(world, svc)
    for listener in elbv2.describe_listeners(LoadBalancerArn=found["lb"]["LoadBalancerArn"])[
        "Listeners"
    ]:
        elbv2.delete_listener(
            ListenerArn=listener["ListenerArn"]
        )  # as if ensure stopped between the two
    lb.ensure_load_balancer_deleted("k", svc)
    assert leftovers(world.url, world.vpc_id)["target_groups"] == []


def test_an_existing_orphan_group_is_adopted_by_ensure(cloud: AWSCloud, world: World) -> None:
    svc = service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    _, elbv2 = clients(world.url)
    arn = state(world, svc)["lb"]["LoadBalancerArn"]
    for listener in elbv2.describe_listeners(LoadBalancerArn=arn)["Listeners"]:
        elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
    lb.ensure_load_balancer("k", svc, nodes(world))
    assert len(leftovers(world.url, world.vpc_id)["target_groups"]) == 1


@pytest.mark.parametrize(
    "kind", [pytest.param("external", id="external"), pytest.param("nlb-ip", id="nlb-ip")]
)
def test_the_aws_load_balancer_controllers_services_are_left_alone(
    cloud: AWSCloud, world: World, kind: str
) -> None:
    svc = service(annotations={P + "type": kind})
    lb = lb_of(cloud)
    with pytest.raises(ImplementedElsewhere):
        lb.ensure_load_balancer("k", svc, nodes(world))
    with pytest.raises(ImplementedElsewhere):
        lb.update_load_balancer("k", svc, nodes(world))
    assert lb.get_load_balancer("k", svc) == (None, False)
    lb.ensure_load_balancer_deleted("k", svc)


def test_a_bad_annotation_creates_nothing(cloud: AWSCloud, world: World) -> None:
    with pytest.raises(ServiceAnnotationError, match="healthcheck-interval"):
        lb_of(cloud).ensure_load_balancer(
            "k", service(annotations={P + "healthcheck-interval": "1"}), nodes(world)
        )
    assert leftovers(world.url, world.vpc_id)["load_balancers"] == []


def test_update_of_a_missing_balancer_is_an_error(cloud: AWSCloud, world: World) -> None:
    with pytest.raises(CloudProviderError, match="not found"):
        lb_of(cloud).update_load_balancer("k", service(), nodes(world))


def test_subnets_by_annotation(cloud: AWSCloud, world: World) -> None:
    ec2, _ = clients(world.url)
    ec2.create_tags(Resources=[world.subnet_ids[1]], Tags=[{"Key": "Name", "Value": "public-b"}])
    svc = service(annotations={P + "subnets": "public-b"})
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert [z["SubnetId"] for z in state(world, svc)["lb"]["AvailabilityZones"]] == [
        world.subnet_ids[1]
    ]
    with pytest.raises(ServiceAnnotationError, match="expected to find 1 subnets"):
        lb_of(cloud).ensure_load_balancer(
            "k", service(annotations={P + "subnets": "nope"}), nodes(world)
        )


def _private_subnet(world: World, zone: str, octet: int, roles: tuple[str, ...]) -> str:
    """A subnet with its own route table (no internet gateway), with these role tags."""
    ec2, _ = clients(world.url)
    tags = [{"Key": f"kubernetes.io/cluster/{world.cluster_id}", "Value": "shared"}]
    tags += [{"Key": role, "Value": "1"} for role in roles]
    vpc_cidr = ec2.describe_vpcs(VpcIds=[world.vpc_id])["Vpcs"][0]["CidrBlock"]
    first, second = vpc_cidr.split(".")[:2]
    cidr = f"{first}.{second}.{octet}.0/24"
    subnet = ec2.create_subnet(
        VpcId=world.vpc_id,
        CidrBlock=cidr,
        AvailabilityZone=zone,
        TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
    )["Subnet"]["SubnetId"]
    table = ec2.create_route_table(VpcId=world.vpc_id)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
    return str(subnet)


def test_subnet_discovery_follows_upstreams_rules(cloud: AWSCloud, world: World) -> None:
    # tagged for both roles: only its being private keeps it from internet-facing balancers
    roles = ("kubernetes.io/role/elb", "kubernetes.io/role/internal-elb")
    private = _private_subnet(world, "eu-west-1a", 50, roles)
    public = service()
    lb_of(cloud).ensure_load_balancer("k", public, nodes(world))
    zones = {z["SubnetId"] for z in state(world, public)["lb"]["AvailabilityZones"]}
    assert zones == set(world.subnet_ids)  # internet-facing: public subnets only
    internal = service(annotations={P + "internal": "true"})
    lb_of(cloud).ensure_load_balancer("k", internal, nodes(world))
    zones = {z["SubnetId"] for z in state(world, internal)["lb"]["AvailabilityZones"]}
    assert zones == {private, world.subnet_ids[1]}  # the role tag wins zone a
