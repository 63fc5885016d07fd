"""The generic controller loop: requeue decisions, concurrency, graceful stop; on fake time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from kccm.runtime.controller import Controller, Retryable, retry_delay
from kccm.runtime.ratelimiters import (
    ItemExponentialFailureRateLimiter,
    RateLimiter,
    service_controller_rate_limiter,
)
from kccm.runtime.workqueue import RateLimitingQueue
from kccm.util.clock import FakeClock


class Boom(Exception):
    """A plain failure: rate-limited requeue."""


class RetryLater(Exception):
    """Shaped like kccm.cloudprovider.errors.RetryError: ``retry_after`` in seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"retry after {retry_after}s")
        self.retry_after = retry_after


def wrapped(delay: float) -> Exception:
    try:
        raise RetryLater(delay)
    except RetryLater as inner:
        outer = RuntimeError("while syncing")
        outer.__cause__ = inner
        return outer


OK = None
Outcome = Exception | None


@dataclass
class Recorder:
    """A sync function that plays back ``outcomes`` and records when and how it was called."""

    queue: RateLimitingQueue[str]
    clock: FakeClock
    outcomes: Iterator[Outcome]
    times: list[float] = field(default_factory=list)
    requeues: list[int] = field(default_factory=list)

    async def __call__(self, key: str) -> None:
        self.times.append(self.clock.monotonic())
        self.requeues.append(self.queue.num_requeues(key))
        outcome = next(self.outcomes, OK)
        if outcome is not None:
            raise outcome

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.times, self.times[1:], strict=False)]


SVC = service_controller_rate_limiter

CASES = [
    pytest.param(
        SVC,
        [Boom(), Boom(), Boom(), OK],
        [5, 10, 20],
        [0, 1, 2, 3],
        0,
        id="error-backs-off-5-10-20",
    ),
    pytest.param(
        lambda: ItemExponentialFailureRateLimiter(100, 300),
        [Boom(), Boom(), Boom(), Boom(), OK],
        [100, 200, 300, 300],
        [0, 1, 2, 3, 4],
        0,
        id="error-backoff-is-capped",
    ),
    pytest.param(SVC, [RetryLater(42), OK], [42], [0, 0], 0, id="retry-after-exact-delay-no-count"),
    pytest.param(SVC, [wrapped(7), OK], [7], [0, 0], 0, id="retry-after-found-through-cause"),
    pytest.param(SVC, [RetryLater(0), OK], [0], [0, 0], 0, id="retry-after-zero-requeues-at-once"),
    pytest.param(
        SVC,
        [Boom(), RetryLater(42), Boom(), OK],
        [5, 42, 10],
        [0, 1, 1, 2],
        0,
        id="retry-after-keeps-the-failure-count",
    ),
    pytest.param(SVC, [Boom(), Boom(), OK], [5, 10], [0, 1, 2], 0, id="success-forgets"),
    pytest.param(
        SVC, [RetryLater(3)] * 3 + [OK], [3, 3, 3], [0, 0, 0, 0], 0, id="retry-after-repeats"
    ),
]


@pytest.mark.parametrize(("limiter", "outcomes", "gaps", "requeues", "final"), CASES)
async def test_sync_outcome_decides_the_requeue(
    limiter: type[RateLimiter],
    outcomes: list[Outcome],
    gaps: list[float],
    requeues: list[int],
    final: int,
    clock: FakeClock,
) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(limiter(), "test", clock=clock)
    sync = Recorder(queue, clock, iter(outcomes))
    controller = Controller("test", queue, sync, workers=2, clock=clock)
    runner = asyncio.create_task(controller.run())
    queue.add("ns/a")
    await clock.run_until_idle()
    assert sync.gaps == pytest.approx(gaps)
    assert sync.requeues == requeues
    assert queue.num_requeues("ns/a") == final
    assert await controller.stop(grace=1)
    await runner


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        pytest.param(Boom(), None, id="plain-error-has-no-delay"),
        pytest.param(RetryLater(2.5), 2.5, id="attribute-seconds"),
        pytest.param(wrapped(9), 9.0, id="through-cause"),
        pytest.param(ValueError("x"), None, id="no-attribute"),
    ],
)
def test_retry_delay(exc: Exception, expected: float | None) -> None:
    assert retry_delay(exc) == expected


def test_retry_delay_accepts_a_method_or_timedelta() -> None:
    class GoStyle(Exception):
        def retry_after(self) -> timedelta:
            return timedelta(seconds=42)

    assert retry_delay(GoStyle()) == 42
    assert isinstance(RetryLater(1), Retryable)


async def test_errors_are_logged(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "svc", clock=clock)
    sync = Recorder(queue, clock, iter([Boom("cloud said no")]))
    controller = Controller("service", queue, sync, clock=clock)
    queue.add("ns/a")
    with caplog.at_level(logging.WARNING):
        assert await controller.process_next()
    assert "error syncing 'ns/a': cloud said no, requeuing" in caplog.text


async def test_one_key_is_never_synced_concurrently(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "test", clock=clock)
    running: dict[str, int] = {}
    peak: dict[str, int] = {}
    calls: list[str] = []

    async def sync(key: str) -> None:
        calls.append(key)
        running[key] = running.get(key, 0) + 1
        peak[key] = max(peak.get(key, 0), running[key])
        await clock.sleep(1)
        running[key] -= 1

    controller = Controller("test", queue, sync, workers=4, clock=clock)
    runner = asyncio.create_task(controller.run())
    for _ in range(3):
        for key in ("a", "a", "b", "c"):
            queue.add(key)
        await clock.advance(0.3)
    assert max(running.values()) == 1
    await clock.run_until_idle()
    assert peak == {"a": 1, "b": 1, "c": 1}
    assert calls.count("a") == 2, "the re-adds while processing collapse into one more sync"
    await controller.stop(grace=1)
    await runner


async def test_distinct_keys_run_in_parallel(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "test", clock=clock)
    finished: list[tuple[str, float]] = []

    async def sync(key: str) -> None:
        await clock.sleep(10)
        finished.append((key, clock.monotonic()))

    controller = Controller("test", queue, sync, workers=3, clock=clock)
    runner = asyncio.create_task(controller.run())
    for key in "abc":
        queue.add(key)
    await clock.advance(10)
    assert sorted(finished) == [("a", 1010.0), ("b", 1010.0), ("c", 1010.0)]
    await controller.stop(grace=1)
    await runner


async def test_stop_lets_in_flight_syncs_finish_and_takes_no_new_work(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "test", clock=clock)
    synced: list[str] = []

    async def sync(key: str) -> None:
        await clock.sleep(5)
        synced.append(key)

    controller = Controller("test", queue, sync, workers=1, clock=clock)
    runner = asyncio.create_task(controller.run())
    queue.add("a")
    queue.add("b")
    await clock.advance(1)
    stopping = asyncio.create_task(controller.stop(grace=30))
    await clock.advance(4)
    assert await stopping
    await runner
    assert synced == ["a"]
    assert queue.processing == frozenset()


async def test_stop_cancels_syncs_that_overrun_the_timeout(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "test", clock=clock)
    cancelled = asyncio.Event()

    async def sync(key: str) -> None:
        try:
            await clock.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    controller = Controller("test", queue, sync, workers=2, clock=clock)
    runner = asyncio.create_task(controller.run())
    queue.add("stuck")
    await clock.advance(1)
    stopping = asyncio.create_task(controller.stop(grace=10))
    await clock.advance(10)
    assert await stopping is False
    await runner
    assert cancelled.is_set()
    assert queue.processing == frozenset()


async def test_zero_workers_waits_for_stop(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(SVC(), "test", clock=clock)
    controller = Controller("test", queue, Recorder(queue, clock, iter([])), workers=0)
    runner = asyncio.create_task(controller.run())
    queue.add("a")
    await clock.advance(1)
    assert not runner.done()
    assert await controller.stop()
    await runner
    assert len(queue) == 1
