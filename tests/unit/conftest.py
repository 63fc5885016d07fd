"""Fixtures for the unit layer. ``collector_restored`` leaves the test process's cycle collector
as it found it (callbacks, freeze, threshold, enabled): for tests of :mod:`kccm.util.gcpolicy`
and of what calls it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture
def collector_restored() -> Iterator[None]:
    assert gc.get_freeze_count() == 0, "something else froze this test process"
    threshold, callbacks, enabled = gc.get_threshold(), list(gc.callbacks), gc.isenabled()
    yield
    gc.callbacks[:] = callbacks
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()
