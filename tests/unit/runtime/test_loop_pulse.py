"""The loop pulse the controllers' health checks read from the server's thread (fake time)."""

from __future__ import annotations

import asyncio

import pytest

from kccm.runtime.healthz import LoopPulse
from kccm.util.clock import FakeClock


async def test_a_pulse_not_started_passes() -> None:
    LoopPulse(FakeClock()).check()


@pytest.mark.parametrize(
    ("silent_for", "fails"),
    [
        pytest.param(9.0, False, id="silent-9s-within-10s"),
        pytest.param(11.0, True, id="silent-11s-fails"),
    ],
)
async def test_a_loop_that_stops_beating_fails_the_check(silent_for: float, fails: bool) -> None:
    clock = FakeClock()
    pulse = LoopPulse(clock, period=1.0, stale_after=10.0)
    beating = asyncio.create_task(pulse.run())
    await clock.advance(30)  # a busy loop beats every period: always fresh
    pulse.check()
    beating.cancel()  # the loop is stuck: no more beats
    await asyncio.gather(beating, return_exceptions=True)
    await clock.advance(silent_for)
    if fails:
        with pytest.raises(RuntimeError, match=r"has not run for 1[01]s"):
            pulse.check()
    else:
        pulse.check()
