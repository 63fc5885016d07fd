"""The daemon's garbage-collector policy: once the informer caches have synced, what they hold
is frozen out of the cyclic collector's scans.

CPython's cycle collector scans every tracked container on a full (generation 2) collection,
holding the GIL: neither the daemon's loop nor the health and metrics server's thread runs
meanwhile. At 10,000 Nodes + 3,000 LoadBalancer Services the daemon tracks about 350,000
objects, most of them the Node and Service caches; six full collections during the start-up
sync took 0.71 s in all, the longest 186 ms, and were the slowest ``/healthz`` answers left
once the server had its own thread (issue 28).

The caches live as long as the daemon; a watch event replaces an object whole. So once they
have synced, :func:`freeze_synced_caches` collects the young generations (cheap: what the
start-up left there, its finished tasks and answers) and moves every tracked object to the
permanent generation (``gc.freeze()``), which collections skip. Later collections scan only
what was allocated since. Frozen objects are still freed by reference counting when their
last reference goes (a replaced Node, a deleted Service): freezing only exempts them from
cycle detection, so a reference cycle already in the oldest generation at that moment is never
collected. That is at most what the start-up left there, once: bounded, and small against the
caches (the RSS figures of bench/scale.py include it).
"""

from __future__ import annotations

import gc
import logging

__all__ = ["freeze_synced_caches"]

_log = logging.getLogger(__name__)


def freeze_synced_caches() -> int:
    """Collect the young generations, then freeze every tracked object; returns how many the
    permanent generation holds."""
    gc.collect(1)
    gc.freeze()
    frozen = gc.get_freeze_count()
    _log.debug("froze %d objects out of the cycle collector's scans", frozen)
    return frozen
