"""The one clock seam: every sleep, timer and timestamp in kccm goes through a Clock.

Production code takes ``clock: Clock = REAL_CLOCK``; tests pass a :class:`FakeClock` and move
time forward explicitly, so backoff, lease and period logic is tested in milliseconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["REAL_CLOCK", "Clock", "FakeClock", "RealClock"]


class Clock(Protocol):
    """Time source. ``monotonic`` is for durations and expiry; ``now`` for timestamps."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards."""
        ...

    def now(self) -> datetime:
        """The current wall-clock time, timezone-aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""
        ...


class RealClock:
    """The system clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK: Clock = RealClock()


class FakeClock:
    """A manually driven clock for tests.

    Sleepers wait until :meth:`advance` moves time past their deadline. ``advance`` wakes them
    in deadline order and lets each woken task run before moving on, so code that sleeps in a
    loop sees every intermediate tick.
    """

    def __init__(self, start: float = 1000.0, wall: datetime | None = None) -> None:
        self._now = start
        self._wall_base = wall or datetime(2026, 1, 1, tzinfo=UTC)
        self._start = start
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def now(self) -> datetime:
        return self._wall_base + timedelta(seconds=self._now - self._start)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self._now + seconds, next(self._seq), future))
        await future

    @property
    def pending_sleepers(self) -> int:
        """How many sleeps are waiting (cancelled ones excluded)."""
        return sum(1 for _, _, fut in self._timers if not fut.done())

    def next_deadline(self) -> float | None:
        """The earliest pending sleep deadline, if any."""
        self._drop_cancelled()
        return self._timers[0][0] if self._timers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking sleepers due on the way, in order."""
        target = self._now + seconds
        await _settle()
        while (deadline := self.next_deadline()) is not None and deadline <= target:
            self._now = max(self._now, deadline)
            _, _, future = heapq.heappop(self._timers)
            future.set_result(None)
            await _settle()
        self._now = target
        await _settle()

    async def run_until_idle(self, limit: float = 3600.0) -> None:
        """Jump from deadline to deadline until no sleeper is due within ``limit`` seconds."""
        end = self._now + limit
        await _settle()
        while (deadline := self.next_deadline()) is not None and deadline <= end:
            await self.advance(deadline - self._now)

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0][2].done():
            heapq.heappop(self._timers)


async def _settle(rounds: int = 20) -> None:
    """Give ready tasks a chance to run (and to register new sleeps)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
