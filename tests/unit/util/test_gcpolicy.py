"""kccm.util.gcpolicy: the synced caches leave the cycle collector's scans; refcounting still
frees them."""

from __future__ import annotations

import gc
import weakref

import pytest

from kccm.util import gcpolicy
from kccm.util.gcpolicy import YOUNG_THRESHOLD, freeze_synced_caches, freeze_while_syncing


class Cached(dict[str, object]):
    """A dict that can be weakly referenced, standing for one cached object."""


pytestmark = pytest.mark.usefixtures("collector_restored")


def tracked(obj: object) -> bool:
    """Whether collections scan ``obj`` (gc.get_objects() leaves the permanent generation out)."""
    return any(o is obj for o in gc.get_objects())


def test_the_caches_move_to_the_permanent_generation() -> None:
    cache = [Cached(labels={"zone": f"z{i}"}) for i in range(1000)]
    assert tracked(cache[0])
    frozen = freeze_synced_caches()
    # not == gc.get_freeze_count(): the count is process-wide and drops whenever any thread
    # (pytest-xdist's own, a finalizer) frees a frozen object by reference counting
    assert frozen >= len(cache)
    assert not tracked(cache[0])


def test_young_garbage_cycles_are_freed_not_frozen() -> None:
    cycle = Cached()
    cycle["self"] = cycle
    gone = weakref.ref(cycle)
    del cycle
    freeze_synced_caches()
    assert gone() is None


def test_a_frozen_object_is_still_freed_when_its_last_reference_goes() -> None:
    cache = {"node-1": Cached(name="node-1")}
    gone = weakref.ref(cache["node-1"])
    freeze_synced_caches()
    del cache["node-1"]  # a watch event replaced or deleted it
    assert gone() is None


def test_the_young_generation_is_then_collected_less_often() -> None:
    _, middle, old = gc.get_threshold()
    assert gc.get_threshold()[0] < YOUNG_THRESHOLD
    freeze_synced_caches()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)


def test_while_syncing_what_survives_a_young_collection_is_frozen() -> None:
    freeze_while_syncing()
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    gc.disable()  # no collection of its own between the page and the check (re-enabled after)
    page = [Cached(name=f"node-{i}") for i in range(500)]  # a page of the initial list
    assert tracked(page[0])
    gc.collect(0)  # what the allocations trigger every YOUNG_THRESHOLD
    assert not tracked(page[0]), "a later full collection would scan the filling cache"


def test_while_syncing_garbage_cycles_are_still_freed() -> None:
    freeze_while_syncing()
    cycle = Cached()
    cycle["self"] = cycle
    gone = weakref.ref(cycle)
    del cycle
    gc.collect(0)
    assert gone() is None


def test_survivors_are_frozen_at_most_sync_freezes_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpolicy, "SYNC_FREEZES", 2)
    freeze_while_syncing()
    gc.collect(0)
    gc.collect(0)
    late = Cached()
    gc.collect(0)
    assert tracked(late), "a sync that never completes returns to normal collections"


def test_once_synced_survivors_are_no_longer_frozen() -> None:
    freeze_while_syncing()
    freeze_synced_caches()
    assert gcpolicy._FREEZER not in gc.callbacks
    later = Cached()
    gc.collect(0)
    assert tracked(later)
