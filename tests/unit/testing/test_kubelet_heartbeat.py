"""KubeletHeartbeat: the Lease a kubelet renews, owned by its Node, renewed on the clock until
stopped (on the in-memory kube client and a fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kccm.kube.fake import FakeKube
from kccm.kube.resources import LEASES, NODES
from kccm.testing.kubelet import (
    NODE_LEASE_NAMESPACE,
    UNINITIALIZED_TAINT,
    KubeletHeartbeat,
    kubelet_node,
    ready_condition,
)
from kccm.util.clock import FakeClock


@pytest.fixture
async def kube() -> FakeKube:
    client = FakeKube()
    await client.create(NODES, {"metadata": {"name": "node-a"}})
    return client


async def _renew_time(kube: FakeKube) -> str:
    lease = await kube.get(LEASES, "node-a", namespace=NODE_LEASE_NAMESPACE)
    return str(lease["spec"]["renewTime"])


async def test_the_lease_is_the_kubelets_and_owned_by_the_node(kube: FakeKube) -> None:
    heartbeat = KubeletHeartbeat(kube, "node-a", clock=FakeClock())
    await heartbeat.start()
    try:
        lease = await kube.get(LEASES, "node-a", namespace=NODE_LEASE_NAMESPACE)
        node = await kube.get(NODES, "node-a")
        assert lease["spec"]["holderIdentity"] == "node-a"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": node["metadata"]["uid"]}
        ]
        assert lease["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
    finally:
        await heartbeat.stop()


async def test_renews_every_interval_until_stopped(kube: FakeKube) -> None:
    clock = FakeClock()
    heartbeat = KubeletHeartbeat(kube, "node-a", interval=1.0, clock=clock)
    await heartbeat.start()
    await clock.advance(3.0)
    assert heartbeat.renewals == 4  # the create, then one a second
    assert await _renew_time(kube) == "2026-01-01T00:00:03.000000Z"
    await heartbeat.stop()
    assert not heartbeat.running
    await clock.advance(5.0)
    assert heartbeat.renewals == 4, "a silent kubelet renews nothing"
    assert await _renew_time(kube) == "2026-01-01T00:00:03.000000Z"


async def test_takes_over_an_existing_lease(kube: FakeKube) -> None:
    first = KubeletHeartbeat(kube, "node-a", clock=FakeClock())
    await first.start()
    await first.stop()
    clock = FakeClock(wall=datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC))
    second = KubeletHeartbeat(kube, "node-a", clock=clock)
    await second.start()
    try:
        assert await _renew_time(kube) == "2026-01-01T00:00:10.000000Z"
    finally:
        await second.stop()


async def test_stops_on_its_own_when_the_lease_is_gone(kube: FakeKube) -> None:
    clock = FakeClock()
    heartbeat = KubeletHeartbeat(kube, "node-a", clock=clock)
    await heartbeat.start()
    await kube.delete(LEASES, "node-a", namespace=NODE_LEASE_NAMESPACE)
    await clock.advance(1.0)
    assert not heartbeat.running


@pytest.mark.parametrize(
    ("pod_cidr", "spec_keys"),
    [
        pytest.param(None, {"taints"}, id="no-pod-cidr"),
        pytest.param("10.244.1.0/24", {"taints", "podCIDR", "podCIDRs"}, id="with-pod-cidr"),
    ],
)
def test_a_kubelet_node_is_uninitialised_ready_and_named_by_host(
    pod_cidr: str | None, spec_keys: set[str]
) -> None:
    node = kubelet_node("n1", pod_cidr)
    assert set(node["spec"]) == spec_keys
    assert node["spec"]["taints"] == [UNINITIALIZED_TAINT]
    assert node["spec"]["taints"][0] is not UNINITIALIZED_TAINT, "a copy: tests may edit it"
    assert node["metadata"]["labels"] == {"kubernetes.io/hostname": "n1"}
    assert node["status"]["addresses"] == [{"type": "Hostname", "address": "n1"}]
    assert node["status"]["conditions"] == [ready_condition("True")]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param("True", "KubeletReady", id="posted-by-kubelet"),
        pytest.param("False", "KubeletNotReady", id="not-ready-posted-by-kubelet"),
        pytest.param("Unknown", "NodeStatusUnknown", id="kubelet-stopped-posting"),
    ],
)
def test_the_ready_condition_reason_follows_the_status(status: str, reason: str) -> None:
    assert ready_condition(status)["reason"] == reason
