"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

- Defaults: lease 15 s, renew deadline 10 s, retry period 2 s (the cloud-controller-manager's);
  lock ``kube-system/cloud-controller-manager``; identity ``<hostname>_<uuid>``.
- The Lease records holderIdentity, leaseDurationSeconds, acquireTime, renewTime and
  leaseTransitions (incremented whenever the holder changes).
- Expiry is judged on *our* monotonic clock from the moment we last saw the record change,
  never from timestamps written by other machines (clock skew cannot steal a lease).
- While leading, renewals are optimistic (an update from the last record we wrote, no read
  first); every attempt is bounded by a timeout that fits inside the renew deadline, and
  failing to renew for the whole deadline means leadership is lost.
- Losing the lease calls ``on_lost`` at once, before the leading work is cancelled (the
  daemon exits there, as upstream's ``OnStoppedLeading`` does with ``klog.FlushAndExit``:
  a successor may take the lease a lease duration after the last renewal, so nothing of the
  old leader's may still run by then), then ``on_stopped_leading`` once the work has wound
  down; :meth:`LeaderElector.run` then returns ``False``.
- ``release_on_cancel`` gives the lease up on a graceful stop (holder cleared, duration 1 s),
  so a successor need not wait for expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from kccm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import LEASES
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_LEASE_NAME",
    "DEFAULT_LEASE_NAMESPACE",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseRecord",
    "default_identity",
]

_RELEASE_ATTEMPTS = 3
_log = logging.getLogger(__name__)
_JITTER = 1.2  # client-go's JitterFactor for the retry period


def default_identity() -> str:
    """``<hostname>_<uuid>``, as the cloud-controller-manager builds it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def _micro_time(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    holder: str = ""
    lease_duration: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Obj) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


DEFAULT_LEASE_NAMESPACE = "kube-system"
DEFAULT_LEASE_NAME = "cloud-controller-manager"
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0


@dataclass
class LeaderElectionConfig:
    namespace: str = DEFAULT_LEASE_NAMESPACE
    name: str = DEFAULT_LEASE_NAME
    identity: str = field(default_factory=default_identity)
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = False
    health_grace: float = 20.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    """kccm: annotations every write of the Lease carries (what this daemon serves)."""

    def validate(self) -> list[str]:
        """Problems with the timings, as client-go's NewLeaderElector rejects them."""
        errors = []
        if self.lease_duration <= self.renew_deadline:
            errors.append("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= _JITTER * self.retry_period:
            errors.append("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration < 1 or self.renew_deadline < 1 or self.retry_period < 1e-3:
            errors.append("leaseDuration, renewDeadline and retryPeriod must be positive")
        if not self.identity:
            errors.append("the leader election identity must not be empty")
        return errors


Callback = Callable[[], Awaitable[None] | None]


class LeaderElector:
    """Campaign for a Lease; lead until cancelled or the lease is lost."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], Coroutine[Any, Any, None]],
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        clock: Clock = REAL_CLOCK,
        registry: CollectorRegistry | None = None,
    ) -> None:
        problems = config.validate()
        if problems:
            raise ValueError("; ".join(problems))
        self.config = config
        self._client = client
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._on_lost = on_lost
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._lease: Obj | None = None
        self._leading = False
        self._last_renew = 0.0
        self._reported_leader = ""
        self._status = _status_gauge(registry, config.name)

    # -- public ------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The holder we last observed ("" when unknown)."""
        return self._observed.holder if self._observed else ""

    def check(self) -> bool:
        """Health: fails when we lead but have not renewed for lease duration + grace."""
        if not self._leading:
            return True
        overdue = self._clock.monotonic() - self._last_renew
        return overdue <= self.config.lease_duration + self.config.health_grace

    async def run(self) -> bool:
        """Acquire the lease, then lead until it is lost: returns False then (the caller should
        exit non-zero). Cancelling the task stops leading, releasing the lease when
        ``release_on_cancel`` is set. ``on_stopped_leading`` runs in both cases."""
        try:
            await self._acquire()
            await self._lead()
            return False
        except asyncio.CancelledError:
            await self._release_if_configured()
            raise
        finally:
            await self._stop_leading()

    # -- campaign ----------------------------------------------------------------------------

    async def _acquire(self) -> None:
        _log.info(
            "attempting to acquire leader lease %s/%s", self.config.namespace, self.config.name
        )
        while not await self._attempt():
            await self._clock.sleep(self._next_attempt_in())
        _log.info("successfully acquired lease %s/%s", self.config.namespace, self.config.name)

    def _next_attempt_in(self) -> float:
        """client-go's jittered retry period, but never past the moment the lease we watch
        expires: a follower that wakes exactly at expiry takes over up to one jittered retry
        period sooner than client-go (expiry is still judged on our own clock)."""
        delay = self.config.retry_period * (1 + random.random() * _JITTER)
        if self._observed is None or not self._observed.holder:
            return delay
        duration = self._observed.lease_duration or self.config.lease_duration
        until_expiry = self._observed_at + duration - self._clock.monotonic()
        return min(delay, max(until_expiry, 0.0) + 0.001)

    async def _lead(self) -> None:
        """Run the leader's work beside the renew loop; return when renewal fails."""
        self._set_leading(True)
        work = asyncio.create_task(self._on_started(), name="leading")
        renewal = asyncio.create_task(self._renew_loop(), name="lease renewal")
        try:
            await asyncio.wait({work, renewal}, return_when=asyncio.FIRST_COMPLETED)
            if work.done() and not work.cancelled() and work.exception() is not None:
                raise work.exception()  # type: ignore[misc]
            await renewal  # the work may end early; leadership lasts until lost or cancelled
            if self._on_lost is not None:
                self._on_lost()  # before the work winds down: it must not act any longer
        finally:
            for task in (work, renewal):
                task.cancel()
            await asyncio.gather(work, renewal, return_exceptions=True)
        _log.error(
            "leader election lost: could not renew %s/%s within %.0f s",
            self.config.namespace,
            self.config.name,
            self.config.renew_deadline,
        )

    async def _renew_loop(self) -> None:
        """Returns when renewal failed for a whole renew deadline."""
        while True:
            deadline = self._clock.monotonic() + self.config.renew_deadline
            while not await self._attempt(deadline):
                if self._clock.monotonic() >= deadline:
                    return
                await self._clock.sleep(self.config.retry_period)
            await self._clock.sleep(self.config.retry_period)

    async def _attempt(self, deadline: float | None = None) -> bool:
        """One tryAcquireOrRenew, bounded by the time left before ``deadline``."""
        budget = (
            self.config.renew_deadline if deadline is None else (deadline - self._clock.monotonic())
        )
        if budget <= 0:
            return False
        try:
            return await _bounded(self._clock, budget, self._try_acquire_or_renew())
        except (TimeoutError, KubeError) as exc:
            _log.warning(
                "error retrieving or updating lease %s/%s: %s",
                self.config.namespace,
                self.config.name,
                exc,
            )
            return False

    async def _try_acquire_or_renew(self) -> bool:
        now = _micro_time(self._clock.now())
        if (
            self._leading
            and self._lease is not None
            and self._observed is not None
            and self._observed.holder == self.config.identity  # client-go IsLeader()
        ):
            mine = LeaseRecord(
                self.config.identity,
                int(self.config.lease_duration),
                self._observed.acquire_time,
                now,
                self._observed.transitions,
            )
            with contextlib.suppress(Conflict):
                return await self._write(self._lease, mine)  # optimistic: no read first
        try:
            lease = await self._client.get(
                LEASES, self.config.name, namespace=self.config.namespace
            )
        except NotFound:
            return await self._create(now)
        record = LeaseRecord.from_lease(lease)
        self._observe(record, lease)
        if record.holder and record.holder != self.config.identity and not self._expired():
            return False
        transitions = (
            record.transitions
            if record.holder == self.config.identity
            else (record.transitions + 1)
        )
        acquire = record.acquire_time if record.holder == self.config.identity else now
        mine = LeaseRecord(
            self.config.identity, int(self.config.lease_duration), acquire, now, transitions
        )
        try:
            return await self._write(lease, mine)
        except Conflict:
            return False

    async def _create(self, now: str) -> bool:
        record = LeaseRecord(self.config.identity, int(self.config.lease_duration), now, now, 0)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.config.name,
                "namespace": self.config.namespace,
                **_annotations(None, self.config.annotations),
            },
            "spec": record.spec(),
        }
        try:
            lease = await self._client.create(LEASES, body)
        except AlreadyExists:
            return False
        self._observe(record, lease)
        self._last_renew = self._clock.monotonic()
        return True

    async def _write(self, lease: Obj, record: LeaseRecord) -> bool:
        updated = {**lease, "spec": {**(lease.get("spec") or {}), **record.spec()}}
        if self.config.annotations:
            updated["metadata"] = {
                **lease["metadata"],
                **_annotations(lease, self.config.annotations),
            }
        written = await self._client.replace(LEASES, updated)
        self._observe(record, written)
        self._last_renew = self._clock.monotonic()
        return True

    def _observe(self, record: LeaseRecord, lease: Obj) -> None:
        self._lease = lease
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.monotonic()
        if record.holder and record.holder != self._reported_leader:
            self._reported_leader = record.holder
            if self._on_new_leader is not None:
                self._on_new_leader(record.holder)

    def _expired(self) -> bool:
        assert self._observed is not None
        duration = self._observed.lease_duration or self.config.lease_duration
        return self._observed_at + duration <= self._clock.monotonic()

    # -- stopping ----------------------------------------------------------------------------

    async def _release_if_configured(self) -> None:
        if not (self.config.release_on_cancel and self._leading):
            return
        try:
            released = await _bounded(self._clock, self.config.renew_deadline, self._release())
        except (TimeoutError, KubeError) as exc:
            _log.warning(
                "failed to release lease %s/%s: %s", self.config.namespace, self.config.name, exc
            )
            return
        if released:
            _log.info("released lease %s/%s", self.config.namespace, self.config.name)

    async def _release(self) -> bool:
        """client-go ``release()``: read the lease first ("update the resourceVersion of
        lease"), since a renewal cancelled in flight may have been written without our
        learning its resourceVersion; then clear the holder with a 1 s duration. Unlike
        client-go, which trusts its last observed record, kccm leaves the lease alone when
        the fresh read shows another holder, and reads again on a conflict (the cancelled
        renewal may reach etcd after our read)."""
        for attempt in range(_RELEASE_ATTEMPTS):
            lease = await self._client.get(
                LEASES, self.config.name, namespace=self.config.namespace
            )
            record = LeaseRecord.from_lease(lease)
            if record.holder != self.config.identity:
                _log.info(
                    "not releasing lease %s/%s: it is held by %r",
                    self.config.namespace,
                    self.config.name,
                    record.holder,
                )
                return False
            now = _micro_time(self._clock.now())
            try:
                return await self._write(lease, LeaseRecord("", 1, now, now, record.transitions))
            except Conflict:
                if attempt + 1 == _RELEASE_ATTEMPTS:
                    raise
        return False

    async def _stop_leading(self) -> None:
        if not self._leading:
            return
        self._set_leading(False)
        if self._on_stopped is not None:
            result = self._on_stopped()
            if asyncio.iscoroutine(result):
                await result

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        if self._status is not None:
            self._status.set(1 if leading else 0)


def _annotations(lease: Obj | None, ours: Mapping[str, str]) -> dict[str, Any]:
    """``{"annotations": ...}``: the Lease's own with ``ours`` over them; {} without any."""
    if not ours:
        return {}
    current = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    return {"annotations": {**current, **ours}}


async def _bounded(clock: Clock, seconds: float, call: Coroutine[Any, Any, bool]) -> bool:
    """Await ``call`` for at most ``seconds`` on the clock seam; TimeoutError past that."""
    work = asyncio.ensure_future(call)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    if not work.done():
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await work
        raise TimeoutError(f"no answer within {seconds:.1f} s")
    return work.result()


def _status_gauge(registry: CollectorRegistry | None, name: str) -> Any:
    if registry is None:
        return None
    gauge = Gauge(
        "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
        "backup, 1 indicates master. 'name' is the string used to identify the lease.",
        ["name"],
        registry=registry,
    )
    return gauge.labels(name=name)
