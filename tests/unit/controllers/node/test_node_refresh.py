"""cloud-node-controller: spread refresh and list_instance_metadata (kccm), upstream
node_controller_test.go TestGetInstanceMetadata, checklist 57."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from node_harness import (
    EXTERNAL,
    INTERNAL,
    INTERNAL2,
    PID,
    Env,
    PerNodeCloud,
    addr,
    kubelet_node,
    make_cloud,
    many_nodes,
    run_for,
)
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import InstanceMetadata
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import NodeControllerOptions
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.loopturns import turns_during
from kccm.util.clock import FakeClock

# -- kccm: spread refresh and list_instance_metadata ------------------------------------------


@pytest.mark.parametrize(
    ("cloud_type", "period", "method", "expected_calls"),
    [
        pytest.param(PerNodeCloud, 3600.0, "instance_metadata", 120, id="per-node-once-an-hour"),
        pytest.param(FakeCloud, 3600.0, "list_instance_metadata", 12,
                     id="list-call-per-tick-for-due-nodes"),
        pytest.param(FakeCloud, 0.0, "list_instance_metadata", 13,
                     id="default-every-node-every-tick-in-one-list-call"),
        pytest.param(PerNodeCloud, 0.0, "instance_metadata", 13 * 120,
                     id="default-without-list-call-is-upstream-per-node"),
    ],
)  # fmt: skip
async def test_steady_state_cloud_calls_per_hour(
    cloud_type: type[FakeCloud],
    period: float,
    method: str,
    expected_calls: int,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    """One hour of the periodic loop (ticks at 0, 5, ..., 60 min) over 120 initialised nodes."""
    cloud = cloud_type(clock=clock)
    nodes = many_nodes(cloud, 120, INTERNAL)
    options = NodeControllerOptions(node_metadata_refresh_period=period)
    env: Env = await env_factory(cloud, nodes, options=options)
    await run_for(env, clock, 3600)
    assert cloud.calls.count(method) == expected_calls
    other = {"instance_metadata", "list_instance_metadata"} - {method}
    assert not [c for c in cloud.calls if c in other]
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))


async def test_spread_refresh_reads_each_node_once_per_period(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """200 nodes, period 1 h, ticks every 5 min: each node read once per hour, and no tick
    carries much more than its even share (200 / 12)."""
    cloud = PerNodeCloud(clock=clock)
    nodes = many_nodes(cloud, 200, INTERNAL)
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    per_tick = []
    for _ in range(24):
        before = len(cloud.calls)
        await clock.advance(300)
        per_tick.append(len(cloud.calls) - before)
    await env.ctrl.stop(grace=1)
    reads = Counter(c.args[0] for c in cloud.call_log if c.method == "instance_metadata")
    assert len(reads) == 200
    assert set(reads.values()) == {2}
    assert max(per_tick) <= 2 * 200 / 12


async def test_list_call_follows_cloud_address_changes(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 10, INTERNAL)
    env: Env = await env_factory(
        cloud, nodes, options=NodeControllerOptions(node_metadata_refresh_period=600)
    )
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(600)
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))
    for i in range(10):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL2),)))
    await clock.advance(300)
    await clock.advance(300)
    await env.ctrl.stop(grace=1)
    assert all(n["status"]["addresses"] == [INTERNAL2] for n in env.kube.objects(NODES))


async def test_a_node_missing_from_the_list_answer_is_asked_again_next_tick(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """A node the list call leaves out is a failed read (the per-node call raises
    InstanceNotFound for it): it stays due, so it is in every following tick's list call,
    not read again only a refresh period later."""
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 10, INTERNAL)
    cloud.remove_instance("node3")
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    await run_for(env, clock, 3600)
    asked = ["node3" in c.args[0] for c in cloud.call_log if c.method == "list_instance_metadata"]
    first = asked.index(True)
    assert all(asked[first:]), asked
    assert first < len(asked) - 1, "asked once, then never again"


def addresses_of(env: Env, name: str) -> Any:
    (node,) = [n for n in env.kube.objects(NODES) if n["metadata"]["name"] == name]
    return node["status"]["addresses"]


async def test_default_refresh_reads_all_nodes_at_start_and_every_tick_in_one_call(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """Upstream's cadence (at start, then every --node-status-update-frequency) with one list
    call per tick: an address changed in the cloud reaches its Node within one tick."""
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 50, INTERNAL)
    env: Env = await env_factory(cloud, nodes, options=NodeControllerOptions())
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(0)
    assert cloud.calls.count("list_instance_metadata") == 1, "once at start"
    assert len(cloud.call_log[-1].args[0]) == 50, "for every node"
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))
    cloud.add_instance(FakeInstance(name="node7", addresses=(addr(INTERNAL2),)))
    await clock.advance(299)
    assert addresses_of(env, "node7") == [INTERNAL]
    await clock.advance(1)
    assert addresses_of(env, "node7") == [INTERNAL2]
    assert cloud.calls.count("list_instance_metadata") == 2
    assert "instance_metadata" not in cloud.calls
    await env.ctrl.stop(grace=1)


async def test_list_call_failure_is_logged_and_skipped(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 5, INTERNAL)
    cloud.fail("list_instance_metadata", RuntimeError("cloud down"))
    env: Env = await env_factory(
        cloud, nodes, options=NodeControllerOptions(node_metadata_refresh_period=300)
    )
    await run_for(env, clock, 300)
    assert cloud.calls.count("list_instance_metadata") >= 1
    assert env.writes() == []


# -- TestGetInstanceMetadata ------------------------------------------------------------------

FULL_META = InstanceMetadata(
    PID, "t1.micro", (addr(INTERNAL), addr(EXTERNAL)), "us-west-1a", "us-west"
)


@pytest.mark.parametrize(
    ("v2", "node", "expected"),
    [
        pytest.param(
            True, kubelet_node(),
            FULL_META,
            id="instanceV2",
        ),
        pytest.param(
            False, kubelet_node(),
            FULL_META,
            id="legacy-with-zones",
        ),
        pytest.param(
            False, kubelet_node(provider_id=PID),
            FULL_META,
            id="legacy-provider-id-from-spec",
        ),
    ],
)  # fmt: skip
async def test_get_instance_metadata(
    v2: bool,
    node: Obj,
    expected: InstanceMetadata,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    env: Env = await env_factory(make_cloud(v2, clock=clock), [node])
    assert await env.ctrl.get_instance_metadata(node) == expected
    if node["spec"].get("providerID"):
        assert "instance_id" not in env.cloud.calls


# -- checklist 57 -----------------------------------------------------------------------------


async def test_build_skips_without_instances(clock: FakeClock) -> None:
    cloud = FakeCloud(clock=clock, enable_instances=False, enable_instances_v2=False)
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    kube = FakeKube()
    context = ControllerContext(
        kube, SharedInformerFactory(kube, clock=clock), GatedCloud(cloud, gate),
        EventBroadcaster(kube, clock=clock), registry, clock,
    )  # fmt: skip
    assert node_controller.build(context) is None
    assert (
        node_controller.build(
            ControllerContext(
                kube,
                SharedInformerFactory(kube),
                GatedCloud(FakeCloud(enable_instances=False), gate),
                EventBroadcaster(kube),
                registry,
                clock,
            )
        )
        is not None
    )
    gate.close()


@pytest.mark.parametrize(
    ("cloud_type", "method", "failures"),
    [
        pytest.param(FakeCloud, "list_instance_metadata", 1, id="failed-list-call"),
        pytest.param(PerNodeCloud, "instance_metadata", 3, id="failed-per-node-calls"),
    ],
)
async def test_a_failed_periodic_read_is_retried_at_the_next_tick(
    cloud_type: type[FakeCloud],
    method: str,
    failures: int,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    cloud = cloud_type(clock=clock)
    nodes = many_nodes(cloud, 3, INTERNAL2)
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    cloud.fail(method, RuntimeError("throttled"), times=failures)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(12):  # tick until the reads of the first due nodes have failed
        await clock.advance(300)
        if cloud.calls.count(method) >= failures:
            break
    failed: set[str] = set()
    for call in cloud.call_log:
        if call.method == method:
            names = call.args[0]
            failed |= set(names) if isinstance(names, tuple) else {names}
    assert failed, "some reads failed"
    assert all(not n["status"]["addresses"] for n in env.kube.objects(NODES))
    await clock.advance(300)  # the next tick, not a period (1 h) later, reads them again
    await env.ctrl.stop(grace=1)
    done = {n["metadata"]["name"]: n["status"]["addresses"] for n in env.kube.objects(NODES)}
    assert all(done[name] == [INTERNAL2] for name in failed)


async def test_a_listed_refresh_of_many_unchanged_nodes_lets_the_loop_run(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """1,200 Nodes whose addresses are already right: no write, so no await would yield; the
    refresh still lets other tasks (/metrics, /healthz, watches) run every 500 nodes."""
    cloud = FakeCloud(clock=clock)
    nodes = []
    for i in range(1200):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL),)))
        nodes.append(kubelet_node(f"node{i}", taints=[], addresses=[INTERNAL]))
    env: Env = await env_factory(cloud, nodes, options=NodeControllerOptions())
    await env.informers.informer(NODES).wait_for_sync()
    _, turns = await turns_during(env.ctrl.update_node_status())
    assert cloud.calls.count("list_instance_metadata") == 1
    assert not [r for r in env.kube.requests if r[0] == "patch"]  # nothing to write
    assert turns >= 2  # it ran during the refresh, not only after it
