"""One lock per balancer, so the syncs of Services sharing it take turns.

kccm runs several Service syncs at once (the framework's ``--concurrent-service-syncs``,
10 by default; OCCM runs one). Services sharing a balancer through ``load-balancer-id`` read
its tag list (which Services use it), change it and write it back whole: Octavia has no
compare-and-swap, the last ``PUT`` wins. Two syncs doing that at once lose a tag, let a
balancer take more Services than ``max-shared-lb`` allows, or let the delete of a Service
that read the list before a guest joined cascade-delete the balancer under the guest. An
ensure or a delete therefore holds its balancer's lock from the read its decisions rest on
to its last write (:class:`~.balancers.OctaviaLoadBalancers`). The locks are per process: a
second controller writing the same balancer is met by Octavia's ``409`` and the write is
rebuilt from the balancer read again (:meth:`.octavia.Octavia.update_tags`).

A lock is re-entrant (the same sync may meet its balancer twice) and forgotten once no sync
holds or waits for it. A sync that must wait says so at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["BalancerLocks"]

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0


class BalancerLocks:
    """The locks of the balancers being synced, by balancer ID."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextlib.contextmanager
    def hold(self, lb_id: str) -> Iterator[None]:
        """Hold ``lb_id``'s lock for the ``with`` block (waiting for another sync's turn)."""
        entry = self._enter(lb_id)
        try:
            if not entry.lock.acquire(blocking=False):
                log.debug("load balancer %s: waiting for another sync of it", lb_id)
                entry.lock.acquire()
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            self._leave(lb_id, entry)

    def held(self) -> list[str]:
        """The IDs with a sync holding or waiting for their lock."""
        with self._mutex:
            return sorted(self._entries)

    def _enter(self, lb_id: str) -> _Entry:
        with self._mutex:
            entry = self._entries.setdefault(lb_id, _Entry())
            entry.users += 1
            return entry

    def _leave(self, lb_id: str, entry: _Entry) -> None:
        with self._mutex:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[lb_id]
