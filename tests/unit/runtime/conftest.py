"""Fixtures for the runtime unit tests: everything runs on fake time."""

from __future__ import annotations

import pytest

from kccm.util.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
