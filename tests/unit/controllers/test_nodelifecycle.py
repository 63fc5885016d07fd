"""cloud-node-lifecycle-controller on the in-memory kube fake and the fake provider (upstream
node_lifecycle_controller_test.go: Test_NodesDeleted, Test_NodesShutdown, Test_GetProviderID)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import InstanceNotFound, NotImplementedByProvider
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import nodelifecycle
from kccm.controllers.base import ControllerContext
from kccm.controllers.nodelifecycle import (
    CloudNodeLifecycleController,
    NodeLifecycleControllerOptions,
)
from kccm.kube.errors import Forbidden
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, Resource
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
OTHER = {"key": "example.com/x", "value": "y", "effect": "NoSchedule"}


def node(
    name: str = "node0",
    *,
    ready: str | None = "False",
    provider_id: str | None = None,
    taints: list[Any] | None = None,
) -> Obj:
    spec: dict[str, Any] = {"taints": taints or []}
    spec["providerID"] = f"fake://{name}" if provider_id is None else provider_id
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {"conditions": conditions},
    }


class DeleteFailsKube(FakeKube):
    async def delete(self, resource: Resource, name: str, **kw: Any) -> Obj | None:
        self.requests.append(("delete", str(resource), name))
        raise Forbidden("nodes is forbidden", reason="Forbidden")


@dataclass
class Env:
    kube: FakeKube
    cloud: FakeCloud
    clock: FakeClock
    registry: CollectorRegistry
    events: EventBroadcaster
    informers: SharedInformerFactory
    gate: CallGate
    ctrl: CloudNodeLifecycleController

    async def names(self) -> list[str]:
        return sorted(n["metadata"]["name"] for n in self.kube.objects(NODES))

    async def taints(self, name: str = "node0") -> list[Any]:
        return list((await self.kube.get(NODES, name))["spec"].get("taints") or [])

    async def events_written(self) -> list[tuple[str, str, str, str, str]]:
        await self.events.flush()
        return [
            (
                e["source"]["component"],
                e["involvedObject"]["name"],
                e["type"],
                e["reason"],
                e["message"],
            )
            for e in self.kube.objects(EVENTS)
        ]

    def writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.kube.requests if r[0] in ("patch", "replace", "delete")]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def env_factory(clock: FakeClock) -> AsyncIterator[Callable[..., Any]]:
    made: list[Env] = []

    async def factory(
        cloud: FakeCloud,
        nodes: list[Obj],
        *,
        kube: FakeKube | None = None,
        options: NodeLifecycleControllerOptions | None = None,
    ) -> Env:
        kube = kube or FakeKube()
        for n in nodes:
            await kube.create(NODES, n)
        registry = CollectorRegistry()
        gate = CallGate(registry=registry, clock=clock)
        informers = SharedInformerFactory(kube, clock=clock)
        events = EventBroadcaster(kube, clock=clock)
        context = ControllerContext(
            kube, informers, GatedCloud(cloud, gate), events, registry, clock
        )
        ctrl = nodelifecycle.build(context, options)
        assert ctrl is not None
        informers.start()
        await informers.wait_for_sync()
        events.start()
        kube.requests.clear()
        cloud.clear_calls()
        env = Env(kube, cloud, clock, registry, events, informers, gate, ctrl)
        made.append(env)
        return env

    yield factory
    for env in made:
        await env.events.shutdown(grace=0)
        await env.informers.stop()
        env.gate.close()


def cloud_with(clock: FakeClock, *, v2: bool, names: tuple[str, ...] = ("node0",)) -> FakeCloud:
    cloud = FakeCloud(clock=clock, enable_instances_v2=v2)
    for name in names:
        cloud.add_instance(FakeInstance(name=name))
    return cloud


VARIANTS = [pytest.param(False, id="legacy"), pytest.param(True, id="instanceV2")]


# -- Test_NodesDeleted ------------------------------------------------------------------------


@dataclass
class DeleteCase:
    node: Obj
    exists: bool
    deleted: bool
    error: BaseException | None = None


DELETE_CASES = {
    "not-ready-and-does-not-exist": DeleteCase(node(), exists=False, deleted=True),
    "not-ready-and-provider-errors": DeleteCase(
        node(), exists=False, deleted=False, error=RuntimeError("err!")
    ),
    "not-ready-but-still-exists": DeleteCase(node(), exists=True, deleted=False),
    "ready-unknown-and-does-not-exist": DeleteCase(
        node(ready="Unknown"), exists=False, deleted=True
    ),
    "ready-unknown-and-exists": DeleteCase(node(ready="Unknown"), exists=True, deleted=False),
    "no-ready-condition-and-does-not-exist": DeleteCase(
        node(ready=None), exists=False, deleted=True
    ),
    "ready-but-provider-said-it-is-deleted": DeleteCase(
        node(ready="True"), exists=False, deleted=False
    ),
    "not-ready-without-provider-id-and-instance-unknown": DeleteCase(
        node(provider_id=""), exists=False, deleted=True
    ),
}


@pytest.mark.parametrize("v2", VARIANTS)
@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in DELETE_CASES.items()])
async def test_nodes_deleted(
    v2: bool, case: DeleteCase, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=v2, names=("node0",) if case.exists else ())
    if case.error is not None:
        cloud.fail("instance_exists" if v2 else "instance_exists_by_provider_id", case.error)
        cloud.fail("instance_id", case.error)
    env: Env = await env_factory(cloud, [case.node])
    await env.ctrl.monitor_nodes()
    assert await env.names() == ([] if case.deleted else ["node0"])
    expected_events = (
        [
            (
                "cloud-node-lifecycle-controller",
                "node0",
                "Normal",
                "DeletingNode",
                "Deleting node node0 because it does not exist in the cloud provider",
            )
        ]
        if case.deleted
        else []
    )
    assert await env.events_written() == expected_events
    if (
        case.node["status"]["conditions"]
        and case.node["status"]["conditions"][0]["status"] == "True"
    ):
        assert cloud.calls == []  # a Ready node never costs a cloud call


async def test_deleting_event_references_the_node(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(cloud_with(clock, v2=True, names=()), [node()])
    uid = env.kube.objects(NODES)[0]["metadata"]["uid"]
    await env.ctrl.monitor_nodes()
    await env.events.flush()
    (event,) = env.kube.objects(EVENTS)
    assert event["involvedObject"] == {
        "kind": "Node",
        "name": "node0",
        "uid": uid,
        "apiVersion": "v1",
    }
    assert event["metadata"]["namespace"] == "default"


async def test_failed_delete_emits_deleting_node_failed(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(
        cloud_with(clock, v2=True, names=()), [node()], kube=DeleteFailsKube()
    )
    await env.ctrl.monitor_nodes()
    events = await env.events_written()
    assert [e[2:4] for e in events] == [
        ("Normal", "DeletingNode"),
        ("Warning", "DeletingNodeFailed"),
    ]
    assert events[1][4] == "Failed deleting node node0: nodes is forbidden (403 Forbidden)"


async def test_ready_nodes_never_cost_a_cloud_call(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """Fifty Ready nodes whose instances the cloud does not know: no call, no delete."""
    nodes = [node(f"n{i}", ready="True") for i in range(50)]
    cloud = cloud_with(clock, v2=True, names=())
    env: Env = await env_factory(cloud, nodes)
    for _ in range(3):
        await env.ctrl.monitor_nodes()
    assert cloud.calls == []
    assert env.writes() == []
    assert len(await env.names()) == 50


# -- Test_NodesShutdown -----------------------------------------------------------------------


@dataclass
class ShutdownCase:
    node: Obj
    shutdown: bool
    expected_taints: list[Any]
    error: BaseException | None = None


SHUTDOWN_CASES = {
    "not-ready-and-shut-down-gets-taint": ShutdownCase(node(), True, [SHUTDOWN]),
    "not-ready-shutdown-check-errors": ShutdownCase(node(), True, [], error=RuntimeError("err!")),
    "not-ready-and-running": ShutdownCase(node(), False, []),
    "ready-and-shut-down-no-taint": ShutdownCase(node(ready="True"), True, []),
    "shut-down-already-tainted-unchanged": ShutdownCase(
        node(taints=[OTHER, SHUTDOWN]), True, [OTHER, SHUTDOWN]
    ),
    "ready-again-taint-removed": ShutdownCase(
        node(ready="True", taints=[OTHER, SHUTDOWN]), False, [OTHER]
    ),
    "not-ready-running-again-keeps-taint": ShutdownCase(node(taints=[SHUTDOWN]), False, [SHUTDOWN]),
    "unknown-and-shut-down-gets-taint": ShutdownCase(node(ready="Unknown"), True, [SHUTDOWN]),
}


@pytest.mark.parametrize("v2", VARIANTS)
@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in SHUTDOWN_CASES.items()])
async def test_nodes_shutdown(
    v2: bool, case: ShutdownCase, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=v2)
    cloud.set_shutdown("node0", case.shutdown)
    if case.error is not None:
        cloud.fail("instance_shutdown" if v2 else "instance_shutdown_by_provider_id", case.error)
    env: Env = await env_factory(cloud, [case.node])
    before = await env.kube.get(NODES, "node0")
    await env.ctrl.monitor_nodes()
    assert await env.taints() == case.expected_taints
    assert await env.names() == ["node0"]
    if case.expected_taints == (before["spec"].get("taints") or []):
        assert [w for w in env.writes() if w[0] == "patch"] == []


async def test_shutdown_taint_has_no_value(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=True)
    cloud.set_shutdown("node0")
    env: Env = await env_factory(cloud, [node()])
    await env.ctrl.monitor_nodes()
    assert await env.taints() == [
        {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
    ]


async def test_legacy_shutdown_not_implemented_means_running(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=False)
    cloud.set_shutdown("node0")
    cloud.fail("instance_shutdown_by_provider_id", NotImplementedByProvider())
    env: Env = await env_factory(cloud, [node()])
    await env.ctrl.monitor_nodes()
    assert await env.taints() == []
    assert await env.ctrl.shutdown_in_cloud_provider(node()) is False


async def test_legacy_instance_not_found_on_provider_id_lookup_means_not_shut_down(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=False)
    env: Env = await env_factory(cloud, [node()])
    cloud.fail("instance_id", InstanceNotFound())
    assert await env.ctrl.shutdown_in_cloud_provider(node(provider_id="")) is False


async def test_legacy_provider_id_lookup_error_skips_node(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = cloud_with(clock, v2=False, names=())
    cloud.fail("instance_id", RuntimeError("api down"))
    env: Env = await env_factory(cloud, [node(provider_id="")])
    await env.ctrl.monitor_nodes()
    assert await env.names() == ["node0"]
    assert "instance_exists_by_provider_id" not in cloud.calls


# -- Test_GetProviderID -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v2", "given", "expected", "calls"),
    [
        pytest.param(False, "fake://given", "fake://given", [], id="from-spec"),
        pytest.param(True, "fake://given", "fake://given", [], id="instanceV2-from-spec"),
        pytest.param(False, "", "fake://node0", ["instance_id"], id="legacy-instance-id"),
        pytest.param(True, "", "fake://node0", ["instance_metadata"], id="instanceV2-metadata"),
    ],
)
async def test_get_provider_id(
    v2: bool,
    given: str,
    expected: str,
    calls: list[str],
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    env: Env = await env_factory(cloud_with(clock, v2=v2), [])
    assert await env.ctrl.get_provider_id(node(provider_id=given)) == expected
    assert env.cloud.calls == calls


async def test_get_provider_id_errors(env_factory: Callable[..., Any], clock: FakeClock) -> None:
    cloud = cloud_with(clock, v2=False)
    env: Env = await env_factory(cloud, [])
    cloud.fail("instance_id", RuntimeError("boom"))
    with pytest.raises(Exception, match="failed to get instance ID from cloud provider: boom"):
        await env.ctrl.get_provider_id(node(provider_id=""))


# -- concurrency, period, build ---------------------------------------------------------------


@pytest.mark.parametrize(("workers", "seconds"), [(1, 40.0), (10, 4.0), (20, 2.0)])
async def test_not_ready_nodes_checked_concurrently_within_bound(
    workers: int, seconds: float, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    names = tuple(f"n{i}" for i in range(20))
    cloud = cloud_with(clock, v2=True, names=names)
    cloud.set_latency("*", 1.0)
    options = NodeLifecycleControllerOptions(concurrent_node_monitors=workers)
    env: Env = await env_factory(cloud, [node(n) for n in names], options=options)
    start = clock.monotonic()
    task = asyncio.create_task(env.ctrl.monitor_nodes())
    await clock.run_until_idle()
    await task
    assert clock.monotonic() - start == pytest.approx(seconds)  # exists + shutdown per node
    assert cloud.calls.count("instance_exists") == 20


async def test_monitor_runs_every_period(env_factory: Callable[..., Any], clock: FakeClock) -> None:
    cloud = cloud_with(clock, v2=True)
    env: Env = await env_factory(cloud, [node()])
    assert env.ctrl.options.node_monitor_period == 5.0
    run = asyncio.create_task(env.ctrl.run())
    await clock.advance(0)
    assert cloud.calls.count("instance_exists") == 1
    labels = {"name": "cloud-node-lifecycle", "manager": "cloud-controller-manager"}
    assert env.registry.get_sample_value("running_managed_controllers", labels) == 1
    await clock.advance(4.9)
    assert cloud.calls.count("instance_exists") == 1
    await clock.advance(0.1)
    assert cloud.calls.count("instance_exists") == 2
    await env.ctrl.stop()
    await clock.advance(5)
    await run
    assert env.registry.get_sample_value("running_managed_controllers", labels) == 0


async def test_build_skips_without_instances(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    kube = FakeKube()

    def context(cloud: FakeCloud) -> ControllerContext:
        return ControllerContext(
            kube,
            SharedInformerFactory(kube, clock=clock),
            GatedCloud(cloud, gate),
            EventBroadcaster(kube, clock=clock),
            registry,
            clock,
        )

    assert (
        nodelifecycle.build(context(FakeCloud(enable_instances=False, enable_instances_v2=False)))
        is None
    )
    assert nodelifecycle.build(context(FakeCloud(enable_instances_v2=False))) is not None
    assert nodelifecycle.build(context(FakeCloud(enable_instances=False))) is not None
    gate.close()
