"""Workqueue metrics: client-go's names and label, observed on fake time."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from kccm.runtime.ratelimiters import ItemExponentialFailureRateLimiter
from kccm.runtime.workqueue import RateLimitingQueue, WorkQueue
from kccm.util.clock import FakeClock


def _value(registry: CollectorRegistry, metric: str, queue: str = "Nodes") -> float:
    value = registry.get_sample_value(metric, {"name": queue})
    assert value is not None, f"{metric} not exported"
    return value


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


async def test_depth_and_adds_count_only_new_keys(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue: WorkQueue[str] = WorkQueue("Nodes", registry=registry, clock=clock)
    for key in ("a", "a", "b"):
        queue.add(key)
    assert _value(registry, "workqueue_adds_total") == 2
    assert _value(registry, "workqueue_depth") == 2
    await queue.get()
    assert _value(registry, "workqueue_depth") == 1


async def test_queue_and_work_durations_follow_the_clock(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue: WorkQueue[str] = WorkQueue("Nodes", registry=registry, clock=clock)
    queue.add("a")
    await clock.advance(3)
    key = await queue.get()
    await clock.advance(7)
    queue.done(key)
    assert _value(registry, "workqueue_queue_duration_seconds_sum") == 3
    assert _value(registry, "workqueue_work_duration_seconds_sum") == 7
    assert _value(registry, "workqueue_work_duration_seconds_count") == 1


async def test_unfinished_work_is_computed_at_scrape_time(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    queue: WorkQueue[str] = WorkQueue("Nodes", registry=registry, clock=clock)
    queue.add("a")
    queue.add("b")
    await queue.get()
    await clock.advance(10)
    await queue.get()
    await clock.advance(5)
    assert _value(registry, "workqueue_unfinished_work_seconds") == 15 + 5
    assert _value(registry, "workqueue_longest_running_processor_seconds") == 15
    queue.done("a")
    queue.done("b")
    assert _value(registry, "workqueue_longest_running_processor_seconds") == 0


async def test_retries_count_every_delayed_add(
    registry: CollectorRegistry, clock: FakeClock
) -> None:
    limiter = ItemExponentialFailureRateLimiter(1.0, 10.0)
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        limiter, "service", registry=registry, clock=clock
    )
    queue.add_rate_limited("a")
    queue.add_after("b", 0)
    queue.add_after("c", 5)
    assert _value(registry, "workqueue_retries_total", "service") == 3


def test_two_queues_share_one_registry(registry: CollectorRegistry) -> None:
    first: WorkQueue[str] = WorkQueue("service", registry=registry)
    second: WorkQueue[str] = WorkQueue("node", registry=registry)
    first.add("a")
    second.add("a")
    second.add("b")
    assert _value(registry, "workqueue_depth", "service") == 1
    assert _value(registry, "workqueue_depth", "node") == 2


def test_queue_without_registry_records_nothing() -> None:
    queue: WorkQueue[str] = WorkQueue("quiet")
    queue.add("a")
    assert len(queue) == 1
