"""Process supervision of the data plane: find the live one by its heartbeat, start a detached
one (its own session, output to ``dataplane.log`` beside the state file) when none lives."""

from __future__ import annotations

import atexit
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kccm.providers.local.dataplane.store import (
    Heartbeat,
    pid_alive,
    read_heartbeat,
)

__all__ = [
    "ensure_dataplane_running",
    "live_dataplane",
]


def live_dataplane(
    state_file: Path, stale_after: float = 5.0, *, now: float | None = None
) -> Heartbeat | None:
    """The data plane heartbeating in ``state_file``, if one is alive: its row is younger
    than ``stale_after`` seconds at ``now`` (epoch seconds; default the system time) and its
    pid is a live process (not a zombie)."""
    _reap()
    try:
        beat = read_heartbeat(state_file)
    except sqlite3.Error:
        return None
    at = time.time() if now is None else now
    if beat is None or at - beat.heartbeat_at > stale_after:
        return None
    return beat if pid_alive(beat.pid) else None


def ensure_dataplane_running(
    state_file: str | os.PathLike[str],
    *,
    timeout: float = 10.0,
    extra_args: Sequence[str] = (),
) -> int:
    """The pid of the live data plane for ``state_file``, starting a detached one if needed.

    The child runs in a new session with stdin closed and output appended to
    ``dataplane.log`` beside the state file, so it outlives its caller (a SIGKILLed controller
    manager leaves traffic flowing). Waits up to ``timeout`` seconds for a heartbeat; raises
    RuntimeError when none comes.
    """
    path = Path(state_file)
    beat = live_dataplane(path)
    if beat is not None:
        return beat.pid
    child = _spawn(path, extra_args)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        beat = live_dataplane(path)
        if beat is not None:
            return beat.pid
        if child.poll() is not None and child.returncode != 1:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the data plane did not start; see {path.with_name('dataplane.log')}")


_CHILDREN: list[subprocess.Popen[bytes]] = []
"""Data planes started here: kept so they are reaped (no zombie, no ResourceWarning)."""


def _reap() -> None:
    _CHILDREN[:] = [child for child in _CHILDREN if child.poll() is None]


# A data plane stopped by its pid (``kccm local stop``, a test) after the last spawn or probe is
# still an unreaped child here: collect its status at exit, or the interpreter's teardown warns
# "subprocess N is still running" for it. A live one is left running, as designed.
atexit.register(_reap)


def _spawn(path: Path, extra_args: Sequence[str]) -> subprocess.Popen[bytes]:
    _reap()
    command = [sys.executable, "-m", "kccm.providers.local.dataplane_main"]
    command += ["--state-file", str(path), *extra_args]
    log_path = path.with_name("dataplane.log")
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as out:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN.append(child)
    return child
