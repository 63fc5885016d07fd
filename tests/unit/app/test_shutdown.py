"""Bounded exit: the deadline timer and the exit past threads a provider left running."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from kccm.app.shutdown import EXIT_FORCED, ExitDeadline, guard_interpreter_exit, stuck_threads


class ExitRecorder:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.called = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.called.set()


@pytest.fixture
def stuck_thread() -> Iterator[threading.Thread]:
    """A non-daemon thread blocked like a provider call that never returns (released after)."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="kccm-provider_0")
    thread.start()
    yield thread
    release.set()
    thread.join(5)


def test_deadline_ends_the_process_with_the_forced_status() -> None:
    recorder = ExitRecorder()
    deadline = ExitDeadline(recorder)
    deadline.arm(0.01)
    assert recorder.called.wait(5)
    assert recorder.codes == [EXIT_FORCED]


def test_a_cancelled_deadline_never_fires() -> None:
    recorder = ExitRecorder()
    deadline = ExitDeadline(recorder)
    deadline.arm(0.2)
    deadline.cancel()
    assert not recorder.called.wait(0.5)
    assert recorder.codes == []


def test_arming_twice_keeps_the_first_deadline() -> None:
    recorder = ExitRecorder()
    deadline = ExitDeadline(recorder)
    deadline.arm(0.01)
    deadline.arm(3600)
    assert recorder.called.wait(5)
    assert recorder.codes == [EXIT_FORCED]


def test_a_stuck_provider_thread_does_not_hold_the_exit(stuck_thread: threading.Thread) -> None:
    recorder = ExitRecorder()
    assert stuck_thread in stuck_threads()
    guard_interpreter_exit(0, recorder, settle=0.01)
    assert recorder.called.wait(5)
    assert recorder.codes == [0], "the status already decided, not the forced one"


def test_the_guard_never_fires_when_the_interpreter_exits_in_time() -> None:
    recorder = ExitRecorder()
    timer = guard_interpreter_exit(0, recorder, settle=3600)
    assert timer.daemon, "a daemon timer dies with the process instead of holding it"
    timer.cancel()
    assert recorder.codes == []


def test_daemon_threads_are_not_stuck() -> None:
    daemon = threading.Thread(target=threading.Event().wait, daemon=True)
    daemon.start()  # daemon threads never block interpreter exit
    assert daemon not in stuck_threads()


def test_exit_now_ends_the_process_with_the_given_status() -> None:
    recorder = ExitRecorder()
    ExitDeadline(recorder).exit_now(1)
    assert recorder.codes == [1]
