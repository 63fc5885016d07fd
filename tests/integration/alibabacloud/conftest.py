"""Fixtures the tests that run upstream's manager share: ``emu`` (a fresh emulator, after
checking that the manager is built: skipped, or failed under ``KCCM_REQUIRE_CONTROL_PLANE=1``,
before anything starts) and ``upstream`` (the test's upstream processes, stopped at its end)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alibabacloud_upstream_support import require_manager

from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.testing.upstream import UpstreamProcesses, running_processes


@pytest.fixture
def emu() -> Iterator[AlibabaEmulator]:
    require_manager()
    with alibaba_emulator() as running:
        yield running


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[UpstreamProcesses]:
    yield from running_processes(UpstreamProcesses(tmp_path))
