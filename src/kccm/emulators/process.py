"""An emulator's process: started, awaited until it listens, stopped.

Every emulator runs as a child process that binds its own port (port 0: the kernel's choice,
held from the bind on, so no other process can take it first) and announces that it listens
with one JSON object on its first stdout line: its URL and what a client needs besides.
:func:`spawn` starts it and waits for that line (:func:`read_ready`, in a thread, so a child
that hangs before writing it cannot hang the test: once it has spent ``timeout`` seconds of its
own CPU time, or ten times that in all, or when it ends without writing it, the child is
killed and the caller's error raised). The budget is the child's CPU time, not the clock's,
because a start is CPU work (imports, a first compile of its modules) that a loaded machine
stretches: with two cores shared by a test run's workers, a moto start costing 3-6 CPU-s took
over 30 s of the clock, and a clock budget failed every test of that module.
:class:`EmulatorProcess` holds the child; its :meth:`~EmulatorProcess.stop` ends it
(:func:`stop_process`: SIGTERM, SIGKILL after a grace period), and so does the test process's
exit for any emulator a test left running. A Python emulator is also told the parent's pid
(``--parent-pid``) and stops by itself once that process is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

__all__ = [
    "READY_TIMEOUT",
    "EmulatorProcess",
    "ServingTls",
    "child_env",
    "cpu_seconds",
    "python_module",
    "read_ready",
    "spawn",
    "stop_process",
]

READY_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServingTls:
    """An HTTPS emulator's serving certificate and key, and the CA that signed it (PEM)."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[str, str, str]:
        """The three written into ``directory``: the CA's, the certificate's and the key's
        paths."""
        paths = tuple(str(directory / name) for name in ("ca.pem", "cert.pem", "key.pem"))
        for path, pem in zip(paths, (self.ca_pem, self.cert_pem, self.key_pem), strict=True):
            Path(path).write_bytes(pem)
        return paths[0], paths[1], paths[2]


HANG_FACTOR = 10.0
"""A child that writes nothing while using little CPU is given up after this many times its
CPU budget, in the clock's seconds (it waits on something that does not come)."""


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used, from ``/proc`` (``None`` where
    there is none, or once the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_ready(
    process: subprocess.Popen[str],
    *,
    timeout: float,
    name: str,
    error: type[Exception],
    hang_after: float | None = None,
) -> dict[str, Any]:
    """The JSON object of ``process``'s first stdout line; ``error`` when there is none, saying
    whether ``name`` exited first (with its status) or did not start: it used ``timeout``
    seconds of CPU time, or ``hang_after`` seconds passed (default :data:`HANG_FACTOR` times
    ``timeout``; without ``/proc`` the clock's seconds count as its CPU time)."""
    result: dict[str, str] = {}

    def read() -> None:
        assert process.stdout is not None
        result["line"] = process.stdout.readline()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began, limit = time.monotonic(), timeout * HANG_FACTOR if hang_after is None else hang_after
    while reader.is_alive():
        reader.join(0.25)
        took = time.monotonic() - began
        used = cpu_seconds(process.pid)
        if reader.is_alive() and (took >= limit or (took if used is None else used) >= timeout):
            break
    line = result.get("line") or ""
    if not line:
        timed_out = reader.is_alive()  # before the kill, which ends the read too
        used = cpu_seconds(process.pid)
        process.kill()
        code = process.wait()
        reader.join(5)  # the pipe's end reached: the read is over before its file is closed
        if process.stdout is not None:
            process.stdout.close()  # or the caller's next test warns of an unclosed file
        if timed_out:
            spent = "" if used is None else f" ({used:.1f} s of CPU time)"
            raise error(
                f"{name} did not start: no word after {time.monotonic() - began:.0f} s{spent}; "
                f"it may use {timeout:g} s of CPU time, or wait {limit:g} s"
            )
        raise error(f"{name} exited ({code}) before it listened")
    return dict(json.loads(line))


def stop_process(process: subprocess.Popen[str], grace: float = 10.0) -> None:
    """SIGTERM, SIGKILL after ``grace`` seconds; then its stdout pipe is closed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a Python emulator: this process's, with ``extra``, and this very
    ``kccm`` first on ``PYTHONPATH`` (a checkout or an installed copy)."""
    env = {**os.environ, **(extra or {})}
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def python_module(module: str, *options: str) -> list[str]:
    """The command line of ``python -m module options...`` for this interpreter, told to stop
    when this process is gone."""
    return [sys.executable, "-m", module, *options, "--parent-pid", str(os.getpid())]


def spawn(
    args: Sequence[str],
    *,
    name: str,
    error: type[Exception],
    log_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = READY_TIMEOUT,
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start ``args`` (its stderr appended to ``log_path``, or dropped) and wait until it
    listens: the process and its ready line."""
    with contextlib.ExitStack() as stack:
        stderr: Any = subprocess.DEVNULL
        if log_path is not None:
            stderr = stack.enter_context(open(log_path, "ab"))
        process = subprocess.Popen(
            list(args),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=None if env is None else dict(env),
        )
    return process, read_ready(process, timeout=timeout, name=name, error=error)


@dataclass(eq=False)
class EmulatorProcess:
    """A running emulator's child process; stopped by :meth:`stop`, by the end of a ``with``
    block, or with the test process."""

    process: subprocess.Popen[str]

    def __post_init__(self) -> None:
        _RUNNING.add(self)

    def stop(self) -> None:
        _RUNNING.discard(self)
        stop_process(self.process)
        self.cleanup()

    def cleanup(self) -> None:
        """What the emulator leaves on disk, removed once its process is gone."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_RUNNING: set[EmulatorProcess] = set()


@atexit.register
def _stop_running() -> None:
    """Emulators a test left running stop with the test process."""
    for emulator in list(_RUNNING):
        emulator.stop()
