"""kccm.util.process.pid_exists."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kccm.util.process import pid_exists


def _reaped_child() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize(
    ("pid", "exists"),
    [
        pytest.param(os.getpid, True, id="this-process"),
        pytest.param(lambda: 1, True, id="init-another-users-process"),
        pytest.param(_reaped_child, False, id="an-exited-reaped-child"),
    ],
)
def test_pid_exists(pid: object, exists: bool) -> None:
    assert callable(pid)
    assert pid_exists(pid()) is exists
