"""The clock seam, re-exported for runtime users: see :mod:`kccm.util.clock`."""

from __future__ import annotations

from kccm.util.clock import REAL_CLOCK, Clock, FakeClock, RealClock

__all__ = ["REAL_CLOCK", "Clock", "FakeClock", "RealClock"]
