"""One lock per balancer, so the syncs of Services sharing it take turns.

kccm runs several Service syncs at once (the framework's ``--concurrent-service-syncs``,
10 by default; OCCM runs one). Services sharing a balancer through ``load-balancer-id`` read
its tag list (which Services use it), change it and write it back whole: Octavia has no
compare-and-swap, the last ``PUT`` wins. Two syncs doing that at once lose a tag, let a
balancer take more Services than ``max-shared-lb`` allows, or let the delete of a Service
that read the list before a guest joined cascade-delete the balancer under the guest. An
ensure or a delete therefore holds its balancer's lock from the read its decisions rest on
to its last write (:class:`~.balancers.OctaviaLoadBalancers`).

The locks are per process, so the guarantee rests on one kccm process writing the cloud's
balancers: the leader (leader election, on by default, keeps it so for replicas of kccm).
Another controller writing the same balancers is not held back: Octavia's ``409`` to a
write while the balancer is busy makes kccm rebuild its tag list from the balancer read
again (:meth:`.octavia.Octavia.update_tags`), which narrows the window between two writers
without closing it. OCCM and kccm running together during a switch are two such writers:
stop OCCM before kccm starts.

A lock is re-entrant (the same sync may meet its balancer twice) and forgotten once no sync
holds or waits for it. A sync that must wait says so at DEBUG, and waits at most
:data:`LOCK_WAIT_S`: many Services on one balancer must not park every sync worker behind
it, so a sync still waiting then fails with :class:`BalancerBusy`, which the service
controller retries with its backoff. The wait is a threading lock's timeout (real time: no
clock can move it); how long a sync waited is handed to ``on_waited`` (measured with the
given clock), which the provider uses to leave it out of the reconcile duration metric.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kccm.cloudprovider import CloudProviderError
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["LOCK_WAIT_S", "BalancerBusy", "BalancerLocks"]

log = logging.getLogger(__name__)

LOCK_WAIT_S = 30.0
"""How long a sync waits for another sync of its balancer before it fails, to be retried."""


class BalancerBusy(CloudProviderError):
    """Another Service's sync held the balancer for longer than :data:`LOCK_WAIT_S`; the
    sync fails and the service controller retries it with backoff."""

    def __init__(self, lb_id: str) -> None:
        super().__init__(f"balancer {lb_id} is busy with another Service's sync; retrying")
        self.lb_id = lb_id


@dataclass
class _Entry:
    lock: threading.RLock = field(default_factory=threading.RLock)
    users: int = 0


class BalancerLocks:
    """The locks of the balancers being synced, by balancer ID.

    ``wait_s``: the longest wait for a turn (0: none, a busy balancer fails at once);
    ``on_waited``: told the seconds of every wait that ended with the lock."""

    def __init__(
        self,
        wait_s: float = LOCK_WAIT_S,
        clock: Clock = REAL_CLOCK,
        on_waited: Callable[[float], None] | None = None,
    ) -> None:
        self.wait_s = wait_s
        self._clock = clock
        self._on_waited = on_waited
        self._mutex = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextlib.contextmanager
    def hold(self, lb_id: str) -> Iterator[None]:
        """Hold ``lb_id``'s lock for the ``with`` block, waiting for another sync's turn at
        most :attr:`wait_s` (then :class:`BalancerBusy`)."""
        entry = self._enter(lb_id)
        try:
            if not entry.lock.acquire(blocking=False):
                self._wait(lb_id, entry)
            try:
                yield
            finally:
                entry.lock.release()
        finally:
            self._leave(lb_id, entry)

    def _wait(self, lb_id: str, entry: _Entry) -> None:
        start = self._clock.monotonic()
        log.debug("load balancer %s: waiting for another sync of it", lb_id)
        if not entry.lock.acquire(timeout=self.wait_s):
            log.info(
                "load balancer %s: still busy after %.0f s; retrying later", lb_id, self.wait_s
            )
            raise BalancerBusy(lb_id)
        if self._on_waited is not None:
            self._on_waited(self._clock.monotonic() - start)

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
