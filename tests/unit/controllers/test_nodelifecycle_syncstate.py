"""What the cloud-node-lifecycle controller records of each Node (kccm explain node): the
existence and shutdown checks of a NotReady Node and what followed; a Ready Node costs no cloud
check; a failed check is classified; the records go with the Node."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import Throttled
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import nodelifecycle
from kccm.controllers.base import ControllerContext
from kccm.controllers.nodelifecycle import CONTROLLER_NAME, CloudNodeLifecycleController
from kccm.controllers.syncstate import SyncStates
from kccm.kube.fake import FakeKube
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock


def node(name: str, ready: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"providerID": f"fake://{name}"},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


class World:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube()
        self.cloud = FakeCloud(clock=self.clock, enable_instances_v2=True)
        self.registry = CollectorRegistry()
        self.gate = CallGate(registry=self.registry, clock=self.clock)
        self.informers = SharedInformerFactory(self.kube, clock=self.clock)
        self.events = EventBroadcaster(self.kube, clock=self.clock)
        self.states = SyncStates(registry=self.registry, clock=self.clock)

    async def start(self) -> CloudNodeLifecycleController:
        context = ControllerContext(
            self.kube,
            self.informers,
            GatedCloud(self.cloud, self.gate),
            self.events,
            self.registry,
            self.clock,
            sync_states=self.states,
        )
        ctrl = nodelifecycle.build(context)
        assert ctrl is not None
        self.informers.start()
        await self.informers.wait_for_sync()
        return ctrl

    def detail(self, name: str) -> dict[str, Any]:
        found = self.states.last("node", name, CONTROLLER_NAME)
        assert found is not None
        return dict(found.detail)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.events.shutdown(grace=0)
    await w.informers.stop()
    w.gate.close()


@pytest.mark.parametrize(
    ("ready", "in_cloud", "shutdown", "detail"),
    [
        pytest.param(
            "True", True, False, {"ready": "True", "action": "none: Ready, no cloud check"},
            id="ready",
        ),
        pytest.param(
            "False", True, False,
            {"ready": "False", "exists": True, "shutdown": False, "action": "none"},
            id="not-ready-running",
        ),
        pytest.param(
            "Unknown", True, True,
            {
                "ready": "Unknown", "exists": True, "shutdown": True,
                "action": "tainted node.cloudprovider.kubernetes.io/shutdown",
            },
            id="not-ready-shut-down",
        ),
    ],
)  # fmt: skip
async def test_the_checks_and_what_followed(
    world: World, ready: str, in_cloud: bool, shutdown: bool, detail: dict[str, Any]
) -> None:
    if in_cloud:
        world.cloud.add_instance(FakeInstance(name="n1", shutdown=shutdown))
    await world.kube.create(NODES, node("n1", ready))
    ctrl = await world.start()
    await ctrl.monitor_nodes()
    assert world.detail("n1") == detail


async def test_a_node_gone_from_the_cloud_is_deleted_and_its_records_go(world: World) -> None:
    await world.kube.create(NODES, node("n1", "False"))
    ctrl = await world.start()
    recorded: list[dict[str, Any]] = []
    real = world.states.record

    def spy(*args: Any, **kwargs: Any) -> Any:
        recorded.append(dict(kwargs.get("detail") or {}))
        return real(*args, **kwargs)

    world.states.record = spy  # type: ignore[method-assign]
    await ctrl.monitor_nodes()
    await world.clock.advance(0)
    gone = "deleted: the instance is gone from the cloud"
    assert recorded == [{"ready": "False", "exists": False, "action": gone}]
    assert world.kube.objects(NODES) == []
    assert world.states.get("node", "n1") == []


async def test_a_failed_check_is_classified(world: World) -> None:
    world.cloud.add_instance(FakeInstance(name="n1"))
    world.cloud.fail("instance_exists", Throttled("slow down"), times=1)
    await world.kube.create(NODES, node("n1", "False"))
    ctrl = await world.start()
    await ctrl.monitor_nodes()
    found = world.states.last("node", "n1", CONTROLLER_NAME)
    assert found is not None
    assert (found.ok, str(found.reason), found.detail["action"]) == (
        False,
        "throttled",
        "existence check failed",
    )
    value = world.registry.get_sample_value(
        "kccm_sync_failures_total", {"controller": CONTROLLER_NAME, "reason": "throttled"}
    )
    assert value == 1


async def test_a_deleted_node_is_forgotten(world: World) -> None:
    await world.kube.create(NODES, node("n1", "True"))
    ctrl = await world.start()
    await ctrl.monitor_nodes()
    await world.kube.delete(NODES, "n1")
    await world.clock.advance(0)
    assert world.states.get("node", "n1") == []
