"""cloud-node-controller: initialisation retries, conflicts and metrics; upstream
node_controller_test.go Test_reconcileNodeLabels."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from node_harness import (
    ConflictOnceKube,
    Env,
    kubelet_node,
    make_cloud,
)

from kccm.kube.resources import NODES
from kccm.util.clock import FakeClock


async def test_conflict_on_write_is_retried_with_a_fresh_read(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    kube = ConflictOnceKube()
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()], kube=kube)
    await kube.patch(NODES, "node0", {"metadata": {"labels": {"meanwhile": "x"}}})
    await eventually_cached(env, "meanwhile")
    cached_rv = env.ctrl.informer.get("node0")["metadata"]["resourceVersion"]  # type: ignore[index]
    kube.requests.clear()
    kube.sent.clear()
    kube.conflicts = 1
    task = asyncio.create_task(env.ctrl.sync_node("node0"))
    await clock.run_until_idle()
    await task
    assert kube.requests[:3] == [
        ("patch", "nodes", "node0"),  # from the cache: Conflict
        ("get", "nodes", "node0"),  # fresh read
        ("patch", "nodes", "node0"),
    ]
    assert kube.sent[0]["metadata"]["resourceVersion"] == cached_rv
    node = await env.node()
    assert node["metadata"]["labels"]["meanwhile"] == "x"
    assert node["spec"]["taints"] == []


async def eventually_cached(env: Env, label: str) -> None:
    for _ in range(100):
        cached = env.ctrl.informer.get("node0")
        if cached is not None and label in cached["metadata"].get("labels", {}):
            return
        await asyncio.sleep(0)
    raise AssertionError("informer never saw the change")


async def test_stale_resource_version_conflicts_then_succeeds(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """The informer cache lags a concurrent write: the first write conflicts for real."""
    kube = ConflictOnceKube()
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()], kube=kube)
    await env.informers.stop()  # the cache stops following the API server
    await kube.patch(NODES, "node0", {"metadata": {"annotations": {"x": "y"}}})
    kube.requests.clear()
    task = asyncio.create_task(env.ctrl.sync_node("node0"))
    await clock.run_until_idle()
    await task
    assert kube.requests[:3] == [
        ("patch", "nodes", "node0"),  # stale resourceVersion: a real Conflict
        ("get", "nodes", "node0"),
        ("patch", "nodes", "node0"),
    ]
    node = await env.node()
    assert node["spec"]["taints"] == []
    assert node["metadata"]["annotations"] == {"x": "y"}


async def test_init_keeps_fields_the_cache_drops(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """The informer cache drops the last-applied annotation; initialisation must not."""
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(annotations=last_applied)]
    )
    await env.ctrl.sync_node("node0")
    node = await env.node()
    assert node["metadata"]["annotations"] == last_applied
    assert node["spec"]["taints"] == []


async def test_nil_metadata_is_not_requeued(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.override = lambda _n: None
    env: Env = await env_factory(cloud, [kubelet_node()])
    env.ctrl.queue.add("node0")
    await env.ctrl.controller.process_next()
    await clock.advance(3600)
    assert len(env.ctrl.queue) == 0
    assert env.ctrl.queue.num_requeues("node0") == 0


async def test_failed_init_is_requeued_rate_limited(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.fail("instance_metadata", RuntimeError("boom"), times=1)
    env: Env = await env_factory(cloud, [kubelet_node()])
    env.ctrl.queue.add("node0")
    await env.ctrl.controller.process_next()
    assert env.ctrl.queue.num_requeues("node0") == 1
    await clock.advance(0.01)
    await env.ctrl.controller.process_next()  # second try succeeds
    assert (await env.node())["spec"]["taints"] == []


async def test_metrics_observed_on_init(env_factory: Callable[..., Any], clock: FakeClock) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    await env.ctrl.sync_node("node0")
    for name in (
        "node_controller_cloud_provider_taint_removal_delay_seconds",
        "node_controller_initial_node_sync_delay_seconds",
    ):
        assert env.metric(f"{name}_count") == 1
        assert env.registry.get_sample_value(f"{name}_bucket", {"le": "1024.0"}) == 1


# -- Test_reconcileNodeLabels -----------------------------------------------------------------

BETA = {
    "failure-domain.beta.kubernetes.io/zone": "foo",
    "failure-domain.beta.kubernetes.io/region": "bar",
    "beta.kubernetes.io/instance-type": "the-best-type",
}
GA = {
    "topology.kubernetes.io/zone": "foo",
    "topology.kubernetes.io/region": "bar",
    "node.kubernetes.io/instance-type": "the-best-type",
}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param(BETA, {**BETA, **GA}, id="requires-reconcile"),
        pytest.param({**BETA, **GA}, None, id="does-not-require-reconcile"),
        pytest.param(
            {**BETA, "topology.kubernetes.io/zone": "other",
             "topology.kubernetes.io/region": "other", "node.kubernetes.io/instance-type": "x"},
            {**BETA, **GA}, id="secondary-differs-beta-wins",
        ),
        pytest.param({}, None, id="no-labels"),
        pytest.param(GA, None, id="ga-only-untouched"),
        pytest.param(
            {"failure-domain.beta.kubernetes.io/zone": "foo"},
            {"failure-domain.beta.kubernetes.io/zone": "foo", "topology.kubernetes.io/zone": "foo"},
            id="partial",
        ),
    ],
)  # fmt: skip
async def test_reconcile_node_labels(
    labels: dict[str, str],
    expected: dict[str, str] | None,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(taints=[], labels=labels)]
    )
    await env.ctrl.sync_node("node0")  # an initialised node: label reconcile only
    node = await env.node()
    assert node["metadata"].get("labels", {}) == (labels if expected is None else expected)
    assert env.cloud.calls == []
    assert [w[0] for w in env.writes()] == ([] if expected is None else ["patch"])


async def test_every_update_event_enqueues(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node(taints=[])])
    await env.kube.patch(NODES, "node0", {"metadata": {"annotations": {"a": "b"}}})
    for _ in range(50):
        if len(env.ctrl.queue):
            break
        await asyncio.sleep(0)
    assert len(env.ctrl.queue) == 1
