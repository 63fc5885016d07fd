"""A token bucket with reservations, as client-go's flowcontrol and x/time/rate use it.

``reserve()`` never blocks: it takes a token now or books one in the future and tells the
caller how long to wait, so waiters are served in arrival order and the long-run rate never
exceeds ``qps`` while at most ``burst`` calls go through back to back.
"""

from __future__ import annotations

from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` tokens per second, up to ``burst`` stored. ``qps <= 0`` means unlimited."""

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0 (got burst={burst})")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self, now: float) -> None:
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now

    def tokens(self) -> float:
        """Tokens available now (negative when future tokens are already reserved)."""
        if self.unlimited:
            return float("inf")
        self._refill(self._clock.monotonic())
        return self._tokens

    def try_take(self) -> bool:
        """Take a token if one is available right now."""
        if self.unlimited:
            return True
        self._refill(self._clock.monotonic())
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    def reserve(self) -> float:
        """Take a token, possibly from the future; return the seconds to wait before using it."""
        if self.unlimited:
            return 0.0
        self._refill(self._clock.monotonic())
        self._tokens -= 1
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    async def acquire(self) -> None:
        """Wait until a token is ours."""
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)
