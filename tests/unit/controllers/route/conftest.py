"""Fixtures of the node-route-controller's unit tests (see route_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from route_harness import (
    Env,
)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    made = Env()
    made.events.start()
    yield made
    await made.events.shutdown()
    await made.informers.stop()
    made.gate.close()
