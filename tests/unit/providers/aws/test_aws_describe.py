"""The aws provider's optional describe calls (issue 27) against moto: an NLB's listeners with
DescribeTargetHealth's verdicts, a Classic ELB's with DescribeInstanceHealth's, and a Node's
instance; every request a read in the ledger."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aws_lb import lb_of, nodes

from kccm.cloudprovider import InstanceDescriber, as_instance_describer
from kccm.emulators.aws import World, clients, node_for
from kccm.providers.aws import AWSCloud

P = "service.beta.kubernetes.io/aws-load-balancer-"


def service(nlb: bool, ports: tuple[tuple[int, int], ...] = ((80, 30080), (443, 30443))) -> Any:
    annotations = {P + "type": "nlb"} if nlb else {}
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": str(uuid.uuid4()),
            "annotations": annotations,
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "nodePort": n} for p, n in ports
            ],
        },
    }


def _writes(cloud: AWSCloud) -> dict[str, int]:
    return dict(cloud.cloud_api_calls().snapshot().writes)


def _stop_first(world: World) -> str:
    ec2, _ = clients(world.url)
    first = next(iter(world.instances))
    ec2.stop_instances(InstanceIds=[first])
    return first


def _nothing(world: World) -> str:
    return ""


@pytest.mark.parametrize("nlb", [pytest.param(True, id="nlb"), pytest.param(False, id="classic")])
@pytest.mark.parametrize(
    "arrange",
    [pytest.param(_nothing, id="all-running"), pytest.param(_stop_first, id="one-stopped")],
)
def test_describe_load_balancer_shows_listeners_and_target_health(
    world: World, cloud: AWSCloud, nlb: bool, arrange: Callable[[World], str]
) -> None:
    svc = service(nlb)
    lb = lb_of(cloud)
    lb.ensure_load_balancer("kubernetes", svc, nodes(world))
    stopped = arrange(world)
    writes = _writes(cloud)
    view = lb.describe_load_balancer("kubernetes", svc)
    assert _writes(cloud) == writes, "describing sends reads only"
    assert view is not None
    assert view.detail["kind"] == ("nlb" if nlb else "classic")
    assert view.state == "active"
    assert [(li.port, li.protocol) for li in view.listeners] == [(80, "TCP"), (443, "TCP")]
    for listener, node_port in zip(view.listeners, (30080, 30443), strict=True):
        got = {t.instance: (t.node, t.port, str(t.health)) for t in listener.targets}
        want = {
            i: (name, node_port, "unhealthy" if i == stopped else "healthy")
            for i, name in world.instances.items()
        }
        assert got == want
        for target in listener.targets:
            assert target.address.startswith("10."), target
            assert bool(target.detail) is (target.instance == stopped), target.detail


@pytest.mark.parametrize("nlb", [pytest.param(True, id="nlb"), pytest.param(False, id="classic")])
def test_no_balancer_is_none(world: World, cloud: AWSCloud, nlb: bool) -> None:
    assert lb_of(cloud).describe_load_balancer("kubernetes", service(nlb)) is None


def _describer(cloud: AWSCloud) -> Any:
    describer: InstanceDescriber | None = as_instance_describer(cloud.instances_v2())
    assert describer is not None
    return describer


def _terminate_first(world: World) -> str:
    ec2, _ = clients(world.url)
    first = next(iter(world.instances))
    ec2.terminate_instances(InstanceIds=[first])
    return first


@pytest.mark.parametrize(
    ("arrange", "with_provider_id", "state", "exists"),
    [
        pytest.param(_nothing, True, "running", True, id="running"),
        pytest.param(_nothing, False, "running", True, id="found-by-name"),
        pytest.param(_stop_first, True, "stopped", True, id="stopped"),
        pytest.param(_terminate_first, True, "terminated", False, id="terminated"),
    ],
)
def test_describe_instance(
    world: World,
    cloud: AWSCloud,
    arrange: Callable[[World], str],
    with_provider_id: bool,
    state: str,
    exists: bool,
) -> None:
    arrange(world)
    first = next(iter(world.instances))
    v2 = _describer(cloud)
    reads = dict(cloud.cloud_api_calls().snapshot().reads)
    view = v2.describe_instance(node_for(world, first, with_provider_id=with_provider_id))
    assert view is not None
    assert (view.state, view.exists) == (state, exists)
    assert view.provider_id.endswith(first)
    assert view.detail["private_dns_name"] == world.instances[first]
    after = dict(cloud.cloud_api_calls().snapshot().reads)
    assert sum(after.values()) - sum(reads.values()) == 1, "one DescribeInstances"


def test_describe_instance_of_an_unknown_node_does_not_exist(cloud: AWSCloud) -> None:
    node = {"metadata": {"name": "ip-10-9-9-9.eu-west-1.compute.internal"}, "spec": {}}
    view = _describer(cloud).describe_instance(node)
    assert view is not None
    assert view.exists is False
