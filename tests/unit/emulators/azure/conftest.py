"""The Azure emulator's application in this process (``azure_api.start_api``): a fresh default
world per test, so every test leaves the emulator as it found it (there is no other)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from azure_api import Api, start_api


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    api = await start_api()
    try:
        yield api
    finally:
        await api.close()
