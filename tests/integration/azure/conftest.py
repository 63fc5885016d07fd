"""Fixtures the azure tests that run upstream's binaries share: ``emulator`` (a fresh Azure
emulator over TLS, after checking that upstream's binaries are built: skipped, or failed under
``KCCM_REQUIRE_CONTROL_PLANE=1``, before anything starts) and ``upstream`` (upstream's processes
of the test, stopped at its end). A module may define its own (``test_upstream_auth.py`` shares
one emulator for the module); the kccm-only modules use neither."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from azure_upstream_support import UpstreamProcesses, require_upstream, upstream_processes

from kccm.emulators.azure.launcher import AzureEmulator, azure_emulator
from kccm.testing.certs import emulator_tls


@pytest.fixture
def emulator() -> Iterator[AzureEmulator]:
    require_upstream()
    with azure_emulator(tls=emulator_tls()) as emu:
        yield emu


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[UpstreamProcesses]:
    yield from upstream_processes(tmp_path)
