"""Work queues with client-go semantics, in asyncio.

Three layers, as in ``k8s.io/client-go/util/workqueue``:

* :class:`WorkQueue` — a FIFO of keys with the *dirty* and *processing* sets. A key is queued
  at most once however often it is added; a key added while a worker is processing it is not
  handed to a second worker but re-queued when :meth:`WorkQueue.done` is called, so one key is
  never processed concurrently.
* :class:`DelayingQueue` — adds :meth:`DelayingQueue.add_after`: the key enters the queue once
  its delay has passed on the clock seam. A key already waiting keeps the earlier deadline.
* :class:`RateLimitingQueue` — adds :meth:`~RateLimitingQueue.add_rate_limited`,
  :meth:`~RateLimitingQueue.forget` and :meth:`~RateLimitingQueue.num_requeues`, delegating to a
  :class:`kccm.runtime.ratelimiters.RateLimiter`.

Getting work: ``key = await queue.get()`` returns the next key and raises :class:`ShutDown`
once the queue is shut down *and* empty (client-go's ``Get`` returns ``shutdown=true`` at the
same moment: keys already queued are still handed out after ``shutdown()``). Every key
obtained from ``get`` must be passed to ``done``.

Metrics (client-go's names, label ``name``) are registered on a caller-supplied
``prometheus_client.CollectorRegistry`` when one is given; see :mod:`kccm.runtime.metrics`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry

from kccm.runtime.metrics import NOOP_METRICS, QueueMetrics, workqueue_metrics
from kccm.runtime.ratelimiters import RateLimiter
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["DelayingQueue", "RateLimitingQueue", "ShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` when the queue is shut down and has nothing left."""


class WorkQueue(Generic[T]):
    """client-go's ``workqueue.Typed``: dedup, no concurrent processing, FIFO order."""

    def __init__(
        self,
        name: str = "",
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.name = name
        self._clock = clock
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._metrics: QueueMetrics = (
            workqueue_metrics(registry).for_queue(name, clock) if registry else NOOP_METRICS
        )

    def __len__(self) -> int:
        """Keys waiting to be handed out (client-go ``Len``)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> frozenset[T]:
        """Keys handed out by :meth:`get` and not yet :meth:`done`."""
        return frozenset(self._processing)

    def add(self, key: T) -> None:
        """Queue ``key`` unless it is already queued; ignored after shutdown.

        A key being processed is marked dirty and re-queued by :meth:`done`.
        """
        if self._shutting_down or key in self._dirty:
            return
        self._metrics.add(key)
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_getter()

    async def get(self) -> T:
        """Wait for the next key and mark it processing. Raises :class:`ShutDown`."""
        while not self._queue and not self._shutting_down:
            await self._wait_for_key()
        if not self._queue:
            raise ShutDown(self.name)
        key = self._queue.popleft()
        self._metrics.get(key)
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: T) -> None:
        """Mark ``key`` finished; re-queue it if it was added while processing."""
        self._metrics.done(key)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_getter()
        if not self._processing:
            self._wake_drainers()

    def shutdown(self) -> None:
        """Stop accepting keys and wake every waiting getter (client-go ``ShutDown``)."""
        self._shutting_down = True
        self._wake_all_getters()

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until no key is being processed (``ShutDownWithDrain``).

        Keys still queued (including one re-queued by ``done`` because it was added while
        processing) are not waited for; ``get`` keeps handing them out until the queue is
        empty.
        """
        self.shutdown()
        while self._processing:
            future = asyncio.get_running_loop().create_future()
            self._drainers.append(future)
            await future

    async def _wait_for_key(self) -> None:
        future = asyncio.get_running_loop().create_future()
        self._getters.append(future)
        try:
            await future
        except asyncio.CancelledError:
            self._pass_on_wakeup(future)
            raise

    def _pass_on_wakeup(self, future: asyncio.Future[None]) -> None:
        """A getter cancelled after being woken hands its wake-up to the next getter."""
        if future.done() and not future.cancelled() and self._queue:
            self._wake_getter()
        elif future in self._getters:
            self._getters.remove(future)

    def _wake_getter(self) -> None:
        while self._getters:
            future = self._getters.popleft()
            if not future.done():
                future.set_result(None)
                return

    def _wake_all_getters(self) -> None:
        while self._getters:
            self._wake_getter()

    def _wake_drainers(self) -> None:
        drainers, self._drainers = self._drainers, []
        for future in drainers:
            if not future.done():
                future.set_result(None)


class DelayingQueue(WorkQueue[T]):
    """client-go's delaying queue: :meth:`add_after` on the clock seam.

    Waiting keys sit in a heap ordered by deadline (ties in call order). One timer task sleeps
    until the earliest deadline, adds every key that is due, and re-arms itself.
    """

    def __init__(
        self,
        name: str = "",
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        super().__init__(name, registry=registry, clock=clock)
        self._waiting: list[tuple[float, int, T]] = []
        self._deadlines: dict[T, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_deadline: float | None = None

    @property
    def waiting(self) -> int:
        """Keys waiting for their delay to pass."""
        return len(self._deadlines)

    def add_after(self, key: T, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds (at once if ``delay <= 0``).

        Counted in ``workqueue_retries_total`` like client-go's ``AddAfter``. If ``key`` is
        already waiting, only an earlier deadline replaces the known one.
        """
        if self._shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(key)
            return
        self._schedule(key, self._clock.monotonic() + delay)

    def shutdown(self) -> None:
        """Stop accepting keys; keys still waiting for their delay are dropped."""
        super().shutdown()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._deadlines.clear()

    def _schedule(self, key: T, deadline: float) -> None:
        known = self._deadlines.get(key)
        if known is not None and known[0] <= deadline:
            return
        entry = (deadline, next(self._seq))
        self._deadlines[key] = entry
        heapq.heappush(self._waiting, (*entry, key))
        self._arm_timer()

    def _arm_timer(self) -> None:
        deadline = self._next_deadline()
        if deadline is None or deadline == self._timer_deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_deadline = deadline
        self._timer = asyncio.get_running_loop().create_task(
            self._fire_at(deadline), name=f"workqueue-{self.name}-delay"
        )

    async def _fire_at(self, deadline: float) -> None:
        await self._clock.sleep(deadline - self._clock.monotonic())
        self._timer = None
        self._timer_deadline = None
        self._add_due()
        self._arm_timer()

    def _add_due(self) -> None:
        now = self._clock.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            deadline, seq, key = heapq.heappop(self._waiting)
            if self._deadlines.get(key) == (deadline, seq):
                del self._deadlines[key]
                self.add(key)

    def _next_deadline(self) -> float | None:
        while self._waiting:
            deadline, seq, key = self._waiting[0]
            if self._deadlines.get(key) == (deadline, seq):
                return deadline
            heapq.heappop(self._waiting)
        return None


class RateLimitingQueue(DelayingQueue[T]):
    """client-go's rate-limiting queue: a delaying queue plus a :class:`RateLimiter`."""

    def __init__(
        self,
        rate_limiter: RateLimiter,
        name: str = "",
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        super().__init__(name, registry=registry, clock=clock)
        self.rate_limiter = rate_limiter

    def add_rate_limited(self, key: T) -> float:
        """Add ``key`` after the delay the rate limiter asks for (``AddRateLimited``); returns
        that delay in seconds."""
        delay = self.rate_limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: T) -> None:
        """Tell the rate limiter to stop tracking ``key`` (its failures reset)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: T) -> int:
        """How many times ``key`` has been rate-limited since it was last forgotten."""
        return self.rate_limiter.num_requeues(key)
