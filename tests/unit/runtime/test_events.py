"""The event recorder: client-go correlation, spam filter, buffer and retries, on FakeKube and
fake time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.kube.errors import Forbidden, TransportError
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS
from kccm.runtime import events as events_module
from kccm.runtime.events import EventBroadcaster, EventRecorder, ObjectRef
from kccm.util.clock import FakeClock

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1", "uid": "u-1", "resourceVersion": "7"},
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop", "uid": "u-2"},
}


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def broadcaster(
    kube: FakeKube, clock: FakeClock, registry: CollectorRegistry
) -> AsyncIterator[EventBroadcaster]:
    b = EventBroadcaster(kube, registry=registry, clock=clock, rng=lambda: 0.5)
    b.start()
    yield b
    await b.shutdown(grace=0)


@pytest.fixture
def recorder(broadcaster: EventBroadcaster) -> EventRecorder:
    return broadcaster.recorder("service-controller", "host-a")


def dropped(registry: CollectorRegistry, reason: str) -> float:
    return registry.get_sample_value("event_recorder_dropped_events_total", {"reason": reason}) or 0


def events(kube: FakeKube) -> list[Obj]:
    return sorted(kube.objects(EVENTS), key=lambda e: e["metadata"]["name"])


async def test_event_has_client_go_shape(
    recorder: EventRecorder, broadcaster: EventBroadcaster, kube: FakeKube
) -> None:
    recorder.event(NODE, "Normal", "Synced", "Node synced successfully")
    await broadcaster.flush()
    [event] = events(kube)
    assert event["metadata"]["name"] == "node-1.18867251edfa0000"  # 2026-01-01T00:00:00Z in ns, hex
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "kind": "Node",
        "name": "node-1",
        "uid": "u-1",
        "apiVersion": "v1",
        "resourceVersion": "7",
    }
    assert event["source"] == {"component": "service-controller", "host": "host-a"}
    assert (event["reportingComponent"], event["reportingInstance"]) == (
        "service-controller",
        "host-a",
    )
    assert (event["type"], event["reason"], event["count"]) == ("Normal", "Synced", 1)
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"


async def test_namespaced_object_event_lives_in_its_namespace(
    recorder: EventRecorder, broadcaster: EventBroadcaster, kube: FakeKube
) -> None:
    recorder.eventf(SERVICE, "Warning", "SyncLoadBalancerFailed", "Error syncing: %s", "quota")
    await broadcaster.flush()
    [event] = events(kube)
    assert event["metadata"]["namespace"] == "shop"
    assert event["message"] == "Error syncing: quota"


@pytest.mark.parametrize(
    ("burst", "repeats", "later", "count", "filtered"),
    [
        pytest.param(25, 10, 0, 10, 0, id="identical-events-become-one-with-count"),
        pytest.param(25, 50, 0, 25, 25, id="spam-filter-burst-25"),
        pytest.param(25, 50, 1, 51, 25, id="refill-after-5-minutes-carries-the-true-count"),
        pytest.param(50, 50, 0, 50, 0, id="burst-50-lets-50-through"),
    ],
)
async def test_identical_events_are_counted(
    kube: FakeKube,
    clock: FakeClock,
    registry: CollectorRegistry,
    burst: int,
    repeats: int,
    later: int,
    count: int,
    filtered: int,
) -> None:
    b = EventBroadcaster(kube, registry=registry, clock=clock, spam_burst=burst)
    b.start()
    rec = b.recorder("cloud-node-controller")
    for _ in range(repeats):
        rec.event(NODE, "Warning", "Unhealthy", "cloud says no")
        await clock.advance(1)
    await clock.advance(300)
    for _ in range(later):
        rec.event(NODE, "Warning", "Unhealthy", "cloud says no")
    await b.flush()
    [event] = events(kube)
    assert event["count"] == count
    assert event["firstTimestamp"] < event["lastTimestamp"]
    assert dropped(registry, "spam_filtered") == filtered
    await b.shutdown(grace=0)


async def test_spam_filter_is_per_object(
    kube: FakeKube, clock: FakeClock, registry: CollectorRegistry
) -> None:
    b = EventBroadcaster(kube, registry=registry, clock=clock, spam_burst=2)
    b.start()
    rec = b.recorder("c")
    for i in range(3):
        rec.event(NODE, "Normal", "R", f"node {i}")
        rec.event(SERVICE, "Normal", "R", f"service {i}")
    await b.flush()
    assert len(events(kube)) == 4
    assert dropped(registry, "spam_filtered") == 2
    await b.shutdown(grace=0)


async def test_many_messages_for_one_reason_are_combined(
    recorder: EventRecorder, broadcaster: EventBroadcaster, kube: FakeKube, clock: FakeClock
) -> None:
    for i in range(12):
        recorder.event(NODE, "Warning", "Flapping", f"attempt {i}")
        await clock.advance(1)
    await broadcaster.flush()
    written = events(kube)
    combined = [e for e in written if e["message"].startswith("(combined from similar events)")]
    assert len(written) == 10
    assert [e["count"] for e in combined] == [3]
    assert combined[0]["message"] == "(combined from similar events): attempt 11"


async def test_patch_of_a_vanished_event_falls_back_to_create(
    recorder: EventRecorder, broadcaster: EventBroadcaster, kube: FakeKube
) -> None:
    recorder.event(NODE, "Normal", "R", "m")
    await broadcaster.flush()
    [first] = events(kube)
    await kube.delete(EVENTS, first["metadata"]["name"], namespace="default")
    recorder.event(NODE, "Normal", "R", "m")
    await broadcaster.flush()
    [second] = events(kube)
    assert second["metadata"]["name"] == first["metadata"]["name"]
    assert second["count"] == 2


def test_buffer_full_drops_without_blocking(kube: FakeKube, registry: CollectorRegistry) -> None:
    """The buffer bounds the events of every lane together (client-go: 1,000 queued)."""
    b = EventBroadcaster(kube, registry=registry, buffer_size=2)
    rec = b.recorder("c")
    for i in range(5):
        rec.event(ObjectRef(kind="Node", name=f"node-{i}", uid=f"u-{i}"), "Normal", "R", "m")
    assert dropped(registry, "buffer_full") == 3


async def test_unknown_event_type_is_dropped(
    recorder: EventRecorder, broadcaster: EventBroadcaster, kube: FakeKube
) -> None:
    recorder.event(ObjectRef(kind="Node", name="n"), "Error", "R", "m")
    await broadcaster.flush()
    assert events(kube) == []


class Flaky(FakeKube):
    """Fails creates: ``transport`` times with no answer, then for good with ``answer``."""

    def __init__(self, transport: int, answer: Exception | None = None) -> None:
        super().__init__()
        self.transport = transport
        self.answer = answer
        self.attempts = 0

    async def create(self, resource: Any, obj: Mapping[str, Any]) -> Obj:
        self.attempts += 1
        if self.attempts <= self.transport:
            raise TransportError("connection refused")
        if self.answer is not None:
            raise self.answer
        return await super().create(resource, obj)


@pytest.mark.parametrize(
    ("transport", "answer", "attempts", "written", "elapsed"),
    [
        pytest.param(2, None, 3, 1, 5 + 10, id="transport-errors-are-retried"),
        pytest.param(99, None, 12, 0, 5 + 10 * 11, id="gives-up-after-12-tries"),
        pytest.param(0, Forbidden("no", reason="Forbidden"), 1, 0, 0, id="api-error-not-retried"),
    ],
)
async def test_write_retries(
    clock: FakeClock,
    registry: CollectorRegistry,
    transport: int,
    answer: Exception | None,
    attempts: int,
    written: int,
    elapsed: float,
) -> None:
    kube = Flaky(transport, answer)
    b = EventBroadcaster(kube, registry=registry, clock=clock, rng=lambda: 0.5)
    b.start()
    start = clock.monotonic()
    b.recorder("c").event(NODE, "Normal", "R", "m")
    await clock.run_until_idle()
    await b.flush()
    assert kube.attempts == attempts
    assert len(events(kube)) == written
    assert clock.monotonic() - start == elapsed
    assert dropped(registry, "write_failed") == 1 - written
    await b.shutdown(grace=0)


async def test_shutdown_flushes_and_refuses_new_events(
    kube: FakeKube, clock: FakeClock, registry: CollectorRegistry
) -> None:
    b = EventBroadcaster(kube, registry=registry, clock=clock)
    rec = b.recorder("c")
    b.start()
    rec.event(NODE, "Normal", "R", "before")
    await b.shutdown(grace=5)
    rec.event(NODE, "Normal", "R", "after")
    assert [e["message"] for e in events(kube)] == ["before"]


class Stuck(FakeKube):
    """Holds every create about ``name`` until ``release`` is set; ``done`` is set once the
    creates about every name in ``awaited`` have been answered."""

    def __init__(self, name: str, awaited: set[str]) -> None:
        super().__init__()
        self.name = name
        self.awaited = set(awaited)
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.done = asyncio.Event()

    async def create(self, resource: Any, obj: Mapping[str, Any]) -> Obj:
        about = obj["involvedObject"]["name"]
        if about == self.name:
            self.waiting.set()
            await self.release.wait()
        created = await super().create(resource, obj)
        self.awaited.discard(about)
        if not self.awaited:
            self.done.set()
        return created


def node(name: str) -> ObjectRef:
    return ObjectRef(kind="Node", name=name, uid=f"uid-{name}", api_version="v1")


def lane(name: str) -> int:
    event = {"involvedObject": node(name).as_dict()}
    return events_module._lane_of(event, events_module.WRITERS)


async def test_a_stuck_write_holds_up_only_its_own_lane(registry: CollectorRegistry) -> None:
    """Events about other objects are written while one write hangs, unless they share its
    lane; identical events about the stuck object wait for it and become its count."""
    others = [f"node-{i}" for i in range(12)]
    free = {name for name in others if lane(name) != lane("stuck")}
    assert free, "every name shares the stuck lane: pick others"
    assert free != set(others), "no name shares the stuck lane: pick others"
    kube = Stuck("stuck", free)
    b = EventBroadcaster(kube, registry=registry)
    rec = b.recorder("cloud-node-controller")
    b.start()
    try:
        rec.event(node("stuck"), "Normal", "Synced", "Node synced successfully")
        await kube.waiting.wait()
        for name in others:
            rec.event(node(name), "Normal", "Synced", "Node synced successfully")
        for _ in range(3):  # identical: each must follow the first create, in its lane
            rec.event(node("stuck"), "Normal", "Synced", "Node synced successfully")
        async with asyncio.timeout(30):  # FakeKube answers at once: only a regression waits
            await kube.done.wait()
        assert {e["involvedObject"]["name"] for e in events(kube)} == free
    finally:
        kube.release.set()
    await b.flush()
    written = {e["involvedObject"]["name"]: e for e in events(kube)}
    assert set(written) == {"stuck", *others}
    assert written["stuck"]["count"] == 4
    assert len(events(kube)) == len(others) + 1
    await b.shutdown(grace=0)
