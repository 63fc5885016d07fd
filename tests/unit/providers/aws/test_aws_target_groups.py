"""Target-group adoption by name (upstream ``ensureTargetGroup``: ``CreateTargetGroup`` answers
an existing group of the same name and settings, whatever its tags), against moto."""

from __future__ import annotations

from typing import Any

import pytest
from aws_lb import lb_of
from test_aws_loadbalancer import service, state

from kccm.cloudprovider import CloudProviderError
from kccm.emulators.aws import World, clients, node_for
from kccm.providers.aws import AWSCloud


def _other_vpc(world: World) -> str:
    ec2, _ = clients(world.url)
    return str(ec2.create_vpc(CidrBlock="10.250.0.0/16")["Vpc"]["VpcId"])


@pytest.mark.parametrize(
    ("change", "error"),
    [
        pytest.param({}, "", id="same-fixed-settings-untagged-adopted-as-upstream"),
        pytest.param({"HealthCheckPort": "31999"}, "", id="other-health-check-adopted-corrected"),
        pytest.param({"VpcId": _other_vpc}, "VpcId", id="another-vpc-refused"),
        pytest.param({"Port": 31000}, "Port 31000", id="another-port-refused"),
        pytest.param({"Protocol": "UDP"}, "Protocol UDP", id="another-protocol-refused"),
    ],
)
def test_a_group_of_the_wanted_name_is_adopted_only_with_its_fixed_settings(
    cloud: AWSCloud, world: World, change: dict[str, Any], error: str
) -> None:
    svc = service()
    nodes = [node_for(world, i) for i in world.instances]
    lb = lb_of(cloud)
    lb.ensure_load_balancer("k", svc, nodes)
    [group] = state(world, svc)["groups"]
    lb.ensure_load_balancer_deleted("k", svc)
    settings = {
        "Name": group["TargetGroupName"],
        "Protocol": group["Protocol"],
        "Port": group["Port"],
        "VpcId": world.vpc_id,
        "TargetType": "instance",
        "HealthCheckPort": group["HealthCheckPort"],
    }
    settings.update({k: v(world) if callable(v) else v for k, v in change.items()})
    _, elbv2 = clients(world.url)
    made = elbv2.create_target_group(**settings)["TargetGroups"][0]  # no tags at all
    if error:
        with pytest.raises(CloudProviderError, match=f"DuplicateTargetGroupName.*{error}"):
            lb.ensure_load_balancer("k", svc, nodes)
        return
    lb.ensure_load_balancer("k", svc, nodes)
    [adopted] = state(world, svc)["groups"]
    assert adopted["TargetGroupArn"] == made["TargetGroupArn"]
    assert adopted["HealthCheckPort"] == group["HealthCheckPort"]
