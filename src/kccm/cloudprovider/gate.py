"""The call gate: every provider call the framework makes goes through one :class:`CallGate`.

What it adds around a provider method:

- **metrics** per method on a caller-supplied Prometheus registry: calls, errors by kind,
  latency, time spent waiting for budget, coalesced calls, throttling pauses;
- an optional **budget**: token buckets (qps/burst) per method group (``load_balancer``,
  ``instances``, ``routes``, ...); when the budget is short, waiting calls are served by
  **priority** (node initialisation first, periodic refreshes last), FIFO within a priority;
- **shared backoff**: when a call signals throttling (``Throttled`` by default — not
  ``RetryError``, which concerns one object; see :attr:`GateConfig.throttle_signal`), every
  call of that group waits until the
  pause is over: the cloud's ``retry_after`` when it gave one, else exponential backoff;
- **coalescing**: identical reads in flight at the same time are served by one provider call.

Plain (sync) provider methods run in a bounded thread pool (:class:`ThreadPoolAdapter`).
All timing goes through a :class:`~kccm.util.clock.Clock`. :class:`GatedCloud` wraps a provider
so that controllers call typed async methods that all pass through the gate.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar, overload

from prometheus_client import CollectorRegistry, Counter, Histogram

from kccm.cloudprovider.adapter import DEFAULT_MAX_WORKERS, ThreadPoolAdapter
from kccm.cloudprovider.calls import declared_calls
from kccm.cloudprovider.errors import (
    ImplementedElsewhere,
    InstanceNotFound,
    NotImplementedByProvider,
    RetryError,
    Throttled,
    find_error,
)
from kccm.cloudprovider.interface import CALL_PROTOCOLS, MaybeAwaitable
from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.tokenbucket import TokenBucket

__all__ = [
    "METHOD_GROUPS",
    "READ_METHODS",
    "RECENT_WINDOW",
    "Budget",
    "CallGate",
    "GateConfig",
    "GroupSnapshot",
    "Priority",
    "Throttle",
    "UnknownProviderMethod",
    "args_key",
    "default_throttle_signal",
    "error_kind",
    "node_key",
]

T = TypeVar("T")

_CALLS = declared_calls(CALL_PROTOCOLS)

METHOD_GROUPS: Mapping[str, str] = {name: kind.group for name, kind in _CALLS.items()}
"""Which budget (method group) each provider method draws from (from ``@provider_call``)."""

READ_METHODS: frozenset[str] = frozenset(name for name, kind in _CALLS.items() if kind.read)
"""Methods without side effects: identical concurrent calls may share one provider call."""


class UnknownProviderMethod(ValueError):
    """The gate was asked to run a method no Protocol declares with ``@provider_call``.

    Raised before anything runs: an undeclared name would otherwise get a budget group of its
    own (escaping its real group's budget and throttling pauses) and no coalescing."""

    def __init__(self, method: str) -> None:
        super().__init__(
            f"unknown provider method {method!r}: declare it with @provider_call on its "
            'Protocol in kccm.cloudprovider.interface (see DEVELOPMENT.md, "Adding a provider '
            'method")'
        )
        self.method = method


def _group_of(method: str) -> str:
    """The budget group of provider method ``method``; :class:`UnknownProviderMethod` if no
    Protocol declares it."""
    group = METHOD_GROUPS.get(method)
    if group is None:
        raise UnknownProviderMethod(method)
    return group


class Priority(IntEnum):
    """Who waits least when the budget is short (lower value first)."""

    INITIALIZE = 0
    """Node initialisation: a node is unschedulable until it is done."""
    NORMAL = 1
    """Event-driven work: service syncs, route reconciles."""
    PERIODIC = 2
    """Periodic refreshes: node status updates, lifecycle checks."""


@dataclass(frozen=True)
class Budget:
    """``qps`` calls per second on average, at most ``burst`` back to back."""

    qps: float
    burst: int = 1

    def __post_init__(self) -> None:
        if self.qps <= 0 or self.burst < 1:
            raise ValueError(f"a budget needs qps > 0 and burst >= 1 (got {self})")


@dataclass(frozen=True)
class Throttle:
    """A throttling signal: pause the group ``retry_after`` seconds (``None``: back off)."""

    retry_after: float | None = None


def default_throttle_signal(error: BaseException) -> Throttle | None:
    """``Throttled`` (possibly chained) signals throttling: the whole method group pauses.

    ``RetryError`` does not: upstream uses it for "this one object is not ready yet, retry it
    after a fixed delay" (a load balancer still provisioning), and the controller requeues
    that one key after exactly ``retry_after``. Pausing every call of the group because one
    load balancer is slow would stall all the others.
    """
    throttled = find_error(error, Throttled)
    if throttled is not None:
        return Throttle(throttled.retry_after)
    return None


@dataclass(frozen=True)
class GateConfig:
    """How the gate behaves; every field has a production default (no budget at all)."""

    budget: Budget | None = None
    """Budget of every method group without its own entry in ``group_budgets``."""
    group_budgets: Mapping[str, Budget | None] = field(default_factory=dict)
    """Per-group budgets (``None``: that group is unlimited)."""
    max_threads: int = DEFAULT_MAX_WORKERS
    """Threads for plain (sync) provider methods."""
    coalesce_reads: bool = True
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    throttle_signal: Callable[[BaseException], Throttle | None] = default_throttle_signal

    def budget_for(self, group: str) -> Budget | None:
        return self.group_budgets.get(group, self.budget)


_ERROR_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (InstanceNotFound, "instance_not_found"),
    (NotImplementedByProvider, "not_implemented"),
    (ImplementedElsewhere, "implemented_elsewhere"),
    (RetryError, "retry"),
    (Throttled, "throttled"),
    (asyncio.CancelledError, "cancelled"),
    (TimeoutError, "timeout"),
)


def error_kind(error: BaseException) -> str:
    """The ``kind`` label of an error in the metrics."""
    for kind, label in _ERROR_KINDS:
        if find_error(error, kind) is not None:
            return label
    return "other"


RECENT_WINDOW = 60.0
"""Seconds of call history :meth:`CallGate.snapshot` reports a rate over."""


@dataclass(frozen=True)
class GroupSnapshot:
    """One method group as the gate sees it now (read-only; for ``kccm explain``)."""

    group: str
    recent_calls: int
    """Calls that reached the provider in the last :data:`RECENT_WINDOW` seconds."""
    recent_rate: float
    """``recent_calls`` per second over the window."""
    budget_qps: float | None
    budget_burst: int | None
    throttled_for: float
    """Seconds the group stays paused because the cloud throttled (0: no pause in force)."""
    consecutive_throttles: int
    waiting: int
    """Calls queued for budget or for the pause to end."""


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "cloudprovider_calls",
            "Calls made to the cloud provider.",
            ["method"],
            registry=registry,
        )
        self.errors = Counter(
            "cloudprovider_call_errors",
            "Provider calls that raised, by kind.",
            ["method", "kind"],
            registry=registry,
        )
        self.latency = Histogram(
            "cloudprovider_call_duration_seconds",
            "Time spent in provider calls.",
            ["method"],
            registry=registry,
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.wait = Histogram(
            "cloudprovider_call_wait_seconds",
            "Time calls waited for budget or a throttling pause.",
            ["method"],
            registry=registry,
            buckets=(0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
        )
        self.coalesced = Counter(
            "cloudprovider_coalesced_calls",
            "Calls served by an identical call already in flight.",
            ["method"],
            registry=registry,
        )
        self.throttled = Counter(
            "cloudprovider_throttle_pauses",
            "Times a method group was paused because the cloud throttled.",
            ["group"],
            registry=registry,
        )
        self._methods: dict[str, _MethodMetrics] = {}

    def of(self, method: str) -> _MethodMetrics:
        """``method``'s series of every call, looked up once (``labels()`` validates and locks
        each time it is called)."""
        found = self._methods.get(method)
        if found is None:
            found = _MethodMetrics(
                self.calls.labels(method), self.latency.labels(method), self.wait.labels(method)
            )
            self._methods[method] = found
        return found


@dataclass(frozen=True, slots=True)
class _MethodMetrics:
    calls: Counter
    latency: Histogram
    wait: Histogram


@dataclass(order=True)
class _Ticket:
    priority: int
    seq: int
    future: asyncio.Future[None] = field(compare=False)


class _Lane:
    """Admission for one method group: budget, pause and the priority queue of waiters."""

    def __init__(self, budget: Budget | None, clock: Clock) -> None:
        self.bucket = TokenBucket(budget.qps, budget.burst, clock=clock) if budget else None
        self.clock = clock
        self.heap: list[_Ticket] = []
        self.paused_until = 0.0
        self.throttles = 0
        self.dispatcher: asyncio.Task[None] | None = None
        self.recent: collections.deque[float] = collections.deque()

    def note_call(self, window: float) -> None:
        now = self.clock.monotonic()
        self.recent.append(now)
        self.prune(now, window)

    def prune(self, now: float, window: float) -> None:
        while self.recent and self.recent[0] < now - window:
            self.recent.popleft()

    def open_now(self) -> bool:
        return self.bucket is None and not self.heap and self.paused_until <= self.clock.monotonic()

    def enqueue(self, ticket: _Ticket) -> None:
        heapq.heappush(self.heap, ticket)
        if self.dispatcher is None or self.dispatcher.done():
            self.dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    def _next_live(self) -> _Ticket | None:
        while self.heap and self.heap[0].future.done():
            heapq.heappop(self.heap)
        return self.heap[0] if self.heap else None

    async def _dispatch(self) -> None:
        while self._next_live() is not None:
            await self._wait_out_pause()
            if self.bucket is not None:
                wait = self.bucket.reserve()  # our token, possibly from the future
                if wait > 0:
                    await self.clock.sleep(wait)
                await self._wait_out_pause()
            # The best waiter *now* gets the token: higher priorities that arrived while we
            # slept go first. If every waiter left meanwhile, the token is simply unused.
            if self._next_live() is not None:
                heapq.heappop(self.heap).future.set_result(None)

    async def _wait_out_pause(self) -> None:
        while (pause := self.paused_until - self.clock.monotonic()) > 0:
            await self.clock.sleep(pause)


@dataclass
class _Flight:
    """A coalesced read in flight: its first caller runs it; each later one awaits a future
    of its own (cancelling one waiter cancels nobody else's answer)."""

    waiters: list[asyncio.Future[Any]] = field(default_factory=list)
    ticket: _Ticket | None = None

    def settle(self, result: Any = None, error: BaseException | None = None) -> None:
        for waiter in self.waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(result)
            else:
                waiter.set_exception(error)


class _Abandoned(Exception):
    """The caller running a coalesced read was cancelled: a waiting caller runs it itself."""


class CallGate:
    """The gate (see the module docstring). Use one per process; call :meth:`close` at exit."""

    def __init__(
        self,
        config: GateConfig | None = None,
        *,
        registry: CollectorRegistry,
        clock: Clock = REAL_CLOCK,
        adapter: ThreadPoolAdapter | None = None,
    ) -> None:
        self.config = config or GateConfig()
        self._clock = clock
        self._metrics = _Metrics(registry)
        self._adapter = adapter or ThreadPoolAdapter(self.config.max_threads)
        self._lanes: dict[str, _Lane] = {}
        self._inflight: dict[tuple[str, Hashable], _Flight] = {}
        self._seq = itertools.count()

    def _lane(self, group: str) -> _Lane:
        lane = self._lanes.get(group)
        if lane is None:
            lane = self._lanes[group] = _Lane(self.config.budget_for(group), self._clock)
        return lane

    @overload
    async def call(
        self,
        method: str,
        fn: Callable[..., Awaitable[T]],
        *args: Any,
        priority: Priority = ...,
        key: Hashable | None = ...,
    ) -> T: ...
    @overload
    async def call(
        self,
        method: str,
        fn: Callable[..., MaybeAwaitable[T]],
        *args: Any,
        priority: Priority = ...,
        key: Hashable | None = ...,
    ) -> T: ...
    async def call(
        self,
        method: str,
        fn: Callable[..., Any],
        *args: Any,
        priority: Priority = Priority.NORMAL,
        key: Hashable | None = None,
    ) -> Any:
        """Run ``fn(*args)`` as provider method ``method`` through the gate.

        ``key`` identifies the call's arguments for coalescing; it is used only for
        :data:`READ_METHODS`. Errors from the provider propagate unchanged. A ``method`` that
        no Protocol declares raises :class:`UnknownProviderMethod` before anything runs.
        """
        group = _group_of(method)
        if key is None or not self.config.coalesce_reads or method not in READ_METHODS:
            return await self._admit_and_run(group, method, fn, args, priority, None)
        flight_key = (method, key)
        flight = self._inflight.get(flight_key)
        if flight is not None:
            self._metrics.coalesced.labels(method).inc()
            self._raise_priority(flight, priority, group)
            waiter = asyncio.get_running_loop().create_future()
            flight.waiters.append(waiter)
            try:
                return await waiter
            except _Abandoned:
                return await self.call(method, fn, *args, priority=priority, key=key)
        return await self._lead(flight_key, group, method, fn, args, priority)

    async def _lead(
        self,
        flight_key: tuple[str, Hashable],
        group: str,
        method: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        priority: Priority,
    ) -> Any:
        """Run a coalesced read in the first caller's own task (no task of its own: most
        reads have no company) and hand its outcome to whoever joined meanwhile."""
        flight = _Flight()
        self._inflight[flight_key] = flight
        try:
            result = await self._admit_and_run(group, method, fn, args, priority, flight)
        except asyncio.CancelledError:
            flight.settle(error=_Abandoned())
            raise
        except BaseException as error:
            flight.settle(error=error)
            raise
        finally:
            if self._inflight.get(flight_key) is flight:
                del self._inflight[flight_key]
        flight.settle(result)
        return result

    def _raise_priority(self, flight: _Flight, priority: Priority, group: str) -> None:
        ticket = flight.ticket
        if ticket is None or ticket.future.done() or priority >= ticket.priority:
            return
        better = _Ticket(int(priority), next(self._seq), ticket.future)
        flight.ticket = better
        lane = self._lane(group)
        heapq.heappush(lane.heap, better)  # the old entry is skipped once its future is done

    async def _admit_and_run(
        self,
        group: str,
        method: str,
        fn: Callable[..., MaybeAwaitable[T]],
        args: tuple[Any, ...],
        priority: Priority,
        flight: _Flight | None,
    ) -> T:
        await self._admit(group, method, priority, flight)
        return await self._run(group, method, fn, args)

    async def _admit(
        self, group: str, method: str, priority: Priority, flight: _Flight | None
    ) -> None:
        lane = self._lane(group)
        if lane.open_now():
            self._metrics.of(method).wait.observe(0.0)
            return
        start = self._clock.monotonic()
        ticket = _Ticket(int(priority), next(self._seq), asyncio.get_running_loop().create_future())
        if flight is not None:
            flight.ticket = ticket
        lane.enqueue(ticket)
        try:
            await ticket.future
        finally:
            ticket.future.cancel()  # no-op once granted; tells the dispatcher to skip us
        self._metrics.of(method).wait.observe(self._clock.monotonic() - start)

    async def _run(
        self, group: str, method: str, fn: Callable[..., MaybeAwaitable[T]], args: tuple[Any, ...]
    ) -> T:
        metrics = self._metrics.of(method)
        metrics.calls.inc()
        self._lane(group).note_call(RECENT_WINDOW)
        start = self._clock.monotonic()
        try:
            result: T = await self._adapter.call(method, fn, *args)
        except BaseException as error:
            self._metrics.errors.labels(method, error_kind(error)).inc()
            self._on_error(group, error)
            raise
        finally:
            metrics.latency.observe(self._clock.monotonic() - start)
        self._lane(group).throttles = 0
        return result

    def _on_error(self, group: str, error: BaseException) -> None:
        if not isinstance(error, Exception):
            return
        signal = self.config.throttle_signal(error)
        if signal is None:
            return
        lane = self._lane(group)
        pause = signal.retry_after
        if pause is None:
            pause = min(self.config.backoff_initial * 2**lane.throttles, self.config.backoff_max)
        lane.throttles += 1
        lane.paused_until = max(lane.paused_until, self._clock.monotonic() + pause)
        self._metrics.throttled.labels(group).inc()

    def paused_until(self, group: str) -> float:
        """Monotonic time until which ``group`` is paused (in the past when it is not)."""
        return self._lane(group).paused_until

    def snapshot(self) -> list[GroupSnapshot]:
        """Each method group used so far: recent call rate, budget and throttling in force.

        Read-only: nothing is admitted, paused or counted by asking."""
        now = self._clock.monotonic()
        return [
            self._group_snapshot(group, lane, now) for group, lane in sorted(self._lanes.items())
        ]

    def _group_snapshot(self, group: str, lane: _Lane, now: float) -> GroupSnapshot:
        lane.prune(now, RECENT_WINDOW)
        budget = self.config.budget_for(group)
        return GroupSnapshot(
            group=group,
            recent_calls=len(lane.recent),
            recent_rate=round(len(lane.recent) / RECENT_WINDOW, 3),
            budget_qps=budget.qps if budget else None,
            budget_burst=budget.burst if budget else None,
            throttled_for=round(max(0.0, lane.paused_until - now), 3),
            consecutive_throttles=lane.throttles,
            waiting=sum(1 for ticket in lane.heap if not ticket.future.done()),
        )

    def close(self) -> None:
        """Stop the dispatchers and the thread pool."""
        for lane in self._lanes.values():
            if lane.dispatcher is not None:
                lane.dispatcher.cancel()
        self._adapter.close(wait=False)


def node_key(node: Mapping[str, Any]) -> Hashable:
    """Coalescing key of a Node (or any object) argument: its identity, not its contents."""
    meta = node.get("metadata", {})
    spec = node.get("spec", {})
    return (
        meta.get("namespace", ""),
        meta.get("name", ""),
        meta.get("uid", ""),
        spec.get("providerID", "") if isinstance(spec, Mapping) else "",
    )


def args_key(args: Sequence[Any]) -> Hashable:
    """Coalescing key of an argument list: strings as they are, objects by identity."""
    return tuple(node_key(a) if isinstance(a, Mapping) else a for a in args)
