"""kccm.util.gcpolicy: the synced caches leave the cycle collector's scans; refcounting still
frees them."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kccm.util.gcpolicy import YOUNG_THRESHOLD, freeze_synced_caches


class Cached(dict[str, object]):
    """A dict that can be weakly referenced, standing for one cached object."""


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    assert gc.get_freeze_count() == 0, "something else froze this test process"
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()  # leave the process's collector as found
    gc.set_threshold(*threshold)


def test_the_caches_move_to_the_permanent_generation() -> None:
    cache = [Cached(labels={"zone": f"z{i}"}) for i in range(1000)]
    assert any(o is cache[0] for o in gc.get_objects())
    frozen = freeze_synced_caches()
    assert frozen == gc.get_freeze_count() >= len(cache)
    # gc.get_objects() lists what collections scan: the permanent generation is left out
    assert not any(o is cache[0] for o in gc.get_objects())


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
