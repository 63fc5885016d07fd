"""The generic controller loop and periodic loops, on the clock seam.

:class:`Controller` is the worker half of every upstream cloud controller: ``workers`` tasks
take keys from a :class:`~kccm.runtime.workqueue.RateLimitingQueue` and call an async
``sync(key)``. What happens next mirrors ``processNextWorkItem`` in the upstream controllers:

* ``sync`` returns → ``forget(key)`` (its backoff starts over);
* ``sync`` raises an exception carrying a retry delay (see :func:`retry_delay`) →
  ``add_after(key, delay)``: exactly that delay, no ``forget`` and no failure counted, as the
  service controller does for ``api.RetryError``;
* ``sync`` raises anything else → logged and ``add_rate_limited(key)``.

An ``on_outcome(key, error, retry_in)`` callback, when given, learns each sync's result: the
error (None after a success) and the seconds until the queue retries (None when it will not),
so a controller can record what happened (``kccm explain``) without re-deciding the retry.

The retry protocol is structural so that this layer needs nothing from ``kccm.cloudprovider``:
an exception is retryable when it (or an exception it was raised ``from``, like Go's
``errors.As`` through ``%w``) has a ``retry_after`` attribute in seconds (a number, a
``timedelta``, or a method returning one).

:func:`until` is ``wait.Until`` / ``wait.JitterUntil`` / ``wait.NonSlidingUntil``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable, Iterable
from datetime import timedelta
from typing import Generic, Protocol, TypeVar, runtime_checkable

from kccm.runtime.workqueue import RateLimitingQueue, ShutDown
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "Controller",
    "Outcome",
    "Retryable",
    "jitter",
    "retry_delay",
    "sleep_or_stop",
    "until",
    "wait_for_tasks",
]

T = TypeVar("T", bound=Hashable)

Outcome = Callable[[T, Exception | None, float | None], None]
"""``on_outcome(key, error, retry_in)``; see the module docstring."""

_log = logging.getLogger(__name__)


@runtime_checkable
class Retryable(Protocol):
    """An exception that knows when to try again (``kccm.cloudprovider.errors.RetryError``)."""

    retry_after: float


def retry_delay(exc: BaseException) -> float | None:
    """Seconds to wait before retrying, if ``exc`` or its ``__cause__`` chain says so."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        delay = _own_retry_after(current)
        if delay is not None:
            return delay
        current = current.__cause__
    return None


def _own_retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    if callable(value):
        value = value()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class Controller(Generic[T]):
    """``workers`` tasks draining ``queue`` into ``sync``; see the module docstring."""

    def __init__(
        self,
        name: str,
        queue: RateLimitingQueue[T],
        sync: Callable[[T], Awaitable[None]],
        *,
        workers: int = 1,
        clock: Clock = REAL_CLOCK,
        logger: logging.Logger | None = None,
        on_outcome: Outcome[T] | None = None,
    ) -> None:
        self.name = name
        self.queue = queue
        self.workers = workers
        self._sync = sync
        self._on_outcome = on_outcome
        self._clock = clock
        self._log = logger or _log
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        """Start the workers and return when they have all stopped (see :meth:`stop`).

        Cancelling ``run`` cancels the workers (in-flight syncs see ``CancelledError``). With
        zero workers (upstream accepts ``--concurrent-node-syncs=0``) it just waits for stop.
        """
        if self.workers <= 0:
            await self._stopping.wait()
            return
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self.workers)
        ]
        try:
            await asyncio.wait(self._tasks)
        finally:
            await _cancel_all(self._tasks)
        _raise_first_failure(self._tasks)

    async def stop(self, grace: float = 30.0) -> bool:
        """Stop taking work and shut the queue down; let in-flight syncs finish.

        Syncs still running after ``grace`` seconds (on the clock) are cancelled. Returns
        True when every worker finished in time.
        """
        self._stopping.set()
        self.queue.shutdown()
        finished = await wait_for_tasks(self._tasks, grace, clock=self._clock)
        if not finished:
            self._log.warning("controller %s: cancelling syncs still running after stop", self.name)
            await _cancel_all(self._tasks)
        return finished

    async def process_next(self) -> bool:
        """Take one key and sync it; False once the queue is shut down (processNextWorkItem)."""
        try:
            key = await self.queue.get()
        except ShutDown:
            return False
        try:
            await self._sync_one(key)
        finally:
            self.queue.done(key)
        return True

    async def _worker(self) -> None:
        while not self._stopping.is_set() and await self.process_next():
            pass

    async def _sync_one(self, key: T) -> None:
        try:
            await self._sync(key)
        except Exception as exc:
            self._report(key, exc, self._requeue(key, exc))
        else:
            self.queue.forget(key)
            self._report(key, None, None)

    def _requeue(self, key: T, exc: Exception) -> float | None:
        """Requeue ``key`` after a failure; returns the delay."""
        delay = retry_delay(exc)
        if delay is None:
            self._log.error("%s: error syncing %r: %s, requeuing", self.name, key, exc)
            return self.queue.add_rate_limited(key)
        self._log.warning("%s: error syncing %r (retrying in %gs): %s", self.name, key, delay, exc)
        self.queue.add_after(key, delay)
        return delay

    def _report(self, key: T, exc: Exception | None, retry_in: float | None) -> None:
        if self._on_outcome is None:
            return
        try:
            self._on_outcome(key, exc, retry_in)
        except Exception:
            self._log.exception("%s: recording the outcome of %r failed", self.name, key)


def _raise_first_failure(tasks: Iterable[asyncio.Task[None]]) -> None:
    for task in tasks:
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc


async def _cancel_all(tasks: Iterable[asyncio.Task[None]]) -> None:
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def wait_for_tasks(
    tasks: Iterable[asyncio.Future[None]], within: float, *, clock: Clock = REAL_CLOCK
) -> bool:
    """Wait until every task is done or ``within`` seconds pass on ``clock``; never cancels them.

    Returns True when all are done.
    """
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return True
    waiter = asyncio.ensure_future(asyncio.wait(pending))
    timer = asyncio.ensure_future(clock.sleep(within))
    try:
        await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        timer.cancel()
    return all(task.done() for task in pending)


async def sleep_or_stop(seconds: float, stop: asyncio.Event | None, *, clock: Clock) -> bool:
    """Sleep ``seconds`` on ``clock`` unless ``stop`` is set first; True if stopped."""
    if stop is None:
        await clock.sleep(seconds)
        return False
    if stop.is_set():
        return True
    stopped = asyncio.ensure_future(stop.wait())
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({stopped, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        timer.cancel()
    return stop.is_set()


def jitter(duration: float, max_factor: float, rng: Callable[[], float] = random.random) -> float:
    """``wait.Jitter``: a duration in ``[duration, duration * (1 + max_factor))``.

    A ``max_factor <= 0`` means 1.0, as in Go.
    """
    if max_factor <= 0:
        max_factor = 1.0
    return duration + rng() * max_factor * duration


async def until(
    fn: Callable[[], Awaitable[None]],
    period: float,
    *,
    stop: asyncio.Event | None = None,
    jitter_factor: float = 0.0,
    sliding: bool = True,
    clock: Clock = REAL_CLOCK,
    rng: Callable[[], float] = random.random,
    logger: logging.Logger | None = None,
) -> None:
    """Run ``fn`` every ``period`` seconds until ``stop`` is set (or the task is cancelled).

    ``sliding=True`` is ``wait.Until``: the period starts after ``fn`` returns.
    ``sliding=False`` is ``wait.NonSlidingUntil``: it starts when ``fn`` starts, so a slow
    ``fn`` is followed at once by the next run. ``jitter_factor > 0`` stretches each period by
    ``wait.Jitter``. Where Go's ``HandleCrash`` would crash the process, an exception from
    ``fn`` is logged and the loop goes on.
    """
    log = logger or _log
    while stop is None or not stop.is_set():
        wait = jitter(period, jitter_factor, rng) if jitter_factor > 0 else period
        started = clock.monotonic()
        await _run_logged(fn, log)
        if not sliding:
            wait -= clock.monotonic() - started
        if await sleep_or_stop(max(0.0, wait), stop, clock=clock):
            return


async def _run_logged(fn: Callable[[], Awaitable[None]], log: logging.Logger) -> None:
    try:
        await fn()
    except Exception:
        log.exception("periodic loop: %s failed", getattr(fn, "__qualname__", fn))
