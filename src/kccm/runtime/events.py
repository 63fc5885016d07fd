"""An event recorder producing core/v1 Events with client-go's correlation.

As in ``k8s.io/client-go/tools/record``:

* :meth:`EventRecorder.event` builds the Event at once (name ``<object>.<unix nanos, hex>``,
  namespace of the object or ``default`` for cluster-scoped ones, ``source`` and
  ``reportingComponent`` / ``reportingInstance`` from the recorder) and hands it to a bounded
  buffer without ever waiting: when the buffer is full the event is dropped and counted.
* Writer tasks correlate and write, in order for each object: an event goes to one of
  ``WRITERS`` lanes chosen by the object it is about (every correlation key below holds it), so
  each object's events are correlated and written one after another as client-go's single
  writer does them, while events about different objects are written side by side (client-go
  writes everything one at a time; kccm's Events are the same, they arrive sooner, and a lane
  retrying a failed write holds up only its own objects):

  1. aggregation — more than 10 distinct messages for one (object, type, reason) within
     10 minutes collapse into one event whose message starts
     ``(combined from similar events): ``;
  2. de-duplication — an event identical to one already written (same source, object, type,
     reason, message) becomes a strategic-merge patch of ``count`` (+1), ``lastTimestamp`` and
     ``message`` on that Event; a patch answered NotFound falls back to a create;
  3. the spam filter — a token bucket per (source, object, type): burst 25, one token back
     every 5 minutes. Filtered events are not written, but they still advance the count of
     the identical event, so the next write carries the true total.

* Writes that fail on the way (no answer from the API server) are retried up to 12 times,
  10 s apart (the first wait randomised); an API error answer is logged and the event dropped.

Dropped events are counted in ``event_recorder_dropped_events_total{reason}`` with reason
``buffer_full``, ``spam_filtered`` or ``write_failed`` (a kccm metric; client-go only logs).
"""

from __future__ import annotations

import asyncio
import logging
import random
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter

from kccm.kube.errors import ApiError, NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import EVENTS
from kccm.runtime.controller import wait_for_tasks
from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.tokenbucket import TokenBucket

__all__ = [
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "EventBroadcaster",
    "EventRecorder",
    "ObjectRef",
]

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"

BUFFER_SIZE = 1000  # client-go maxQueuedEvents
WRITERS = 4  # lanes written concurrently (client-go: 1)
CACHE_SIZE = 4096  # client-go maxLruCacheEntries
SPAM_BURST = 25  # client-go defaultSpamBurst
SPAM_QPS = 1.0 / 300.0  # client-go defaultSpamQPS: one event per 5 minutes
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
MAX_TRIES = 12  # client-go maxTriesPerEvent
RETRY_SLEEP = 10.0  # client-go defaultSleepDuration
COMBINED_PREFIX = "(combined from similar events): "

_log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class ObjectRef:
    """core/v1 ObjectReference: the object an Event is about."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""
    field_path: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference to a JSON-shaped Kubernetes object (``reference.GetReference``)."""
        meta = obj.get("metadata") or {}
        return cls(
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=str(meta.get("namespace", "")),
            uid=str(meta.get("uid", "")),
            api_version=str(obj.get("apiVersion", "")),
            resource_version=str(meta.get("resourceVersion", "")),
        )

    def as_dict(self) -> dict[str, str]:
        return _without_empty(
            kind=self.kind,
            namespace=self.namespace,
            name=self.name,
            uid=self.uid,
            apiVersion=self.api_version,
            resourceVersion=self.resource_version,
            fieldPath=self.field_path,
        )


class _LRU(Generic[K, V]):
    """A bounded map evicting the least recently used entry (golang-lru in client-go)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self._size:
            self._data.popitem(last=False)


def _without_empty(**fields: str) -> dict[str, str]:
    """Go's ``omitempty``: leave out empty strings."""
    return {key: value for key, value in fields.items() if value}


def _rfc3339(moment: datetime) -> str:
    """``moment`` (UTC) to the second, as metav1.Time marshals; the last answer is reused
    within the same second (an Event needs two stamps, a burst of them the same ones)."""
    global _last_stamp
    second = (moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)
    last = _last_stamp
    if last[0] != second:
        last = _last_stamp = (second, moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return last[1]


_last_stamp: tuple[object, str] = (None, "")


class _Namer:
    """Event names ``<object>.<unix nanos, hex>`` (client-go), made unique within the process:
    two events in the same nanosecond (fake time, coarse clocks) get successive values."""

    def __init__(self) -> None:
        self._last = 0

    def __call__(self, object_name: str, moment: datetime) -> str:
        nanos = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
        self._last = max(nanos, self._last + 1)
        return f"{object_name}.{self._last:x}"


def _object_key(event: Obj) -> tuple[str, ...]:
    source, ref = event["source"], event["involvedObject"]
    return (
        source.get("component", ""),
        source.get("host", ""),
        ref.get("kind", ""),
        ref.get("namespace", ""),
        ref.get("name", ""),
        ref.get("uid", ""),
        ref.get("apiVersion", ""),
        event["type"],
    )


def _lane_of(event: Obj, lanes: int) -> int:
    """The writer lane of ``event``: the same for every event about one object (every
    correlation key holds the object), stable across runs, unlike ``hash``."""
    ref = event["involvedObject"]
    key = "\0".join(ref.get(k, "") for k in ("kind", "namespace", "name", "uid"))
    return zlib.crc32(key.encode()) % lanes


def _spam_key(event: Obj) -> tuple[str, ...]:
    """client-go getSpamKey: source, object and type."""
    return _object_key(event)


def _aggregate_key(event: Obj) -> tuple[str, ...]:
    """client-go EventAggregatorByReasonFunc: source, object, type and reason."""
    return (*_object_key(event), event["reason"])


def _event_key(event: Obj) -> tuple[str, ...]:
    """client-go getEventKey: identical events share it (field path and message included)."""
    return (*_aggregate_key(event), event["involvedObject"].get("fieldPath", ""), event["message"])


@dataclass
class _Aggregate:
    last_seen: float
    messages: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str


class _Correlator:
    """client-go EventCorrelator: aggregate, observe (count + patch), then spam-filter."""

    def __init__(self, clock: Clock, namer: _Namer, spam_burst: int, spam_qps: float) -> None:
        self._clock = clock
        self._namer = namer
        self._spam_burst, self._spam_qps = spam_burst, spam_qps
        self._aggregates: _LRU[tuple[str, ...], _Aggregate] = _LRU(CACHE_SIZE)
        self._observed: _LRU[tuple[str, ...], _Observation] = _LRU(CACHE_SIZE)
        self._buckets: _LRU[tuple[str, ...], TokenBucket] = _LRU(CACHE_SIZE)

    def correlate(self, event: Obj) -> tuple[Obj, dict[str, Any] | None] | None:
        """The event to write and its patch (None: create), or None when spam-filtered."""
        event, key = self._aggregate(event)
        event, patch = self._observe(event, key)
        if not self._bucket(_spam_key(event)).try_take():
            return None
        return event, patch

    def update_state(self, written: Obj) -> None:
        """Remember what the API server stored (name, resourceVersion) for the next patch."""
        meta = written.get("metadata") or {}
        self._observed.put(
            _event_key(written),
            _Observation(
                int(written.get("count", 1)),
                str(written.get("firstTimestamp", "")),
                str(meta.get("name", "")),
                str(meta.get("resourceVersion", "")),
            ),
        )

    def _aggregate(self, event: Obj) -> tuple[Obj, tuple[str, ...]]:
        now = self._clock.monotonic()
        key = _aggregate_key(event)
        record = self._aggregates.get(key)
        if record is None or now - record.last_seen > AGGREGATE_INTERVAL:
            record = _Aggregate(now)
        record.messages.add(event["message"])
        record.last_seen = now
        self._aggregates.put(key, record)
        if len(record.messages) < AGGREGATE_MAX_EVENTS:
            return event, _event_key(event)
        record.messages.pop()
        return self._combined(event), key

    def _combined(self, event: Obj) -> Obj:
        moment = self._clock.now()
        stamp = _rfc3339(moment)
        combined = {k: v for k, v in event.items() if k != "metadata"}
        combined["metadata"] = {
            "name": self._namer(event["involvedObject"].get("name", ""), moment),
            "namespace": event["metadata"]["namespace"],
        }
        combined.update(count=1, firstTimestamp=stamp, lastTimestamp=stamp)
        combined["message"] = COMBINED_PREFIX + event["message"]
        return combined

    def _observe(self, event: Obj, key: tuple[str, ...]) -> tuple[Obj, dict[str, Any] | None]:
        last = self._observed.get(key)
        patch = None
        if last is not None and last.count > 0:
            event = dict(event, count=last.count + 1, firstTimestamp=last.first_timestamp)
            event["metadata"] = dict(
                event["metadata"], name=last.name, resourceVersion=last.resource_version
            )
            patch = {k: event[k] for k in ("count", "lastTimestamp", "message")}
        self._observed.put(
            key,
            _Observation(
                event["count"],
                event["firstTimestamp"],
                event["metadata"]["name"],
                event["metadata"].get("resourceVersion", ""),
            ),
        )
        return event, patch

    def _bucket(self, key: tuple[str, ...]) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self._spam_qps, self._spam_burst, clock=self._clock)
            self._buckets.put(key, bucket)
        return bucket


class EventRecorder:
    """Records Events for one component (client-go ``EventRecorder``); never blocks."""

    def __init__(self, broadcaster: EventBroadcaster, component: str, host: str = "") -> None:
        self._broadcaster = broadcaster
        self.component = component
        self.host = host

    def event(
        self,
        obj: Mapping[str, Any] | ObjectRef,
        event_type: str,
        reason: str,
        message: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Record an event about ``obj`` (a Kubernetes object or an :class:`ObjectRef`)."""
        if event_type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
            _log.error("unsupported event type %r; event %s dropped", event_type, reason)
            return
        ref = obj if isinstance(obj, ObjectRef) else ObjectRef.of(obj)
        self._broadcaster.submit(self._make(ref, event_type, reason, message, annotations))

    def eventf(
        self, obj: Mapping[str, Any] | ObjectRef, event_type: str, reason: str, fmt: str, *args: Any
    ) -> None:
        """Like :meth:`event`, with a %-style message format (client-go ``Eventf``)."""
        self.event(obj, event_type, reason, fmt % args if args else fmt)

    def _make(
        self,
        ref: ObjectRef,
        event_type: str,
        reason: str,
        message: str,
        annotations: Mapping[str, str] | None,
    ) -> Obj:
        moment = self._broadcaster.clock.now()
        stamp = _rfc3339(moment)
        metadata: dict[str, Any] = {
            "name": self._broadcaster.name_event(ref.name, moment),
            "namespace": ref.namespace or "default",
        }
        if annotations:
            metadata["annotations"] = dict(annotations)
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": metadata,
            "involvedObject": ref.as_dict(),
            "reason": reason,
            "message": message,
            "source": _without_empty(component=self.component, host=self.host),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": event_type,
        }
        event.update(_without_empty(reportingComponent=self.component, reportingInstance=self.host))
        return event


class EventBroadcaster:
    """The buffer between recorders and the API server, and the tasks writing to it.

    Call :meth:`start` inside the running loop; :meth:`shutdown` flushes and stops.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock = REAL_CLOCK,
        buffer_size: int = BUFFER_SIZE,
        spam_burst: int = SPAM_BURST,
        spam_qps: float = SPAM_QPS,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.clock = clock
        self._rng = rng
        self._buffer_size = buffer_size
        self._lanes: list[asyncio.Queue[Obj]] = [asyncio.Queue() for _ in range(WRITERS)]
        self.name_event = _Namer()
        self._correlator = _Correlator(clock, self.name_event, spam_burst, spam_qps)
        self._dropped = _dropped_counter(registry)
        self._writers: list[asyncio.Task[None]] = []
        self._closed = False

    def recorder(self, component: str, host: str = "") -> EventRecorder:
        """A recorder whose events carry ``source.component`` / ``source.host``."""
        return EventRecorder(self, component, host)

    def submit(self, event: Obj) -> None:
        """Queue ``event`` for writing, or drop and count it when the buffer is full."""
        if self._closed:
            return
        if sum(lane.qsize() for lane in self._lanes) >= self._buffer_size:
            self._drop("buffer_full", event)
            return
        self._lanes[_lane_of(event, len(self._lanes))].put_nowait(event)

    def start(self) -> None:
        if not self._writers:
            loop = asyncio.get_running_loop()
            self._writers = [
                loop.create_task(self._write_loop(lane), name=f"event-broadcaster-{i}")
                for i, lane in enumerate(self._lanes)
            ]

    async def flush(self) -> None:
        """Wait until every event buffered so far has been written (or dropped)."""
        for lane in self._lanes:
            await lane.join()

    async def shutdown(self, grace: float = 10.0) -> None:
        """Stop accepting events, write what is buffered for up to ``grace`` s, then stop."""
        self._closed = True
        if not self._writers:
            return
        flushing = asyncio.ensure_future(self.flush())
        await wait_for_tasks([flushing], grace, clock=self.clock)
        flushing.cancel()
        for writer in self._writers:
            writer.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        self._writers = []

    async def _write_loop(self, lane: asyncio.Queue[Obj]) -> None:
        while True:
            event = await lane.get()
            try:
                await self._handle(event)
            except Exception:
                _log.exception("unexpected error writing event")
            finally:
                lane.task_done()

    async def _handle(self, event: Obj) -> None:
        correlated = self._correlator.correlate(event)
        if correlated is None:
            self._dropped.labels(reason="spam_filtered").inc()
            return
        event, patch = correlated
        for attempt in range(MAX_TRIES):
            if await self._record(event, patch):
                return
            await self.clock.sleep(RETRY_SLEEP * (self._rng() if attempt == 0 else 1.0))
        self._drop("write_failed", event, "retry limit exceeded")

    async def _record(self, event: Obj, patch: dict[str, Any] | None) -> bool:
        """One write attempt (client-go recordEvent). True: done, do not retry."""
        try:
            written = await self._write(event, patch)
        except ApiError as exc:
            self._drop("write_failed", event, str(exc))
            return True
        except Exception as exc:
            _log.error("unable to write event %s (may retry): %s", _describe(event), exc)
            return False
        self._correlator.update_state(written)
        return True

    async def _write(self, event: Obj, patch: dict[str, Any] | None) -> Obj:
        namespace = event["metadata"]["namespace"]
        if patch is not None:
            try:
                return await self.client.patch(
                    EVENTS,
                    event["metadata"]["name"],
                    patch,
                    patch_type=PatchType.STRATEGIC,
                    namespace=namespace,
                )
            except NotFound:
                pass
        fresh = dict(event, metadata=dict(event["metadata"]))
        fresh["metadata"].pop("resourceVersion", None)
        return await self.client.create(EVENTS, fresh)

    def _drop(self, reason: str, event: Obj, detail: str = "") -> None:
        self._dropped.labels(reason=reason).inc()
        _log.warning("dropping event %s (%s) %s", _describe(event), reason, detail)


def _describe(event: Obj) -> str:
    ref = event.get("involvedObject", {})
    return f"{ref.get('kind')}/{ref.get('name')} {event.get('type')} {event.get('reason')}"


class _NoopCounter:
    def labels(self, **_: str) -> _NoopCounter:
        return self

    def inc(self, amount: float = 1.0) -> None:
        return None


def _dropped_counter(registry: CollectorRegistry | None) -> Counter | _NoopCounter:
    if registry is None:
        return _NoopCounter()
    return Counter(
        "event_recorder_dropped_events_total",
        "Events the recorder did not write, by reason (buffer_full, spam_filtered, write_failed)",
        ["reason"],
        registry=registry,
    )
