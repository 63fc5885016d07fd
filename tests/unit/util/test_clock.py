from __future__ import annotations

import asyncio
from datetime import timedelta

from kccm.util.clock import FakeClock


async def test_advance_wakes_sleepers_in_deadline_order() -> None:
    clock = FakeClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.monotonic() - 1000.0))

    tasks = [asyncio.ensure_future(sleeper(n, s)) for n, s in (("c", 3), ("a", 1), ("b", 2))]
    await clock.advance(2.5)
    assert woke == [("a", 1.0), ("b", 2.0)]
    await clock.advance(1)
    assert woke[-1] == ("c", 3.0)
    await asyncio.gather(*tasks)


async def test_wall_clock_moves_with_monotonic() -> None:
    clock = FakeClock()
    before = clock.now()
    await clock.advance(90)
    assert clock.now() - before == timedelta(seconds=90)


async def test_run_until_idle_follows_a_sleeping_loop() -> None:
    clock = FakeClock()
    ticks: list[float] = []

    async def loop() -> None:
        for _ in range(3):
            await clock.sleep(10)
            ticks.append(clock.monotonic())

    task = asyncio.ensure_future(loop())
    await clock.run_until_idle()
    await task
    assert ticks == [1010.0, 1020.0, 1030.0]


async def test_cancelled_sleeper_is_not_counted() -> None:
    clock = FakeClock()
    task = asyncio.ensure_future(clock.sleep(5))
    await asyncio.sleep(0)
    assert clock.pending_sleepers == 1
    task.cancel()
    await asyncio.sleep(0)
    assert clock.pending_sleepers == 0
    assert clock.next_deadline() is None
