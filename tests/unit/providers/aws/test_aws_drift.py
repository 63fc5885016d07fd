"""Read-compare-write: an unchanged NLB costs no write, one changed behind kccm's back is put
back by the next ensure, a deleted one is created again under the same name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_lb import lb_of, nodes
from test_aws_loadbalancer import P, service, state

from kccm.cloudprovider import CloudProviderError, default_load_balancer_name
from kccm.emulators.aws import World, clients
from kccm.providers.aws import AWSCloud

Drift = Callable[[Any, dict[str, Any]], None]


def _listener(elbv2: Any, lb: dict[str, Any], port: int) -> dict[str, Any]:
    listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    return next(li for li in listeners if li["Port"] == port)


def delete_listener(elbv2: Any, lb: dict[str, Any]) -> None:
    elbv2.delete_listener(ListenerArn=_listener(elbv2, lb, 443)["ListenerArn"])


def delete_listener_and_group(elbv2: Any, lb: dict[str, Any]) -> None:
    listener = _listener(elbv2, lb, 443)
    elbv2.delete_listener(ListenerArn=listener["ListenerArn"])
    elbv2.delete_target_group(TargetGroupArn=listener["DefaultActions"][0]["TargetGroupArn"])


def change_health_check(elbv2: Any, lb: dict[str, Any]) -> None:
    arn = _listener(elbv2, lb, 80)["DefaultActions"][0]["TargetGroupArn"]
    elbv2.modify_target_group(
        TargetGroupArn=arn,
        HealthCheckPort="31999",
        HealthyThresholdCount=7,
        UnhealthyThresholdCount=7,
    )


def deregister_a_target(elbv2: Any, lb: dict[str, Any]) -> None:
    arn = _listener(elbv2, lb, 80)["DefaultActions"][0]["TargetGroupArn"]
    target = elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"][0]
    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[target["Target"]])


def turn_cross_zone_on(elbv2: Any, lb: dict[str, Any]) -> None:
    elbv2.modify_load_balancer_attributes(
        LoadBalancerArn=lb["LoadBalancerArn"],
        Attributes=[{"Key": "load_balancing.cross_zone.enabled", "Value": "true"}],
    )


def remove_the_service_tag(elbv2: Any, lb: dict[str, Any]) -> None:
    elbv2.remove_tags(ResourceArns=[lb["LoadBalancerArn"]], TagKeys=["kubernetes.io/service-name"])


def point_the_listener_elsewhere(elbv2: Any, lb: dict[str, Any]) -> None:
    listener = _listener(elbv2, lb, 80)
    other = _listener(elbv2, lb, 443)["DefaultActions"]
    elbv2.modify_listener(ListenerArn=listener["ListenerArn"], DefaultActions=other)


def delete_the_balancer(elbv2: Any, lb: dict[str, Any]) -> None:
    elbv2.delete_load_balancer(LoadBalancerArn=lb["LoadBalancerArn"])


DRIFTS = [
    pytest.param(delete_listener, id="listener-deleted"),
    pytest.param(delete_listener_and_group, id="listener-and-target-group-deleted"),
    pytest.param(change_health_check, id="health-check-changed"),
    pytest.param(deregister_a_target, id="target-deregistered"),
    pytest.param(turn_cross_zone_on, id="attribute-changed"),
    pytest.param(remove_the_service_tag, id="tag-removed"),
    pytest.param(point_the_listener_elsewhere, id="listener-forwards-elsewhere"),
    pytest.param(delete_the_balancer, id="balancer-deleted"),
]


@pytest.mark.parametrize("drift", DRIFTS)
def test_the_next_ensure_repairs_drift(cloud: AWSCloud, world: World, drift: Drift) -> None:
    svc = service(((80, 30080), (443, 30443)))
    status = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    wanted = _comparable(state(world, svc))
    _, elbv2 = clients(world.url)
    name = default_load_balancer_name(svc)
    drift(elbv2, elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0])
    assert _comparable(_state_or_none(world, svc)) != wanted  # the drift is real
    repaired = lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert _comparable(state(world, svc)) == wanted
    if drift is not delete_the_balancer:
        assert repaired == status
    before = cloud.cloud_api_calls().snapshot()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    assert cloud.cloud_api_calls().snapshot().since(before).writes == {}


@pytest.mark.parametrize("drift", [d for d in DRIFTS if d.id != "balancer-deleted"])
def test_an_update_repairs_drift_with_the_whole_ensure(
    cloud: AWSCloud, world: World, drift: Drift
) -> None:
    """Upstream ``UpdateLoadBalancer`` runs ``EnsureLoadBalancer`` for an NLB, so a Node change
    repairs drift too; unchanged, it still writes nothing."""
    svc = service(((80, 30080), (443, 30443)))
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    wanted = _comparable(state(world, svc))
    _, elbv2 = clients(world.url)
    name = default_load_balancer_name(svc)
    drift(elbv2, elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0])
    assert _comparable(state(world, svc)) != wanted  # the drift is real
    lb_of(cloud).update_load_balancer("k", svc, nodes(world))
    assert _comparable(state(world, svc)) == wanted
    before = cloud.cloud_api_calls().snapshot()
    lb_of(cloud).update_load_balancer("k", svc, nodes(world))
    assert cloud.cloud_api_calls().snapshot().since(before).writes == {}


def test_an_update_of_a_deleted_nlb_fails_and_creates_nothing(
    cloud: AWSCloud, world: World
) -> None:
    """Upstream: "Load balancer not found"; the service controller's next ensure re-creates."""
    svc = service(((80, 30080),))
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    _, elbv2 = clients(world.url)
    name = default_load_balancer_name(svc)
    delete_the_balancer(elbv2, elbv2.describe_load_balancers(Names=[name])["LoadBalancers"][0])
    with pytest.raises(CloudProviderError, match=f"load balancer {name} of .* not found"):
        lb_of(cloud).update_load_balancer("k", svc, nodes(world))
    assert _state_or_none(world, svc) is None


def _state_or_none(world: World, svc: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return state(world, svc)
    except Exception:  # the balancer is gone
        return None


def _comparable(found: dict[str, Any] | None) -> Any:
    """Everything kccm sets, without the ARNs and names AWS makes up."""
    if found is None:
        return None
    hc_keys = ("HealthCheckPort", "HealthCheckProtocol", "HealthyThresholdCount", "Port")
    return {
        "name": found["lb"]["LoadBalancerName"],
        "listeners": found["listeners"],
        "targets": found["targets"],
        "groups": sorted(tuple(g[k] for k in hc_keys) for g in found["groups"]),
        "tags": found["tags"],
        "cross_zone": found["attributes"]["load_balancing.cross_zone.enabled"],
    }


def test_a_changed_config_reaches_an_existing_balancer(
    cloud: AWSCloud, world: World, aws_env: None
) -> None:
    from kccm.providers.aws.config import load_aws_config

    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    shared = AWSCloud(
        load_aws_config(
            world.cloud_config(
                APIMaxAttempts="1", ClusterServiceLoadBalancerHealthProbeMode="Shared"
            )
        )
    )
    lb_of(shared).ensure_load_balancer("k", svc, nodes(world))
    [group] = state(world, svc)["groups"]
    assert (group["HealthCheckProtocol"], group["HealthCheckPort"]) == ("HTTP", "10256")
    assert len(state(world, svc)["groups"]) == 1  # the old group is gone


def test_changes_aws_cannot_make_are_reported_naming_the_annotation(
    cloud: AWSCloud, world: World
) -> None:
    svc = service()
    lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    svc["metadata"]["annotations"][P + "internal"] = "true"
    svc["metadata"]["annotations"][P + "subnets"] = world.subnet_ids[0]
    svc["metadata"]["annotations"][P + "healthcheck-healthy-threshold"] = "6"
    with pytest.raises(Exception, match=r"aws-load-balancer-internal.*aws-load-balancer-subnets"):
        lb_of(cloud).ensure_load_balancer("k", svc, nodes(world))
    found = state(world, svc)
    assert found["lb"]["Scheme"] == "internet-facing"
    assert found["groups"][0]["HealthyThresholdCount"] == 6  # the rest was applied


def test_no_nlb_is_created_where_a_classic_elb_serves_the_service(
    cloud: AWSCloud, world: World
) -> None:
    """A Service served by a Classic ELB (no type annotation) that then asks for an NLB, before
    any hostname was published (so upstream's hostname check cannot see it): the NLB side's
    ``classic_exists`` hook refuses the type change, naming the annotation."""
    svc = service()
    del svc["metadata"]["annotations"][P + "type"]
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes(world))
    svc["metadata"]["annotations"][P + "type"] = "nlb"
    with pytest.raises(
        Exception, match=r"annotation service\.beta\.kubernetes\.io/aws-load-balancer-type"
    ):
        lb.ensure_load_balancer("k", svc, nodes(world))
    _, elbv2 = clients(world.url)
    names = [b["LoadBalancerName"] for b in elbv2.describe_load_balancers()["LoadBalancers"]]
    assert default_load_balancer_name(svc) not in names
    assert lb.classic.describe(default_load_balancer_name(svc)) is not None  # left serving
