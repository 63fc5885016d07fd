"""Periodic loops (wait.Until, NonSlidingUntil, JitterUntil) on fake time."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kccm.runtime.controller import jitter, sleep_or_stop, until
from kccm.util.clock import FakeClock

START = 1000.0


@pytest.mark.parametrize(
    ("work", "period", "sliding", "jitter_factor", "starts"),
    [
        pytest.param(2, 10, True, 0.0, [0, 12, 24, 36], id="sliding-period-starts-after-fn"),
        pytest.param(2, 10, False, 0.0, [0, 10, 20, 30], id="non-sliding-fixed-cadence"),
        pytest.param(15, 10, False, 0.0, [0, 15, 30], id="non-sliding-slow-fn-runs-back-to-back"),
        pytest.param(0, 10, True, 1.0, [0, 15, 30], id="jitter-stretches-the-period"),
        pytest.param(2, 10, False, 0.5, [0, 12.5, 25], id="jitter-non-sliding"),
    ],
)
async def test_until_schedule(
    work: float,
    period: float,
    sliding: bool,
    jitter_factor: float,
    starts: list[float],
    clock: FakeClock,
) -> None:
    seen: list[float] = []
    stop = asyncio.Event()

    async def fn() -> None:
        seen.append(clock.monotonic() - START)
        if len(seen) == len(starts):
            stop.set()
        await clock.sleep(work)

    loop = asyncio.create_task(
        until(
            fn,
            period,
            stop=stop,
            sliding=sliding,
            jitter_factor=jitter_factor,
            clock=clock,
            rng=lambda: 0.5,
        )
    )
    await clock.run_until_idle()
    await loop
    assert seen == pytest.approx(starts)


async def test_stop_ends_the_wait_at_once(clock: FakeClock) -> None:
    stop = asyncio.Event()
    runs: list[float] = []

    async def fn() -> None:
        runs.append(clock.monotonic())

    loop = asyncio.create_task(until(fn, 3600, stop=stop, clock=clock))
    await clock.advance(1)
    stop.set()
    await loop
    assert runs == [START]
    assert clock.pending_sleepers == 0


async def test_failing_fn_is_logged_and_the_loop_goes_on(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    stop = asyncio.Event()
    calls = 0

    async def fn() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            stop.set()
        raise RuntimeError("cloud down")

    with caplog.at_level(logging.ERROR):
        loop = asyncio.create_task(until(fn, 5, stop=stop, clock=clock))
        await clock.run_until_idle()
        await loop
    assert calls == 3
    assert len([r for r in caplog.records if r.exc_info]) == 3


async def test_sleep_or_stop(clock: FakeClock) -> None:
    stop = asyncio.Event()
    assert await sleep_or_stop(0, stop, clock=clock) is False
    sleeper = asyncio.create_task(sleep_or_stop(10, stop, clock=clock))
    await clock.advance(10)
    assert await sleeper is False
    stop.set()
    assert await sleep_or_stop(10, stop, clock=clock) is True


@pytest.mark.parametrize(
    ("factor", "rand", "expected"),
    [
        pytest.param(1.0, 0.0, 10.0, id="lower-bound-is-duration"),
        pytest.param(1.0, 0.99, 19.9, id="up-to-twice"),
        pytest.param(0.1, 0.5, 10.5, id="small-factor"),
        pytest.param(0.0, 0.5, 15.0, id="non-positive-factor-means-1"),
    ],
)
def test_jitter(factor: float, rand: float, expected: float) -> None:
    assert jitter(10.0, factor, lambda: rand) == pytest.approx(expected)
