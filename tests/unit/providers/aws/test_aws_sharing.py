"""Shared NLBs (issue 39 item 2) against moto: one NLB per share group, a listener and a
target group per member port, owned by the member; the last member's delete leaves nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aws_lb import lb_of, nodes, writes

from kccm.cloudprovider import (
    ANNOTATION_SHARE_GROUP,
    InvalidServiceConfig,
    ShareGroup,
    as_balancer_sharer,
)
from kccm.emulators.aws import World, clients, leftovers
from kccm.emulators.aws.readback import group_rules, node_security_group
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.sharing import (
    SHARE_GROUP_TAG,
    group_balancer_name,
    group_balancer_of,
    member_rule_owner,
    shared_settings,
)

P = "service.beta.kubernetes.io/aws-load-balancer-"
GROUP = ShareGroup("shop", "front")
CLUSTER = "k"


def member(name: str, ports: tuple[tuple[int, int], ...], **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": GROUP.namespace,
            "uid": str(uuid.uuid4()),
            "annotations": {
                P + "type": "nlb",
                ANNOTATION_SHARE_GROUP: GROUP.name,
                **{P + k.replace("_", "-"): v for k, v in annotations.items()},
            },
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "nodePort": n} for p, n in ports
            ],
        },
    }


def listeners(world: World) -> dict[int, dict[str, str]]:
    """The group NLB's listeners: port -> their tags (and the target group's name)."""
    _, elbv2 = clients(world.url)
    name = group_balancer_name(CLUSTER, GROUP)
    lb = elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0]
    found = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    out = {}
    for li in found:
        tags = elbv2.describe_tags(ResourceArns=[li["ListenerArn"]])["TagDescriptions"][0]
        arn = li["DefaultActions"][0]["TargetGroupArn"]
        group = elbv2.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"][0]
        out[li["Port"]] = {
            **{t["Key"]: t["Value"] for t in tags["Tags"]},
            "group": group["TargetGroupName"],
        }
    return out


def member_rules(world: World, group_id: str) -> set[str]:
    """The descriptions of the node group's rules that name the group's NLB."""
    name = group_balancer_name(CLUSTER, GROUP)
    return {r[4] for r in group_rules(world.url, group_id) if name in r[4]}


# -- naming and settings (no AWS) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "group"),
    [
        pytest.param("k", ShareGroup("shop", "front"), id="short"),
        pytest.param("k", ShareGroup("a-very-long-namespace", "a-very-long-group-name"), id="long"),
        pytest.param("", ShareGroup("default", "x"), id="no-cluster-name"),
    ],
)
def test_the_group_nlb_name_is_deterministic_short_and_never_a_service_s(
    cluster: str, group: ShareGroup
) -> None:
    name = group_balancer_name(cluster, group)
    assert name == group_balancer_name(cluster, group)
    assert len(name) <= 32
    assert name.startswith("k8s-")
    assert not name.endswith("-")
    assert name.replace("-", "").isalnum()


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param(("k", ShareGroup("a", "b")), ("j", ShareGroup("a", "b")), id="cluster"),
        pytest.param(("k", ShareGroup("a", "b")), ("k", ShareGroup("b", "b")), id="namespace"),
        pytest.param(("k", ShareGroup("a", "bc")), ("k", ShareGroup("ab", "c")), id="boundary"),
        pytest.param(("k", ShareGroup("a", "b-c")), ("k", ShareGroup("a", "bc")), id="hyphen"),
    ],
)
def test_different_groups_get_different_nlbs(
    one: tuple[str, ShareGroup], other: tuple[str, ShareGroup]
) -> None:
    assert group_balancer_name(*one) != group_balancer_name(*other)


@pytest.mark.parametrize(
    ("one", "other", "alike"),
    [
        pytest.param({}, {"internal": "false"}, True, id="internal-unset-is-false"),
        pytest.param({"internal": "true"}, {"internal": "0.0.0.0/0"}, True, id="internal-any"),
        pytest.param({}, {"internal": "true"}, False, id="scheme-differs"),
        pytest.param({}, {"cross_zone_load_balancing_enabled": "False"}, True, id="cross-zone"),
        pytest.param({"subnets": "b, a"}, {"subnets": "a,b"}, True, id="subnets-in-any-order"),
        pytest.param({"subnets": "a"}, {"subnets": "b"}, False, id="subnets-differ"),
        pytest.param({"eip_allocations": "e1,e2"}, {}, False, id="eips"),
        pytest.param({"security_groups": "sg-1"}, {}, False, id="security-groups"),
        pytest.param({"access_log_enabled": "t"}, {"access_log_enabled": "true"}, True, id="log"),
        pytest.param({}, {"healthcheck_interval": "10"}, True, id="per-listener-may-differ"),
        pytest.param({}, {"type": ""}, True, id="type-left-to-the-ensure"),
    ],
)
def test_sharing_settings_compare_what_is_per_balancer(
    one: dict[str, str], other: dict[str, str], alike: bool
) -> None:
    first = shared_settings(member("a", ((80, 30080),), **one))
    second = shared_settings(member("b", ((443, 30443),), **other))
    assert (first == second) is alike


def test_source_ranges_may_differ_within_a_group() -> None:
    first = member("a", ((80, 30080),))
    second = member("b", ((443, 30443),))
    second["spec"]["loadBalancerSourceRanges"] = ["10.0.0.0/8"]
    assert shared_settings(first) == shared_settings(second)


# -- against moto ----------------------------------------------------------------------------


def test_two_members_share_one_nlb_each_with_its_own_listeners(
    cloud: AWSCloud, world: World
) -> None:
    node_group = node_security_group(world)
    lb = as_balancer_sharer(lb_of(cloud))
    assert lb is not None
    web, api = member("web", ((80, 30080),)), member("api", ((443, 30443), (8443, 30843)))
    one = lb.ensure_shared_load_balancer(CLUSTER, GROUP, web, nodes(world))
    two = lb.ensure_shared_load_balancer(CLUSTER, GROUP, api, nodes(world))
    assert one == two
    assert one.ingress[0].hostname
    found = leftovers(world.url, world.vpc_id)
    assert found["load_balancers"] == [group_balancer_name(CLUSTER, GROUP)]
    assert len(found["target_groups"]) == 3
    owners = {port: tags["kubernetes.io/service-name"] for port, tags in listeners(world).items()}
    assert owners == {80: "shop/web", 443: "shop/api", 8443: "shop/api"}
    assert {tags[SHARE_GROUP_TAG] for tags in listeners(world).values()} == {"shop/front"}
    assert lb.get_shared_load_balancer(CLUSTER, GROUP, web) == (one, True)
    name = group_balancer_name(CLUSTER, GROUP)
    assert {d.rsplit("=", 1)[1] for d in member_rules(world, node_group)} >= {
        member_rule_owner(name, "shop/web"),
        member_rule_owner(name, "shop/api"),
    }

    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, web)
    assert set(listeners(world)) == {443, 8443}
    assert lb.get_shared_load_balancer(CLUSTER, GROUP, web) == (None, False)
    assert lb.get_shared_load_balancer(CLUSTER, GROUP, api) == (one, True)
    assert len(leftovers(world.url, world.vpc_id)["target_groups"]) == 2
    assert not any("shop/web" in d for d in member_rules(world, node_group))

    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)
    assert leftovers(world.url, world.vpc_id) == {
        "load_balancers": [],
        "target_groups": [],
        "routes": [],
    }
    assert member_rules(world, node_group) == set()
    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)  # idempotent


def test_an_unchanged_member_makes_no_write_and_a_changed_one_only_its_own(
    cloud: AWSCloud, world: World
) -> None:
    node_security_group(world)
    lb = lb_of(cloud)
    web, api = member("web", ((80, 30080),)), member("api", ((443, 30443),))
    for svc in (web, api):
        lb.ensure_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
    before = dict(cloud.api.counts())
    for svc in (web, api):  # a restart: everything read, nothing written
        lb.ensure_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
        lb.update_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
    assert writes(before, cloud.api.counts()) == {}
    theirs = listeners(world)[443]
    api["spec"]["ports"][0]["nodePort"] = 30444
    lb.update_shared_load_balancer(CLUSTER, GROUP, web, nodes(world, 1))
    assert listeners(world)[443] == theirs  # web's node change leaves api's listener
    lb.ensure_shared_load_balancer(CLUSTER, GROUP, api, nodes(world))
    assert listeners(world)[443]["group"] != theirs["group"]  # a new node port: a new group
    for svc in (web, api):
        lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)
    assert leftovers(world.url, world.vpc_id)["target_groups"] == []


def test_a_listener_of_another_on_a_member_s_port_is_refused_and_left(
    cloud: AWSCloud, world: World
) -> None:
    lb = lb_of(cloud)
    web = member("web", ((80, 30080),))
    lb.ensure_shared_load_balancer(CLUSTER, GROUP, web, nodes(world))
    thief = member("thief", ((80, 30081),))
    with pytest.raises(InvalidServiceConfig, match="port 80 is a listener of shop/web") as err:
        lb.ensure_shared_load_balancer(CLUSTER, GROUP, thief, nodes(world))
    assert err.value.key == ANNOTATION_SHARE_GROUP
    assert listeners(world)[80]["kubernetes.io/service-name"] == "shop/web"
    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, thief)
    assert set(listeners(world)) == {80}  # the refused one owned nothing: the NLB stays
    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, web)
    assert leftovers(world.url, world.vpc_id)["load_balancers"] == []


def test_a_classic_elb_service_cannot_share(cloud: AWSCloud, world: World) -> None:
    classic = member("old", ((80, 30080),))
    del classic["metadata"]["annotations"][P + "type"]
    with pytest.raises(InvalidServiceConfig, match="needs an NLB") as err:
        lb_of(cloud).ensure_shared_load_balancer(CLUSTER, GROUP, classic, nodes(world))
    assert err.value.key == ANNOTATION_SHARE_GROUP
    assert leftovers(world.url, world.vpc_id)["load_balancers"] == []


def test_a_service_joining_a_group_gives_up_its_own_nlb(cloud: AWSCloud, world: World) -> None:
    lb = lb_of(cloud)
    svc = member("web", ((80, 30080),))
    del svc["metadata"]["annotations"][ANNOTATION_SHARE_GROUP]
    lb.ensure_load_balancer(CLUSTER, svc, nodes(world))
    svc["metadata"]["annotations"][ANNOTATION_SHARE_GROUP] = GROUP.name
    lb.ensure_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
    found = leftovers(world.url, world.vpc_id)
    assert found["load_balancers"] == [group_balancer_name(CLUSTER, GROUP)]
    assert len(found["target_groups"]) == 1
    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)
    assert leftovers(world.url, world.vpc_id)["load_balancers"] == []


# -- leaving a group -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hostname", "balancer"),
    [
        pytest.param(
            "k8s-shop-front-0123abcdef-1.eu-west-1.elb.amazonaws.com",
            "k8s-shop-front-0123abcdef",
            id="moto",
        ),
        pytest.param(
            "k8s-shop-front-0123abcdef-9f8e7d6c5b4a3921.elb.eu-west-1.amazonaws.com",
            "k8s-shop-front-0123abcdef",
            id="aws",
        ),
        pytest.param(
            "internal-k8s-shop-front-0123abcdef-9f8e.elb.eu-west-1.amazonaws.com",
            "k8s-shop-front-0123abcdef",
            id="internal",
        ),
        pytest.param(
            "a0123456789abcdef0123456789abcde-9f8e.elb.eu-west-1.amazonaws.com", "", id="own-nlb"
        ),
        pytest.param("k8s-shop-front-nothex-1.elb.amazonaws.com", "", id="not-a-group-hash"),
        pytest.param("", "", id="unpublished"),
    ],
)
def test_the_group_nlb_a_hostname_names(hostname: str, balancer: str) -> None:
    assert group_balancer_of(hostname) == balancer


def published_on(svc: dict[str, Any], hostname: str) -> dict[str, Any]:
    svc["status"] = {"loadBalancer": {"ingress": [{"hostname": hostname}]}}
    return svc


def test_a_service_leaving_its_group_takes_its_listeners_along(
    cloud: AWSCloud, world: World
) -> None:
    lb = lb_of(cloud)
    web, api = member("web", ((80, 30080),)), member("api", ((443, 30443),))
    for svc in (web, api):
        status = lb.ensure_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
    del published_on(web, status.ingress[0].hostname)["metadata"]["annotations"][
        ANNOTATION_SHARE_GROUP
    ]
    own = lb.ensure_load_balancer(CLUSTER, web, nodes(world))
    assert own != status
    assert set(listeners(world)) == {443}
    assert len(leftovers(world.url, world.vpc_id)["target_groups"]) == 2
    lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)
    lb.ensure_load_balancer_deleted(CLUSTER, web)
    assert leftovers(world.url, world.vpc_id) == {
        "load_balancers": [],
        "target_groups": [],
        "routes": [],
    }


@pytest.mark.parametrize("to", ["deletion", "another-group"])
def test_a_service_gone_from_its_group_before_an_ensure_still_leaves_it(
    cloud: AWSCloud, world: World, to: str
) -> None:
    lb = lb_of(cloud)
    web = member("web", ((80, 30080),))
    status = lb.ensure_shared_load_balancer(CLUSTER, GROUP, web, nodes(world))
    published_on(web, status.ingress[0].hostname)
    if to == "deletion":
        del web["metadata"]["annotations"][ANNOTATION_SHARE_GROUP]
        lb.ensure_load_balancer_deleted(CLUSTER, web)
        assert leftovers(world.url, world.vpc_id)["load_balancers"] == []
    else:
        other = ShareGroup(GROUP.namespace, "back")
        web["metadata"]["annotations"][ANNOTATION_SHARE_GROUP] = other.name
        lb.ensure_shared_load_balancer(CLUSTER, other, web, nodes(world))
        found = leftovers(world.url, world.vpc_id)
        assert found["load_balancers"] == [group_balancer_name(CLUSTER, other)]
        assert len(found["target_groups"]) == 1
        lb.ensure_shared_load_balancer_deleted(CLUSTER, other, web)
    assert leftovers(world.url, world.vpc_id)["target_groups"] == []


def test_explain_describes_the_group_nlb_for_a_member(cloud: AWSCloud, world: World) -> None:
    lb = lb_of(cloud)
    web, api = member("web", ((80, 30080),)), member("api", ((443, 30443),))
    for svc in (web, api):
        lb.ensure_shared_load_balancer(CLUSTER, GROUP, svc, nodes(world))
    view = lb.describe_load_balancer(CLUSTER, web)
    assert view.name == group_balancer_name(CLUSTER, GROUP)
    assert sorted(li.port for li in view.listeners) == [80, 443]
    for svc in (web, api):
        lb.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)
    assert lb.describe_load_balancer(CLUSTER, web) is None
