"""kccm.emulators.process: the ready line of vcsim and the OpenStack emulator."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kccm.emulators.process import read_ready, stop_process


class Unready(RuntimeError):
    pass


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def _read(process: subprocess.Popen[str], timeout: float = 30.0) -> dict[str, object]:
    try:
        return read_ready(process, timeout=timeout, name="the child", error=Unready)
    finally:
        assert process.stdout is not None
        process.stdout.close()


def test_the_first_line_is_the_ready_object() -> None:
    code = 'import time; print(\'{"url": "http://127.0.0.1:1"}\', flush=True); time.sleep(600)'
    child = _child(code)
    try:
        assert _read(child) == {"url": "http://127.0.0.1:1"}
        assert child.poll() is None  # left running
    finally:
        child.kill()
        child.wait()


def test_a_child_that_exits_first_is_killed_and_named_with_its_status() -> None:
    child = _child("raise SystemExit(3)")
    with pytest.raises(Unready, match=r"^the child exited \(3\) before it listened$"):
        read_ready(child, timeout=30, name="the child", error=Unready)
    assert child.stdout is not None
    assert child.stdout.closed  # no unclosed pipe left for the GC to warn of in a later test


def test_a_child_that_never_writes_is_killed_after_the_wait() -> None:
    child = _child("import time; time.sleep(600)")
    with pytest.raises(Unready, match=r"^the child did not start: no word after .* wait 1 s$"):
        read_ready(child, timeout=30, name="the child", error=Unready, hang_after=1)
    assert child.returncode is not None  # killed and reaped
    assert child.stdout is not None
    assert child.stdout.closed


def test_a_child_that_spins_without_writing_is_killed_on_its_cpu_budget() -> None:
    """The budget is the child's CPU time: the clock's limit here is far away."""
    child = _child("while True: pass")
    with pytest.raises(Unready, match=r"s of CPU time\); it may use 0.5 s of CPU time"):
        read_ready(child, timeout=0.5, name="the child", error=Unready, hang_after=600)
    assert child.returncode is not None


def test_a_child_slow_by_the_clock_but_idle_is_waited_for() -> None:
    """What a loaded machine does to a start: more of the clock's time than the CPU budget,
    little CPU used; the child is waited for and its ready line read."""
    code = 'import time; time.sleep(1.5); print(\'{"url": "u"}\', flush=True); time.sleep(600)'
    child = _child(code)
    try:
        ready = read_ready(child, timeout=0.5, name="the child", error=Unready, hang_after=600)
        assert ready == {"url": "u"}
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def test_stop_terminates_then_kills_a_child_that_ignores_the_signal() -> None:
    polite = _child("import time; print('{}', flush=True); time.sleep(600)")
    stop_process(polite)
    assert polite.returncode == -15  # SIGTERM sufficed
    assert polite.stdout is not None
    assert polite.stdout.closed
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)"
    stubborn = _child(f"{code}; print('{{}}', flush=True); time.sleep(600)")
    assert read_ready(stubborn, timeout=30, name="it", error=Unready) == {}  # handler set
    stop_process(stubborn, grace=0.2)
    assert stubborn.returncode == -9
