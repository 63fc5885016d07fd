"""Informer behaviour on the in-memory kube fake, on fake time."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES
from kccm.runtime.informers import (
    EventHandler,
    Informer,
    SharedInformerFactory,
    copy_obj,
    slim_node,
    slim_object,
)
from kccm.testing.faults import PartitionableKube
from kccm.util.clock import FakeClock


@dataclass
class Recorder:
    adds: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)

    def handler(self) -> EventHandler:
        return EventHandler(
            on_add=lambda o: self.adds.append(o["metadata"]["name"]),
            on_update=lambda old, new: self.updates.append(new["metadata"]["name"]),
            on_delete=lambda o: self.deletes.append(o["metadata"]["name"]),
        )


async def _node(kube: FakeKube, name: str, provider_id: str = "") -> Obj:
    body: Obj = {"metadata": {"name": name, "managedFields": [{"manager": "x"}]}}
    if provider_id:
        body["spec"] = {"providerID": provider_id}
    body["status"] = {"images": [{"names": ["big"]}], "addresses": []}
    return await kube.create(NODES, body)


async def _settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


async def _start(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await informer.wait_for_sync()
    await _settle()
    return task


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_paged_initial_list_fills_cache_and_slims(clock: FakeClock) -> None:
    kube = FakeKube()
    for i in range(7):
        await _node(kube, f"n{i}")
    informer = Informer(kube, NODES, page_size=3, clock=clock)
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())
    task = await _start(informer)
    assert sorted(recorder.adds) == [f"n{i}" for i in range(7)]
    assert sum(1 for r in kube.requests if r[0] == "list") == 1
    cached = informer.get("n0")
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
    assert "images" not in cached["status"]
    await _stop(task)


async def test_watch_events_reach_handlers_in_order(clock: FakeClock) -> None:
    kube = FakeKube()
    informer = Informer(kube, NODES, clock=clock)
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())
    task = await _start(informer)
    await _node(kube, "a")
    await kube.patch(NODES, "a", {"metadata": {"labels": {"x": "1"}}}, patch_type=PatchType.MERGE)
    await kube.delete(NODES, "a")
    await _settle()
    assert (recorder.adds, recorder.updates, recorder.deletes) == (["a"], ["a"], ["a"])
    assert informer.keys() == []
    await _stop(task)


async def test_relist_after_gone_reports_the_gap_exactly_once(clock: FakeClock) -> None:
    kube = FakeKube()
    partition = PartitionableKube(kube)
    for name in ("keep", "change", "vanish"):
        await _node(kube, name)
    informer = Informer(partition, NODES, clock=clock)
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())
    task = await _start(informer)

    partition.cut()
    await _settle()
    await kube.delete(NODES, "vanish")
    await kube.patch(
        NODES, "change", {"metadata": {"labels": {"v": "2"}}}, patch_type=PatchType.MERGE
    )
    await _node(kube, "new")
    kube.compact()
    partition.heal()
    await clock.advance(60)
    await _settle()

    assert recorder.deletes == ["vanish"]
    assert recorder.updates == ["change"]
    assert sorted(recorder.adds) == ["change", "keep", "new", "vanish"]
    assert sorted(informer.keys()) == sorted(o["metadata"]["name"] for o in kube.objects(NODES))
    assert informer.relists == 1
    await _stop(task)


async def test_broken_watch_resumes_without_relisting(clock: FakeClock) -> None:
    kube = FakeKube()
    partition = PartitionableKube(kube)
    informer = Informer(partition, NODES, clock=clock)
    task = await _start(informer)
    partition.cut()
    await _settle()
    await _node(kube, "during-gap")
    partition.heal()
    await clock.advance(60)
    await _settle()
    assert informer.keys() == ["during-gap"]
    assert sum(1 for r in kube.requests if r[0] == "list") == 1, "resumed from the last version"
    assert informer.relists == 0
    await _stop(task)


async def test_indexers_and_late_handlers(clock: FakeClock) -> None:
    kube = FakeKube()
    await _node(kube, "a", provider_id="fake://1")
    factory = SharedInformerFactory(kube, clock=clock)
    informer = factory.informer(NODES)
    assert factory.informer(NODES) is informer, "one shared informer per resource"
    factory.start()
    await factory.wait_for_sync()
    assert [o["metadata"]["name"] for o in informer.by_index("providerID", "fake://1")] == ["a"]
    await kube.patch(NODES, "a", {"spec": {"providerID": "fake://2"}}, patch_type=PatchType.MERGE)
    await _settle()
    assert informer.by_index("providerID", "fake://1") == []
    assert len(informer.by_index("providerID", "fake://2")) == 1
    late = Recorder()
    informer.add_event_handler(late.handler())
    assert late.adds == ["a"], "a late handler sees the cache replayed as adds"
    await factory.stop()


async def test_a_failing_handler_does_not_stop_the_informer(clock: FakeClock) -> None:
    kube = FakeKube()
    informer = Informer(kube, NODES, clock=clock)

    def explode(obj: Obj) -> None:
        raise RuntimeError("handler bug")

    recorder = Recorder()
    informer.add_event_handler(EventHandler(on_add=explode))
    informer.add_event_handler(recorder.handler())
    task = await _start(informer)
    await _node(kube, "a")
    await _node(kube, "b")
    await _settle()
    assert recorder.adds == ["a", "b"]
    await _stop(task)


def test_copy_obj_is_deep() -> None:
    original: Obj = {"metadata": {"labels": {"a": "1"}}}
    copied = copy_obj(original)
    copied["metadata"]["labels"]["a"] = "2"
    assert original["metadata"]["labels"]["a"] == "1"


KUBELET_STATUS: Obj = {
    "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    "conditions": [{"type": "Ready", "status": "True"}],
    "images": [{"names": ["big"]}],
    "nodeInfo": {"kubeletVersion": "v1.36.3"},
    "capacity": {"cpu": "4"},
    "allocatable": {"cpu": "3900m"},
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
}


@pytest.mark.parametrize(
    ("slim", "kept"),
    [
        pytest.param(slim_node, {"addresses", "conditions"}, id="node-keeps-addresses"),
        pytest.param(slim_object, set(KUBELET_STATUS) - {"images"}, id="generic-drops-only-images"),
    ],
)  # fmt: skip
def test_status_slimming(slim: Callable[[Obj], Obj], kept: set[str]) -> None:
    obj: Obj = {"metadata": {"name": "x"}, "status": copy.deepcopy(KUBELET_STATUS)}
    assert set(slim(obj)["status"]) == kept


async def test_a_node_informer_slims_with_slim_node(clock: FakeClock) -> None:
    kube = FakeKube()
    await kube.create(NODES, {"metadata": {"name": "x"}, "status": KUBELET_STATUS})
    informer = Informer(kube, NODES, clock=clock)
    task = await _start(informer)
    assert set(informer.items()[0]["status"]) == {"addresses", "conditions"}
    await _stop(task)


async def test_a_big_list_lets_the_loop_run_while_its_events_are_handled(clock: FakeClock) -> None:
    """1,200 objects in one page: other tasks run between the events (every 500), so
    /metrics and /healthz answer while 10,000 Nodes' handlers run; every add still comes,
    in order."""
    kube = FakeKube()
    for i in range(1200):
        await _node(kube, f"n{i:04d}")
    informer = Informer(kube, NODES, page_size=0, clock=clock)
    seen_at: list[int] = []
    recorder = Recorder()
    informer.add_event_handler(recorder.handler())

    async def other_task() -> None:
        while len(recorder.adds) < 1200:
            seen_at.append(len(recorder.adds))
            await asyncio.sleep(0)

    other = asyncio.create_task(other_task())
    task = await _start(informer)
    await other
    assert recorder.adds == sorted(recorder.adds)
    assert len(recorder.adds) == 1200
    assert {500, 1000} <= set(seen_at)  # it ran in the middle of the replace
    await _stop(task)
