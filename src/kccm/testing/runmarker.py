"""The processes one test run started, found by a marker in their environment.

CI's entry point (``.ci/run``) exports :data:`RUN_VARIABLE` with a value unique to the run;
every process the run starts inherits it (the control plane, kube-controller-manager, vcsim,
OCCM, the emulators and kccm daemons are started with this process's environment, extended),
and keeps it in ``/proc/PID/environ`` for its whole life. Once the run's tests are over, a
process still carrying the value was left behind by this run; another job's control plane on
the same machine carries another value, or none, and is not this run's concern.

Run as ``python -m kccm.testing.runmarker VALUE`` (standard library only, so any Python 3
runs it before or without the project's venv): lists the run's live processes, itself and its
ancestors left out, after giving them a few seconds to finish exiting; exit status 1 when
some remain. Run it on its own, not in a pipeline (the pipeline's other commands carry the
value too).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

__all__ = ["RUN_VARIABLE", "ancestors", "left_behind", "main", "run_processes"]

RUN_VARIABLE = "KCCM_TEST_RUN"
PROC = Path("/proc")
GRACE = 10.0
"""Seconds a process being stopped (SIGTERM, or PR_SET_PDEATHSIG after its owner) gets to
be gone before it counts as left behind."""


def _pids(proc: Path) -> Iterator[int]:
    for entry in proc.iterdir():
        if entry.name.isdigit():
            yield int(entry.name)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # gone meanwhile, or another user's
        return b""


def _parent(pid: int, proc: Path) -> int:
    """The parent's pid, from ``/proc/PID/stat`` (the field after ``(comm) state``); 0 when
    the process is gone."""
    stat = _read(proc / str(pid) / "stat")
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else 0


def ancestors(pid: int, proc: Path = PROC) -> set[int]:
    """``pid`` and every process above it."""
    found: set[int] = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        pid = _parent(pid, proc)
    return found


def run_processes(
    run: str, *, proc: Path = PROC, exclude: Collection[int] = ()
) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds
    ``KCCM_TEST_RUN=<run>`` exactly, but those in ``exclude``."""
    if not run:
        raise ValueError(f"{RUN_VARIABLE} needs a non-empty value")
    marker = f"{RUN_VARIABLE}={run}".encode()
    found = []
    for pid in _pids(proc):
        if pid in exclude or marker not in _read(proc / str(pid) / "environ").split(b"\0"):
            continue
        argv = _read(proc / str(pid) / "cmdline").rstrip(b"\0").split(b"\0")
        command = " ".join(arg.decode(errors="replace") for arg in argv)
        found.append((pid, " ".join(command.split())))  # one line, even for ``python -c``
    return sorted(found)


def left_behind(run: str, grace: float = GRACE) -> list[tuple[int, str]]:
    """The run's processes but this one and its ancestors (the check's own chain: the CI
    script, its subshell), once none went away for ``grace`` seconds."""
    mine = ancestors(os.getpid())
    deadline = time.monotonic() + grace
    while (left := run_processes(run, exclude=mine)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def main(argv: Sequence[str] | None = None, *, grace: float = GRACE) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0]:
        print(f"usage: python -m kccm.testing.runmarker ${RUN_VARIABLE}", file=sys.stderr)
        return 2
    left = left_behind(args[0], grace)
    for pid, command in left:
        print(f"{pid} {command}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
