"""``[Global] NLBSecurityGroupMode = Managed``: an NLB's own security group, as upstream's
``ensureNLBSecurityGroup`` / ``ensureNLBSecurityGroupRules`` / ``EnsureLoadBalancerDeleted``
manage it, against moto (server mode, as the other aws tests)."""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any

import pytest
from aws_lb import lb_of, nodes, writes
from test_aws_nlb_security import nlb_service

from kccm.cloudprovider import CloudConfigError, default_load_balancer_name
from kccm.emulators.aws import World, clients
from kccm.emulators.aws.readback import group_named, group_rules, node_security_group
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.annotations import ServiceAnnotationError
from kccm.providers.aws.api import AWSAPIError
from kccm.providers.aws.config import load_aws_config
from kccm.providers.aws.nlbgroups import NLB_GROUP_DESCRIPTION, nlb_group_name

P = "service.beta.kubernetes.io/aws-load-balancer-"
CLUSTER = "kubernetes"


@pytest.fixture
def managed(world: World, aws_env: None) -> AWSCloud:
    config = world.cloud_config(APIMaxAttempts="1", NLBSecurityGroupMode="Managed")
    return AWSCloud(load_aws_config(config))


def nlb(world: World, svc: Mapping[str, Any]) -> dict[str, Any]:
    _, elbv2 = clients(world.url)
    found = elbv2.describe_load_balancers(Names=[default_load_balancer_name(svc)])
    return dict(found["LoadBalancers"][0])


def own_group(world: World, svc: Mapping[str, Any]) -> dict[str, Any]:
    group = group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc))
    assert group is not None
    return group


def rules(*ports: int, cidrs: tuple[str, ...] = ("0.0.0.0/0",)) -> set[tuple[Any, ...]]:
    return {("tcp", p, p, c, "") for p in ports for c in cidrs} | {
        ("icmp", 3, 4, c, "") for c in cidrs
    }


# -- naming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "prefix"),
    [
        pytest.param("shop", "web", "k8s-shop-web-", id="short-names"),
        pytest.param("kube-system", "my-long.service", "k8s-kubesyst-mylongse-", id="cut-clean"),
    ],
)
def test_group_name_is_upstreams(namespace: str, name: str, prefix: str) -> None:
    svc = {"metadata": {"name": name, "namespace": namespace, "uid": "u-1"}}
    digest = hashlib.sha256(f"{CLUSTER}{name}{namespace}u-1".encode()).hexdigest()
    assert nlb_group_name(CLUSTER, svc) == prefix + digest[:10]


# -- config ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("managed", id="lower-case"),
        pytest.param("Unmanaged", id="other-word"),
    ],
)
def test_a_mode_other_than_managed_is_a_config_error(world: World, value: str) -> None:
    with pytest.raises(CloudConfigError, match=f"NLBSecurityGroupMode: '{value}' is not"):
        load_aws_config(world.cloud_config(NLBSecurityGroupMode=value))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[Global]\nRegion = eu-west-1\nNLBSecurityGroupMode = Managed\n", id="gcfg"),
        pytest.param("Global:\n  region: eu-west-1\n  nlbSecurityGroupMode: Managed\n", id="yaml"),
    ],
)
def test_the_key_is_read_in_both_formats(text: str) -> None:
    assert load_aws_config(text).global_.nlb_security_group_mode == "Managed"


# -- ensure ----------------------------------------------------------------------------------


def test_create_makes_the_group_with_upstreams_name_description_tags_and_rules(
    managed: AWSCloud, world: World
) -> None:
    svc = nlb_service(loadBalancerSourceRanges=["203.0.113.0/24", "198.51.100.0/24"])
    svc["spec"]["ports"].append({"name": "tls", "port": 443, "protocol": "TCP", "nodePort": 30443})
    svc["metadata"]["annotations"][P + "additional-resource-tags"] = "team=shop"
    lb_of(managed).ensure_load_balancer(CLUSTER, svc, nodes(world))
    group = own_group(world, svc)
    assert group["Description"] == NLB_GROUP_DESCRIPTION
    tags = {t["Key"]: t["Value"] for t in group["Tags"]}
    assert tags[f"kubernetes.io/cluster/{world.cluster_id}"] == "owned"
    assert tags["team"] == "shop"
    cidrs = ("198.51.100.0/24", "203.0.113.0/24")
    assert group_rules(world.url, group["GroupId"]) == rules(80, 443, cidrs=cidrs)
    assert nlb(world, svc)["SecurityGroups"] == [group["GroupId"]]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            {"loadBalancerSourceRanges": ["192.0.2.0/24"]},
            rules(80, cidrs=("192.0.2.0/24",)),
            id="source-ranges",
        ),
        pytest.param(
            {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "nodePort": 30443}]},
            rules(443),
            id="ports",
        ),
    ],
)
def test_rules_follow_the_service(
    managed: AWSCloud, world: World, change: dict[str, Any], expected: set[Any]
) -> None:
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    svc["spec"].update(change)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert group_rules(world.url, own_group(world, svc)["GroupId"]) == expected


def test_an_unchanged_ensure_writes_nothing(managed: AWSCloud, world: World) -> None:
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    before = dict(managed.api.counts())
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert writes(before, managed.api.counts()) == {}


def test_rules_changed_behind_kccms_back_are_put_back(managed: AWSCloud, world: World) -> None:
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    gid = own_group(world, svc)["GroupId"]
    ec2, _ = clients(world.url)
    ec2.revoke_security_group_ingress(
        GroupId=gid,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 80,
                "ToPort": 80,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )
    ec2.authorize_security_group_ingress(
        GroupId=gid,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            }
        ],
    )
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert group_rules(world.url, gid) == rules(80)


def test_the_upstream_ccms_group_is_adopted_not_recreated(managed: AWSCloud, world: World) -> None:
    """A group made by the Go CCM (same name, cluster-owned, its rules) and its NLB: kccm
    writes nothing."""
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    gid = own_group(world, svc)["GroupId"]
    fresh = AWSCloud(load_aws_config(world.cloud_config(NLBSecurityGroupMode="Managed")))
    before = dict(fresh.api.counts())
    lb_of(fresh).ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert writes(before, fresh.api.counts()) == {}
    assert nlb(world, svc)["SecurityGroups"] == [gid]


def test_a_byo_group_is_attached_and_its_rules_left_alone(managed: AWSCloud, world: World) -> None:
    ec2, _ = clients(world.url)
    byo = ec2.create_security_group(GroupName="byo", Description="mine", VpcId=world.vpc_id)
    svc = nlb_service()
    svc["metadata"]["annotations"][P + "security-groups"] = byo["GroupId"]
    lb_of(managed).ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert nlb(world, svc)["SecurityGroups"] == [byo["GroupId"]]
    assert group_rules(world.url, byo["GroupId"]) == set()
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None


def test_switching_to_byo_sets_the_groups_and_deletes_the_managed_one(
    managed: AWSCloud, world: World
) -> None:
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    ec2, _ = clients(world.url)
    byo = ec2.create_security_group(GroupName="byo", Description="mine", VpcId=world.vpc_id)
    svc["metadata"]["annotations"][P + "security-groups"] = byo["GroupId"]
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert nlb(world, svc)["SecurityGroups"] == [byo["GroupId"]]
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None


def test_a_detached_group_aws_still_held_is_deleted_by_a_later_ensure(
    managed: AWSCloud, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upstream ``removeOwnedSecurityGroups`` polls up to 10 min while AWS still holds a
    group the NLB no longer has (``DependencyViolation``); kccm does not block its worker: the
    ensure succeeds (the failure logged, as upstream) and the next ensure deletes the group,
    found by its name (moto never reports DependencyViolation: the first delete is refused
    here)."""
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    ec2, _ = clients(world.url)
    byo = ec2.create_security_group(GroupName="byo", Description="mine", VpcId=world.vpc_id)
    svc["metadata"]["annotations"][P + "security-groups"] = byo["GroupId"]
    real, busy = managed.api.call, [True]

    def call(service: str, operation: str, **params: Any) -> dict[str, Any]:
        if operation == "delete_security_group" and busy[0]:
            raise AWSAPIError(
                "ec2 delete_security_group: DependencyViolation", "DependencyViolation"
            )
        return real(service, operation, **params)

    monkeypatch.setattr(managed.api, "call", call)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert nlb(world, svc)["SecurityGroups"] == [byo["GroupId"]]
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is not None
    busy[0] = False
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None
    counts = dict(managed.api.counts())
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert writes(counts, managed.api.counts()) == {}


def test_an_existing_nlb_without_groups_is_left_without(world: World, aws_env: None) -> None:
    svc = nlb_service()
    plain = AWSCloud(load_aws_config(world.cloud_config()))
    lb_of(plain).ensure_load_balancer(CLUSTER, svc, nodes(world))
    config = world.cloud_config(NLBSecurityGroupMode="Managed")
    managed = AWSCloud(load_aws_config(config))
    before = dict(managed.api.counts())
    lb_of(managed).ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert writes(before, managed.api.counts()) == {}
    assert not nlb(world, svc).get("SecurityGroups")
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None


def test_without_the_mode_an_nlb_gets_no_group(cloud: AWSCloud, world: World) -> None:
    svc = nlb_service()
    lb_of(cloud).ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert not nlb(world, svc).get("SecurityGroups")


def test_without_the_mode_the_security_groups_annotation_is_ignored(
    cloud: AWSCloud, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """Upstream ``ensureNLBSecurityGroup`` reads the annotation only in Managed mode: the
    Service is served (not refused), the NLB gets no group, the group is not touched, the
    Service is left as it was; kccm says so in its log."""
    ec2, _ = clients(world.url)
    byo = ec2.create_security_group(GroupName="byo", Description="mine", VpcId=world.vpc_id)
    svc = nlb_service()
    svc["metadata"]["annotations"][P + "security-groups"] = byo["GroupId"]
    before = copy.deepcopy(svc)
    lb = lb_of(cloud)
    with caplog.at_level(logging.INFO, logger="kccm.providers.aws.nlbgroups"):
        lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
        counts = dict(cloud.api.counts())
        lb.update_load_balancer(CLUSTER, svc, nodes(world))
    assert writes(counts, cloud.api.counts()) == {}
    assert not nlb(world, svc).get("SecurityGroups")
    assert group_rules(world.url, byo["GroupId"]) == set()
    assert svc == before
    ignored = [r for r in caplog.records if "security-groups ignored" in r.getMessage()]
    assert ignored
    assert {r.levelno for r in ignored} == {logging.INFO}


@pytest.mark.parametrize(
    "mode", [pytest.param("", id="unmanaged"), pytest.param("Managed", id="managed")]
)
def test_extra_security_groups_are_refused_in_upstreams_words(
    world: World, aws_env: None, mode: str
) -> None:
    config = world.cloud_config(APIMaxAttempts="1", NLBSecurityGroupMode=mode)
    svc = nlb_service()
    svc["metadata"]["annotations"][P + "extra-security-groups"] = "sg-1"
    lb = lb_of(AWSCloud(load_aws_config(config)))
    expected = (
        'BYO extra security group annotation "service.beta.kubernetes.io/'
        'aws-load-balancer-extra-security-groups" is not supported by NLB'
    )
    with pytest.raises(ServiceAnnotationError, match=re.escape(expected)):
        lb.ensure_load_balancer(CLUSTER, svc, nodes(world))


# -- delete ----------------------------------------------------------------------------------


def test_delete_removes_the_group_and_the_node_rules(managed: AWSCloud, world: World) -> None:
    node_group = node_security_group(world)
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    assert group_rules(world.url, node_group) != set()
    lb.ensure_load_balancer_deleted(CLUSTER, svc)
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None
    assert group_rules(world.url, node_group) == set()


def test_delete_keeps_a_byo_group(managed: AWSCloud, world: World) -> None:
    ec2, _ = clients(world.url)
    tags = [{"Key": f"kubernetes.io/cluster/{world.cluster_id}", "Value": "owned"}]
    byo = ec2.create_security_group(
        GroupName="byo",
        Description="mine",
        VpcId=world.vpc_id,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )["GroupId"]
    svc = nlb_service()
    svc["metadata"]["annotations"][P + "security-groups"] = byo
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    lb.ensure_load_balancer_deleted(CLUSTER, svc)
    assert ec2.describe_security_groups(GroupIds=[byo])["SecurityGroups"]


def test_a_delete_retried_after_the_balancer_went_finds_the_group_by_name(
    managed: AWSCloud, world: World
) -> None:
    """The DependencyViolation retry: the NLB is gone, its group is still there (moto never
    reports DependencyViolation: the state is made by deleting the NLB directly)."""
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    _, elbv2 = clients(world.url)
    elbv2.delete_load_balancer(LoadBalancerArn=nlb(world, svc)["LoadBalancerArn"])
    lb.ensure_load_balancer_deleted(CLUSTER, svc)
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None


@pytest.mark.parametrize(
    "mode_at_delete",
    [pytest.param("Managed", id="still-managed"), pytest.param("", id="mode-turned-off")],
)
def test_a_balancer_gone_with_its_group_left_is_reported_so_the_delete_is_retried(
    managed: AWSCloud, world: World, mode_at_delete: str
) -> None:
    """The service controller calls delete only while ``get_load_balancer`` says the balancer
    exists (upstream ``syncLoadBalancerIfNeeded``): after a delete met DependencyViolation
    (made here by deleting the NLB directly: moto never reports it) the group left must keep
    the answer "exists", or the finalizer goes and the group is never deleted."""
    svc = nlb_service()
    lb_of(managed).ensure_load_balancer(CLUSTER, svc, nodes(world))
    _, elbv2 = clients(world.url)
    elbv2.delete_load_balancer(LoadBalancerArn=nlb(world, svc)["LoadBalancerArn"])
    config = world.cloud_config(APIMaxAttempts="1", NLBSecurityGroupMode=mode_at_delete)
    lb = lb_of(AWSCloud(load_aws_config(config)))
    assert lb.get_load_balancer(CLUSTER, svc) == (None, True)
    lb.ensure_load_balancer_deleted(CLUSTER, svc)
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is None
    assert lb.get_load_balancer(CLUSTER, svc) == (None, False)


def test_a_left_group_the_annotation_names_is_not_the_balancers(
    managed: AWSCloud, world: World
) -> None:
    svc = nlb_service()
    lb = lb_of(managed)
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    gid = own_group(world, svc)["GroupId"]
    _, elbv2 = clients(world.url)
    elbv2.delete_load_balancer(LoadBalancerArn=nlb(world, svc)["LoadBalancerArn"])
    svc["metadata"]["annotations"][P + "security-groups"] = gid
    assert lb.get_load_balancer(CLUSTER, svc) == (None, False)
    lb.ensure_load_balancer_deleted(CLUSTER, svc)
    assert group_named(world.url, world.vpc_id, nlb_group_name(CLUSTER, svc)) is not None
