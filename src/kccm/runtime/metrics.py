"""Workqueue metrics with client-go's names, on a caller-supplied CollectorRegistry.

client-go's ``defaultQueueMetrics`` keeps the time each key was added and the time each key
started processing; from those it observes ``queue_duration`` on ``Get`` and ``work_duration``
on ``Done``. ``unfinished_work_seconds`` and ``longest_running_processor_seconds`` are computed
from the in-flight start times; client-go refreshes them every 500 ms, here they are computed
when the registry is scraped. Every series carries the label ``name`` (the queue's name).
Timestamps come from the clock seam.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kccm.util.clock import Clock

__all__ = ["NOOP_METRICS", "QueueMetrics", "WorkqueueMetricsProvider", "workqueue_metrics"]

# client-go: metrics.ExponentialBuckets(10e-9, 10, 12), i.e. 10ns .. 1000s.
DURATION_BUCKETS = tuple(1e-8 * 10**i for i in range(12))


class QueueMetrics:
    """Per-queue recorder; this base class records nothing (client-go's noop provider)."""

    def add(self, key: Hashable) -> None:
        """A key entered the queue (dirty)."""

    def get(self, key: Hashable) -> None:
        """A key was handed to a worker."""

    def done(self, key: Hashable) -> None:
        """A worker finished a key."""

    def retry(self) -> None:
        """A delayed (``add_after``) add was requested."""


NOOP_METRICS = QueueMetrics()


class _Families:
    """The seven metric families, registered once per registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["name"]
        self.depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", labels, registry=registry
        )
        self.adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            labels,
            registry=registry,
        )
        self.longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            labels,
            registry=registry,
        )


class _PrometheusQueueMetrics(QueueMetrics):
    """client-go's ``defaultQueueMetrics`` for one queue name."""

    def __init__(self, families: _Families, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = families.depth.labels(name=name)
        self._adds = families.adds.labels(name=name)
        self._queue_duration = families.queue_duration.labels(name=name)
        self._work_duration = families.work_duration.labels(name=name)
        self._retries = families.retries.labels(name=name)
        self._added_at: dict[Hashable, float] = {}
        self._started_at: dict[Hashable, float] = {}
        families.unfinished.labels(name=name).set_function(self.unfinished_work_seconds)
        families.longest.labels(name=name).set_function(self.longest_running_seconds)

    def add(self, key: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(key, self._clock.monotonic())

    def get(self, key: Hashable) -> None:
        self._depth.dec()
        now = self._clock.monotonic()
        added = self._added_at.pop(key, None)
        if added is not None:
            self._queue_duration.observe(now - added)
        self._started_at[key] = now

    def done(self, key: Hashable) -> None:
        started = self._started_at.pop(key, None)
        if started is not None:
            self._work_duration.observe(self._clock.monotonic() - started)

    def retry(self) -> None:
        self._retries.inc()

    # Both are read at a scrape, on the server's thread, while the daemon's loop adds and
    # removes keys: they iterate a copy (``tuple()`` of the values is taken under the GIL).

    def unfinished_work_seconds(self) -> float:
        """Sum of the ages of every key being processed (client-go updateUnfinishedWork)."""
        now = self._clock.monotonic()
        return sum(now - started for started in tuple(self._started_at.values()))

    def longest_running_seconds(self) -> float:
        """Age of the oldest key being processed, 0 when idle."""
        now = self._clock.monotonic()
        return max((now - started for started in tuple(self._started_at.values())), default=0.0)


class WorkqueueMetricsProvider:
    """Registers the workqueue families on one registry and hands out per-queue recorders.

    Queue names should be unique per registry: two queues with one name share the series.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._families = _Families(registry)

    def for_queue(self, name: str, clock: Clock) -> QueueMetrics:
        return _PrometheusQueueMetrics(self._families, name, clock)


_PROVIDERS: weakref.WeakKeyDictionary[CollectorRegistry, WorkqueueMetricsProvider] = (
    weakref.WeakKeyDictionary()
)


def workqueue_metrics(registry: CollectorRegistry) -> WorkqueueMetricsProvider:
    """The provider for ``registry``, created (and its families registered) on first use."""
    provider = _PROVIDERS.get(registry)
    if provider is None:
        provider = _PROVIDERS[registry] = WorkqueueMetricsProvider(registry)
    return provider
