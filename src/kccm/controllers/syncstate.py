"""What each controller last did with each object: the memory ``kccm explain`` reads.

One :class:`SyncStates` per daemon (built by the app wiring, handed to every controller through
:class:`~kccm.controllers.base.ControllerContext`) keeps, per object (``kind`` ``"service"`` or
``"node"`` and its key) and per controller, the last :class:`SyncRecord`: when it was tried,
whether it succeeded, the failure classified into a :class:`~kccm.cloudprovider.reasons.Reason`,
how many attempts in a row failed, when the next retry is due and what the controller saw
(``detail``: the eligible and excluded nodes of a service; a node's initialisation, address
refresh and existence checks). It also counts failures by reason in
``kccm_sync_failures_total{controller, reason}``.

It is kept in memory only (nothing is written to users' objects); records go with their
object (:meth:`SyncStates.forget`). Only the leader's controllers record.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter

from kccm.cloudprovider.reasons import Reason, classify
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "SYNC_FAILURES_METRIC",
    "Kind",
    "SyncRecord",
    "SyncStates",
    "sync_failures_counter",
]

Kind = Literal["service", "node"]

SYNC_FAILURES_METRIC = "kccm_sync_failures"
"""Exposed as ``kccm_sync_failures_total{controller, reason}``."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(slots=True)
class SyncRecord:
    """The last sync of one object by one controller (never changed once made: a new sync
    makes a new record; not frozen because a frozen dataclass costs three times as much to
    build, and the node lifecycle controller records every node every pass).

    ``at`` and ``next_retry_at`` are epoch seconds on the controller's clock; ``attempts``
    counts the failures in a row (0 after a success); ``reason`` is None after a success.
    ``detail`` is what the controller saw (service: ``eligible_nodes``, ``excluded``
    ``{node: why}``; node: ``initialized``, ``provider_id``, ...)."""

    kind: Kind
    key: str
    controller: str
    at: float
    ok: bool
    reason: Reason | None = None
    message: str = ""
    attempts: int = 0
    next_retry_at: float | None = None
    detail: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def to_json(self) -> dict[str, Any]:
        """JSON-shaped (the explain endpoint's body)."""
        return {
            "kind": self.kind,
            "key": self.key,
            "controller": self.controller,
            "at": self.at,
            "ok": self.ok,
            "reason": None if self.reason is None else str(self.reason),
            "message": self.message,
            "attempts": self.attempts,
            "next_retry_at": self.next_retry_at,
            "detail": _plain(self.detail),
        }


class SyncStates:
    """The daemon's sync records; see the module docstring.

    ``daemon`` holds facts about this daemon that other parts publish for ``kccm explain``
    (e.g. the load-balancer classes it serves)."""

    def __init__(
        self, *, registry: CollectorRegistry | None = None, clock: Clock = REAL_CLOCK
    ) -> None:
        self.clock = clock
        self.failures = sync_failures_counter(registry or CollectorRegistry())
        self.daemon: dict[str, Any] = {}
        self._records: dict[tuple[str, str], dict[str, SyncRecord]] = {}

    def record(
        self,
        kind: Kind,
        key: str,
        controller: str,
        *,
        error: BaseException | None = None,
        reason: Reason | None = None,
        message: str | None = None,
        retry_in: float | None = None,
        detail: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> SyncRecord:
        """Record a sync of ``key`` by ``controller`` now.

        It failed when ``error`` is given (``reason`` defaults to ``classify(error)``,
        ``message`` to ``str(error)``) or when a ``reason`` is given without an error (e.g.
        ``NO_NODES``); otherwise it succeeded. ``retry_in``: seconds until the queue retries.
        ``at``: when (epoch seconds), for a pass that records many objects at once; ``detail``
        given as a ``MappingProxyType`` is kept as it is (shared), any other is copied."""
        if at is None:
            at = self.clock.now().timestamp()
        ok = error is None and reason is None
        if error is not None and reason is None:
            reason = classify(error)
        previous = self.last(kind, key, controller)
        attempts = 0 if ok else 1 + (previous.attempts if previous is not None else 0)
        entry = SyncRecord(
            kind=kind,
            key=key,
            controller=controller,
            at=at,
            ok=ok,
            reason=reason,
            message=message if message is not None else ("" if error is None else str(error)),
            attempts=attempts,
            next_retry_at=None if retry_in is None else at + retry_in,
            detail=detail
            if isinstance(detail, MappingProxyType)
            else MappingProxyType(dict(detail or {})),
        )
        self._records.setdefault((kind, key), {})[controller] = entry
        if reason is not None:
            self.failures.labels(controller=controller, reason=str(reason)).inc()
        return entry

    def annotate(self, kind: Kind, key: str, controller: str, **detail: Any) -> SyncRecord:
        """Merge ``detail`` into the last record of ``controller`` for ``key`` (a successful
        one is started when there is none), without counting an attempt."""
        previous = self.last(kind, key, controller)
        if previous is None:
            previous = SyncRecord(kind, key, controller, self.clock.now().timestamp(), ok=True)
        entry = replace(previous, detail=MappingProxyType({**previous.detail, **detail}))
        self._records.setdefault((kind, key), {})[controller] = entry
        return entry

    def last(self, kind: Kind, key: str, controller: str) -> SyncRecord | None:
        return self._records.get((kind, key), {}).get(controller)

    def get(self, kind: Kind, key: str) -> list[SyncRecord]:
        """The last record of each controller that synced ``key``, by controller name."""
        by_controller = self._records.get((kind, key), {})
        return [by_controller[name] for name in sorted(by_controller)]

    def snapshot(self) -> list[SyncRecord]:
        """Every record, by kind, key and controller."""
        return [
            record
            for k in sorted(self._records)
            for record in sorted(self._records[k].values(), key=lambda r: r.controller)
        ]

    def forget(self, kind: Kind, key: str, controller: str | None = None) -> None:
        """Drop ``key``'s records (of one controller, or all): the object is gone."""
        if controller is None:
            self._records.pop((kind, key), None)
            return
        by_controller = self._records.get((kind, key), {})
        by_controller.pop(controller, None)
        if not by_controller:
            self._records.pop((kind, key), None)


_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def sync_failures_counter(registry: CollectorRegistry) -> Counter:
    """``kccm_sync_failures_total{controller, reason}`` in ``registry`` (one per registry)."""
    counter = _COUNTERS.get(registry)
    if counter is None:
        counter = Counter(
            SYNC_FAILURES_METRIC,
            "Controller syncs that failed (or could not serve), by classified reason",
            ["controller", "reason"],
            registry=registry,
        )
        _COUNTERS[registry] = counter
    return counter


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value
