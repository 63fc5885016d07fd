"""The fake's optional describe calls (issue 27): listeners and targets with the health a test
sets, the machine of a Node; each is one read in the ledger and goes through the gate."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import (
    BalancerView,
    InstanceView,
    NodeAddress,
    TargetHealth,
    TargetView,
    as_instance_describer,
    as_load_balancer_describer,
)
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.conformance import make_node, make_service

SERVICE = make_service("web", ports=(80, 443))
NODES = [make_node("a"), make_node("b")]


def _cloud() -> FakeCloud:
    cloud = FakeCloud()
    for name, ip in (("a", "10.0.0.1"), ("b", "10.0.0.2")):
        cloud.add_instance(FakeInstance(name, addresses=(NodeAddress("InternalIP", ip),)))
    return cloud


def _healthy(cloud: FakeCloud) -> None:
    pass


def _b_unhealthy(cloud: FakeCloud) -> None:
    cloud.set_target_health("b", TargetHealth.UNHEALTHY, "connect refused")


def _b_shut_down(cloud: FakeCloud) -> None:
    cloud.set_shutdown("b")


def _b_gone(cloud: FakeCloud) -> None:
    cloud.remove_instance("b")


def _b_set_then_reset(cloud: FakeCloud) -> None:
    cloud.set_target_health("b", "unknown", "draining")
    cloud.set_target_health("b", None)


@pytest.mark.parametrize(
    ("arrange", "b_health", "b_detail"),
    [
        pytest.param(_healthy, "healthy", "", id="all-healthy"),
        pytest.param(_b_unhealthy, "unhealthy", "connect refused", id="set-unhealthy"),
        pytest.param(_b_shut_down, "unhealthy", "instance is shut down", id="shut-down"),
        pytest.param(_b_gone, "unhealthy", "no such instance", id="instance-gone"),
        pytest.param(_b_set_then_reset, "healthy", "", id="reset-to-default"),
    ],
)
async def test_describe_load_balancer_shows_listeners_targets_and_health(
    arrange: Callable[[FakeCloud], None], b_health: str, b_detail: str
) -> None:
    cloud = _cloud()
    await cloud.ensure_load_balancer("k", SERVICE, NODES)
    arrange(cloud)
    before = cloud.cloud_api_calls().snapshot()
    view = await cloud.describe_load_balancer("k", SERVICE)
    assert isinstance(view, BalancerView)
    assert view.state == "active"
    assert [(lst.port, lst.protocol) for lst in view.listeners] == [(80, "TCP"), (443, "TCP")]
    for listener, node_port in zip(view.listeners, (30000, 30001), strict=True):
        a, b = listener.targets
        assert a == TargetView("a", "fake://a", "10.0.0.1", node_port, TargetHealth.HEALTHY)
        assert (b.node, b.port, b.health, b.detail) == ("b", node_port, b_health, b_detail)
    after = cloud.cloud_api_calls().snapshot()
    assert after.reads["describe_load_balancer"] == before.reads["describe_load_balancer"] + 1
    assert dict(after.writes) == dict(before.writes), "describe changes nothing"


async def test_describe_load_balancer_without_a_balancer_is_none() -> None:
    assert await _cloud().describe_load_balancer("k", SERVICE) is None


@pytest.mark.parametrize(
    ("arrange", "node", "want"),
    [
        pytest.param(
            _healthy,
            make_node("a"),
            InstanceView(
                "fake://a",
                True,
                "running",
                {"instance_type": "fake.small", "zone": "fake-zone-a", "region": "fake-region"},
            ),
            id="running",
        ),
        pytest.param(_b_shut_down, make_node("b", provider_id="fake://b"), "shutdown", id="off"),
        pytest.param(
            _healthy,
            make_node("ghost", provider_id="fake://ghost"),
            InstanceView("fake://ghost", exists=False),
            id="gone",
        ),
    ],
)
async def test_describe_instance(
    arrange: Callable[[FakeCloud], None], node: dict[str, object], want: InstanceView | str
) -> None:
    cloud = _cloud()
    arrange(cloud)
    view = await cloud.describe_instance(node)
    assert view is not None
    if isinstance(want, str):
        assert view.state == want
    else:
        assert view == want
        assert view.to_dict()["exists"] is want.exists


async def test_describe_calls_go_through_the_gate_and_are_detected() -> None:
    cloud = _cloud()
    await cloud.ensure_load_balancer("k", SERVICE, NODES)
    assert as_load_balancer_describer(cloud) is cloud
    assert as_instance_describer(cloud) is cloud
    gated = GatedCloud(cloud, CallGate(registry=CollectorRegistry()))
    lb, v2 = gated.load_balancer(), gated.instances_v2()
    assert lb is not None
    assert v2 is not None
    assert lb.can_describe
    assert v2.can_describe
    view = await lb.describe_load_balancer("k", SERVICE)
    assert view is not None
    assert view.to_dict()["listeners"][0]["targets"][0]["health"] == "healthy"
    instance = await v2.describe_instance(make_node("a"))
    assert instance is not None
    assert instance.state == "running"
    assert "describe_load_balancer" in cloud.calls
    assert "describe_instance" in cloud.calls
