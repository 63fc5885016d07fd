"""The node security group admits an NLB's clients and health checks, as upstream's
``updateInstanceSecurityGroupsForNLB`` arranges it, against moto."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from aws_lb import lb_of, nodes

from kccm.cloudprovider import CloudProviderError, default_load_balancer_name
from kccm.emulators.aws import World, clients
from kccm.emulators.aws.readback import group_rules, node_security_group
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config

P = "service.beta.kubernetes.io/aws-load-balancer-"
CLIENT, HEALTH, MTU = (f"kubernetes.io/rule/nlb/{kind}" for kind in ("client", "health", "mtu"))


def nlb_service(node_port: int = 30080, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": {P + "type": "nlb"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": node_port}],
            **spec,
        },
    }


def subnet_cidrs(world: World) -> list[str]:
    ec2, _ = clients(world.url)
    subnets = ec2.describe_subnets(SubnetIds=world.subnet_ids)["Subnets"]
    return sorted(s["CidrBlock"] for s in subnets)


def ec2_writes(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {
        k: n - before.get(k, 0)
        for k, n in after.items()
        if k.startswith("ec2:") and n != before.get(k, 0) and ":describe_" not in k
    }


@pytest.fixture
def node_group(world: World) -> str:
    return node_security_group(world)


def test_cluster_policy_opens_the_node_port_to_everyone_with_upstreams_descriptions(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = nlb_service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    # the health rule is left out: the client rule covers it (upstream's shortcut)
    assert group_rules(world.url, node_group) == {
        ("tcp", 30080, 30080, "0.0.0.0/0", f"{CLIENT}={name}"),
        ("icmp", 3, 4, "0.0.0.0/0", MTU),
    }


def test_local_policy_and_source_ranges_add_the_health_rule_from_the_subnets(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = nlb_service(
        externalTrafficPolicy="Local",
        healthCheckNodePort=32100,
        loadBalancerSourceRanges=["203.0.113.0/24"],
    )
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    assert group_rules(world.url, node_group) == {
        ("tcp", 30080, 30080, "203.0.113.0/24", f"{CLIENT}={name}"),
        ("icmp", 3, 4, "203.0.113.0/24", MTU),
        *(("tcp", 32100, 32100, cidr, f"{HEALTH}={name}") for cidr in subnet_cidrs(world)),
    }


def test_changed_ranges_replace_the_rules_and_a_second_ensure_writes_nothing(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = nlb_service(loadBalancerSourceRanges=["203.0.113.0/24"])
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    svc["spec"]["loadBalancerSourceRanges"] = ["198.51.100.0/24"]
    lb.ensure_load_balancer("k", svc, nodes(world))
    name = default_load_balancer_name(svc)
    assert group_rules(world.url, node_group) == {
        ("tcp", 30080, 30080, "198.51.100.0/24", f"{CLIENT}={name}"),
        ("icmp", 3, 4, "198.51.100.0/24", MTU),
        *(("tcp", 30080, 30080, cidr, f"{HEALTH}={name}") for cidr in subnet_cidrs(world)),
    }
    before = dict(cloud.api.counts())
    lb.ensure_load_balancer("k", svc, nodes(world))
    lb.update_load_balancer("k", svc, nodes(world))
    assert ec2_writes(before, cloud.api.counts()) == {}


def test_rules_the_upstream_ccm_wrote_are_recognised(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    svc = nlb_service()
    name = default_load_balancer_name(svc)
    ec2, _ = clients(world.url)
    ec2.authorize_security_group_ingress(
        GroupId=node_group,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 30080,
                "ToPort": 30080,
                "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": f"{CLIENT}={name}"}],
            },
            {
                "IpProtocol": "icmp",
                "FromPort": 3,
                "ToPort": 4,
                "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": MTU}],
            },
        ],
    )
    before = dict(cloud.api.counts())
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert ec2_writes(before, cloud.api.counts()) == {}


def test_delete_removes_the_rules_and_keeps_the_mtu_rule_another_nlb_needs(
    cloud: AWSCloud, world: World, node_group: str
) -> None:
    first, second = nlb_service(30080), nlb_service(30081)
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", first, nodes(world))
    lb.ensure_load_balancer("k", second, nodes(world))
    lb.ensure_load_balancer_deleted("k", first)
    assert group_rules(world.url, node_group) == {
        ("tcp", 30081, 30081, "0.0.0.0/0", f"{CLIENT}={default_load_balancer_name(second)}"),
        ("icmp", 3, 4, "0.0.0.0/0", MTU),
    }
    lb.ensure_load_balancer_deleted("k", second)
    assert group_rules(world.url, node_group) == set()


def test_rules_of_others_are_never_touched(cloud: AWSCloud, world: World, node_group: str) -> None:
    ec2, _ = clients(world.url)
    ssh = {
        "IpProtocol": "tcp",
        "FromPort": 22,
        "ToPort": 22,
        "IpRanges": [{"CidrIp": "10.0.0.0/8", "Description": "ssh"}],
    }
    ec2.authorize_security_group_ingress(GroupId=node_group, IpPermissions=[ssh])
    svc = nlb_service()
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    lb.ensure_load_balancer_deleted("k", svc)
    assert group_rules(world.url, node_group) == {("tcp", 22, 22, "10.0.0.0/8", "ssh")}


def test_disable_security_group_ingress_is_honoured(
    world: World, aws_env: None, node_group: str
) -> None:
    config = world.cloud_config(DisableSecurityGroupIngress="true")
    cloud = AWSCloud(load_aws_config(config))
    lb_of(cloud).ensure_load_balancer("k", nlb_service(), nodes(world))
    assert group_rules(world.url, node_group) == set()


def test_the_node_group_is_the_one_tagged_for_the_cluster(cloud: AWSCloud, world: World) -> None:
    ec2, _ = clients(world.url)
    other = ec2.create_security_group(GroupName="other", Description="x", VpcId=world.vpc_id)[
        "GroupId"
    ]
    tagged = node_security_group(world)
    for instance in world.instances:
        ec2.modify_instance_attribute(InstanceId=instance, Groups=[other, tagged])
    svc = nlb_service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert len(group_rules(world.url, tagged)) == 2
    assert group_rules(world.url, other) == set()


def test_two_untagged_groups_are_an_error_naming_the_instance(
    cloud: AWSCloud, world: World
) -> None:
    ec2, _ = clients(world.url)
    groups = [
        ec2.create_security_group(GroupName=n, Description=n, VpcId=world.vpc_id)["GroupId"]
        for n in ("a", "b")
    ]
    instance = next(iter(world.instances))
    ec2.modify_instance_attribute(InstanceId=instance, Groups=groups)
    with pytest.raises(CloudProviderError, match=f"Multiple untagged security groups.*{instance}"):
        lb_of(cloud).ensure_load_balancer("k", nlb_service(), nodes(world))
