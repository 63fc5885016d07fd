"""kccm.util.gcpolicy: the synced caches leave the cycle collector's scans; refcounting still
frees them."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kccm.util.gcpolicy import freeze_synced_caches


class Cached(dict[str, object]):
    """A dict that can be weakly referenced, standing for one cached object."""


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    assert gc.get_freeze_count() == 0, "something else froze this test process"
    yield
    gc.unfreeze()  # leave the process's collector as found


def test_the_caches_move_to_the_permanent_generation() -> None:
    cache = [Cached(labels={"zone": f"z{i}"}) for i in range(1000)]
    frozen = freeze_synced_caches()
    assert frozen >= len(cache)
    assert frozen == gc.get_freeze_count()


def test_a_frozen_object_is_still_freed_when_its_last_reference_goes() -> None:
    cache = {"node-1": Cached(name="node-1")}
    gone = weakref.ref(cache["node-1"])
    freeze_synced_caches()
    del cache["node-1"]  # a watch event replaced or deleted it
    assert gone() is None
