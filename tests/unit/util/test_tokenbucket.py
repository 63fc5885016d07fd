from __future__ import annotations

import asyncio

import pytest

from kccm.util.clock import FakeClock
from kccm.util.tokenbucket import TokenBucket


@pytest.mark.parametrize(
    ("qps", "burst", "calls", "waits"),
    [
        pytest.param(10, 3, 5, [0, 0, 0, 0.1, 0.2], id="burst-then-spaced-by-1-over-qps"),
        pytest.param(1, 1, 3, [0, 1, 2], id="no-burst-one-per-second"),
        pytest.param(0, 0, 4, [0, 0, 0, 0], id="qps-zero-is-unlimited"),
    ],
)
def test_reservations(qps: float, burst: int, calls: int, waits: list[float]) -> None:
    bucket = TokenBucket(qps, burst, clock=FakeClock())
    assert [round(bucket.reserve(), 6) for _ in range(calls)] == waits


async def test_bucket_refills_with_time_up_to_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2, 4, clock=clock)
    assert all(bucket.try_take() for _ in range(4))
    assert not bucket.try_take()
    await clock.advance(1.0)
    assert bucket.tokens() == pytest.approx(2.0)
    await clock.advance(60.0)
    assert bucket.tokens() == pytest.approx(4.0), "never more than burst"


async def test_acquire_sleeps_on_the_clock_seam() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1, 1, clock=clock)
    await bucket.acquire()
    start = clock.monotonic()
    waiter = asyncio.ensure_future(bucket.acquire())
    await clock.advance(0.5)
    assert not waiter.done()
    await clock.advance(0.5)
    assert waiter.done()
    assert clock.monotonic() - start == pytest.approx(1.0)


def test_burst_must_be_positive_when_limited() -> None:
    with pytest.raises(ValueError, match="burst must be at least 1"):
        TokenBucket(5, 0)
