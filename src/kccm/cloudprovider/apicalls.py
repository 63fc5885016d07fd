"""A provider's own cloud API calls, counted and classed as reads or writes.

The call gate sees the framework's calls into a provider (``ensure_load_balancer``, ...);
what one such call costs in the cloud — how many requests it sends, and whether any of them
change something — only the provider knows. A provider that wants that measured (the
conformance kit's "a second ensure with nothing changed makes no mutating call", the
benchmarks' "0 mutating cloud calls on a restart") keeps one :class:`CloudAPICalls` ledger,
records every request it sends to its cloud with :meth:`CloudAPICalls.record`, and exposes
the ledger through ``cloud_api_calls()`` (the optional :class:`APICallReporter` capability).

The daemon exports a provider's ledger as the counter
``kccm_cloud_api_requests_total{operation, mutating}`` (:func:`register_api_call_metrics`),
read from the ledger at scrape time, so counting costs the provider nothing more.

Whether a request mutates is the provider's declaration, made once per operation (for example
a table of the SDK operations it uses); :func:`classify_by_verb` is a fallback for SDKs whose
operation names start with a verb (``Describe``/``Get``/``List`` read, the rest write).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "READ_VERBS",
    "APICallCounts",
    "APICallReporter",
    "CloudAPICalls",
    "as_api_call_reporter",
    "classify_by_verb",
    "register_api_call_metrics",
]

METRIC_NAME = "kccm_cloud_api_requests"
"""Exposed as ``kccm_cloud_api_requests_total`` (a counter)."""

READ_VERBS: tuple[str, ...] = ("describe", "get", "list", "find", "retrieve", "read", "lookup")
"""Operation-name prefixes (case-insensitive, ``_`` ignored) that :func:`classify_by_verb` reads."""


def classify_by_verb(operation: str) -> bool:
    """``True`` when ``operation`` (``DescribeInstances``, ``describe_instances``, ...) mutates."""
    name = operation.rsplit(":", 1)[-1].replace("_", "").lower()
    return not name.startswith(READ_VERBS)


@dataclass(frozen=True)
class APICallCounts:
    """Calls per operation, split into reads and writes (a point-in-time copy)."""

    reads: Mapping[str, int] = field(default_factory=dict)
    writes: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_reads(self) -> int:
        return sum(self.reads.values())

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    def since(self, earlier: APICallCounts) -> APICallCounts:
        """The calls made after ``earlier`` was taken (operations with no new call left out)."""
        return APICallCounts(_minus(self.reads, earlier.reads), _minus(self.writes, earlier.writes))


def _minus(now: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in now.items() if n - before.get(op, 0) > 0}


class CloudAPICalls:
    """Thread-safe counts of a provider's cloud requests (providers may call from threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: Counter[str] = Counter()
        self._writes: Counter[str] = Counter()

    def record(self, operation: str, *, mutating: bool, count: int = 1) -> None:
        """Count ``count`` requests of ``operation``; ``mutating`` says whether it changes state."""
        with self._lock:
            (self._writes if mutating else self._reads)[operation] += count

    def snapshot(self) -> APICallCounts:
        with self._lock:
            return APICallCounts(dict(self._reads), dict(self._writes))

    def reset(self) -> None:
        with self._lock:
            self._reads.clear()
            self._writes.clear()


@runtime_checkable
class APICallReporter(Protocol):
    """Optional provider capability: the ledger of its own cloud API requests."""

    def cloud_api_calls(self) -> CloudAPICalls:
        """The provider's ledger (the same object for the provider's lifetime)."""
        ...


def as_api_call_reporter(cloud: object) -> APICallReporter | None:
    """The cloud as an :class:`APICallReporter`, or ``None``."""
    return cloud if isinstance(cloud, APICallReporter) else None


class _LedgerCollector(Collector):
    """The ledger as a Prometheus counter family, read at each scrape."""

    def __init__(self, ledger: CloudAPICalls) -> None:
        self._ledger = ledger

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(
            METRIC_NAME,
            "Requests the cloud provider sent to its cloud, by operation and whether it "
            "mutates (the provider's own ledger, kccm.cloudprovider.apicalls)",
            labels=["operation", "mutating"],
        )

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        counts = self._ledger.snapshot()
        for mutating, by_operation in (("false", counts.reads), ("true", counts.writes)):
            for operation, count in sorted(by_operation.items()):
                family.add_metric([operation, mutating], count)
        yield family


def register_api_call_metrics(cloud: object, registry: CollectorRegistry) -> bool:
    """Export ``cloud``'s ledger on ``registry`` when it has one; returns whether it had."""
    reporter = as_api_call_reporter(cloud)
    if reporter is None:
        return False
    registry.register(_LedgerCollector(reporter.cloud_api_calls()))
    return True
