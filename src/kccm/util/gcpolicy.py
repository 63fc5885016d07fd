"""The daemon's garbage-collector policy: once the informer caches have synced, what they hold
is frozen out of the cyclic collector's scans.

CPython's cycle collector scans every tracked container on a full (generation 2) collection,
holding the GIL: neither the daemon's loop nor the health and metrics server's thread runs
meanwhile. At 10,000 Nodes + 3,000 LoadBalancer Services the daemon tracks about 350,000
objects, most of them the Node and Service caches; six full collections during the start-up
sync took 0.71 s in all, the longest 186 ms, and were the slowest ``/healthz`` answers left
once the server had its own thread (issue 28).

The caches live as long as the daemon; a watch event replaces an object whole. So once they
have synced, :func:`freeze_synced_caches` collects the young generations (what the start-up
left there as cyclic garbage is freed) and moves every tracked object to the permanent
generation (``gc.freeze()``), which later collections skip: they scan only what was allocated
since. Frozen objects are still freed by reference counting when their last reference goes (a
replaced Node, a deleted Service: plain acyclic dicts and lists). What freezing costs: an
object alive at that moment that later becomes part of cyclic garbage, or cyclic garbage
already in the oldest generation, is never reclaimed: bounded by what exists at the freeze,
once. A full collection first would free the latter, but at 10,000 Nodes + 3,000 Services it
found nothing (0 unreachable objects of 215,000) and held the GIL 139 ms (the runs with it
answered ``/healthz`` at worst in 92 and 169 ms, those without in 79): the young collection
(1 ms) is kept.

The full collections during the initial list are avoided too (:func:`freeze_while_syncing`,
from the moment the informers start): the same threshold from then on, and what survives each
young collection is frozen at once (every freeze also zeroes the collection counts, so no older
generation's collection starts meanwhile), so no collection scans the caches as they fill. At
10,000 Nodes + 3,000 Services the initial list otherwise ran two full collections of 90 and
99 ms, the longest the health server's thread waited for the GIL in that run (a thread timing
its own 1 ms sleeps, beside ``gc.callbacks``, issue 28). The cost is the freeze's, once per
young collection: whatever is alive at one of them (the caches, but also a request's buffers,
a task, an exception and its traceback) and later becomes cyclic garbage is never reclaimed.
It is bounded by what is in flight at each of at most :data:`SYNC_FREEZES` collections, so a
sync that never completes (an API server that refuses the lists) returns to normal
collections. RSS at 10,000 + 3,000 did not grow: 207 MiB on ``fake``, 217-220 MiB on ``local``
(218-225 in the same day's runs before).

The young generation is then collected every :data:`YOUNG_THRESHOLD` net allocations of
tracked objects (allocations less deallocations) instead of CPython's 700, and the older
generations, counted in young collections, as much less often. A young collection costs about
what is still alive in it (what died meanwhile was freed by reference counting), so the
collections are fewer and each somewhat dearer: over 1,000 Node initialisations 3 collections
and 11-13 ms of CPU instead of 66 and 43 ms (issue 28, docs/measurements.md). Cyclic garbage waits
longer to be freed: up to that many net allocations in the young generation, and in the older
ones until their own, rarer, collection.
"""

from __future__ import annotations

import gc
import logging

__all__ = [
    "SYNC_FREEZES",
    "YOUNG_THRESHOLD",
    "freeze_synced_caches",
    "freeze_while_syncing",
    "stop_freezing_while_syncing",
]

YOUNG_THRESHOLD = 10_000
SYNC_FREEZES = 256
"""Young collections whose survivors :func:`freeze_while_syncing` freezes, at most: some 2.5
million net allocations; the initial list of 10,000 realistic Nodes makes about 0.9 million
(86 tracked containers a Node)."""

_log = logging.getLogger(__name__)


class _SurvivorFreezer:
    """A ``gc.callbacks`` entry freezing what survived each collection, ``left`` times."""

    def __init__(self) -> None:
        self.left = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        left = self.left
        if phase == "stop" and left > 0:
            self.left = left - 1
            gc.freeze()


_FREEZER = _SurvivorFreezer()


def freeze_while_syncing() -> None:
    """From now until :func:`freeze_synced_caches`, collect the young generation every
    :data:`YOUNG_THRESHOLD` allocations and freeze what survives each collection."""
    _young_threshold()
    _FREEZER.left = SYNC_FREEZES
    if _FREEZER not in gc.callbacks:
        gc.callbacks.append(_FREEZER)


def stop_freezing_while_syncing() -> None:
    """No more freezing of survivors (the sync ended, or failed: the daemon is stopping)."""
    _FREEZER.left = 0
    if _FREEZER in gc.callbacks:
        gc.callbacks.remove(_FREEZER)


def _young_threshold() -> None:
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def freeze_synced_caches() -> int:
    """Collect the young generations, freeze every tracked object and collect the young
    generation every :data:`YOUNG_THRESHOLD` allocations (no longer freezing survivors);
    returns how many the permanent generation holds."""
    stop_freezing_while_syncing()
    gc.collect(1)
    gc.freeze()
    _young_threshold()
    frozen = gc.get_freeze_count()
    _log.debug("froze %d objects out of the cycle collector's scans", frozen)
    return frozen
