"""The demo's child processes: the kccm daemon it spawns and the data plane that daemon
detaches, stopped with SIGTERM and, after a grace period, SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from kccm.util.process import pid_exists

__all__ = ["spawn", "terminate_pid", "wait_or_kill"]


def spawn(command: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def wait_or_kill(proc: subprocess.Popen[bytes], grace: float) -> int:
    try:
        return proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(grace)


def _alive(pid: int) -> bool:
    if not pid_exists(pid):
        return False
    with contextlib.suppress(ChildProcessError):  # our own child: reap it if it exited
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


def terminate_pid(pid: int, grace: float) -> str:
    """SIGTERM ``pid`` (the detached data plane), SIGKILL after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not _alive(pid):
        return f"pid {pid} stopped"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return f"pid {pid} killed after {grace:.0f} s"
