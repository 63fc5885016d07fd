"""Bounded process exit, whatever a cloud provider is doing.

A provider's blocking (``def``) methods run in worker threads that Python cannot cancel, and
``concurrent.futures`` joins those threads when the interpreter exits; an ``async`` method can
also ignore cancellation for a while. Neither may keep the cloud-controller-manager alive
after a stop signal, as a Go process ends when ``main`` returns whatever its goroutines do:

* :class:`ExitDeadline` is armed when shutdown starts: if the orderly path has not finished
  ``grace + slack`` seconds later, a daemon timer thread flushes the logs and ends the process
  (status 1: the shutdown was not clean);
* :func:`guard_interpreter_exit` runs once the orderly path has finished: the interpreter
  exits as usual (atexit handlers run, idle thread pools wind down), but if it is still
  waiting for a thread ``EXIT_SETTLE`` seconds later, the process ends with the status
  already decided.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable

__all__ = [
    "EXIT_FORCED",
    "EXIT_SETTLE",
    "SHUTDOWN_SLACK",
    "ExitDeadline",
    "guard_interpreter_exit",
    "stuck_threads",
]

_log = logging.getLogger("kccm.manager")
EXIT_FORCED = 1
SHUTDOWN_SLACK = 5.0
"""Seconds after the grace period for releasing the lease and flushing events."""
EXIT_SETTLE = 2.0
"""Seconds interpreter shutdown may take once the manager has returned."""

ExitFunction = Callable[[int], None]


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a broken stream must not stop the exit
            stream.flush()


class ExitDeadline:
    """A one-shot timer that ends the process when shutdown overruns."""

    def __init__(self, exit_process: ExitFunction = os._exit) -> None:
        self._exit = exit_process
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def arm(self, seconds: float) -> None:
        """Start the countdown (later calls keep the first deadline)."""
        with self._lock:
            if self._timer is not None:
                return
            timer = threading.Timer(max(seconds, 0.0), self._fire, args=(seconds,))
            timer.name = "kccm-exit-deadline"
            timer.daemon = True
            self._timer = timer
        timer.start()

    def cancel(self) -> None:
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def exit_now(self, code: int) -> None:
        """Flush the logs and end the process with ``code`` at once, whatever still runs
        (klog's ``FlushAndExit``)."""
        _flush()
        self._exit(code)

    def _fire(self, seconds: float) -> None:
        _log.error(
            "shutdown did not finish within %gs (a cloud provider call may be stuck); exiting now",
            seconds,
        )
        _flush()
        self._exit(EXIT_FORCED)


def stuck_threads() -> list[threading.Thread]:
    """Live non-daemon threads other than the main one (they would block interpreter exit)."""
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and t.is_alive() and not t.daemon]


def guard_interpreter_exit(
    code: int, exit_process: ExitFunction = os._exit, *, settle: float = EXIT_SETTLE
) -> threading.Timer:
    """Let the interpreter exit normally (atexit handlers, idle thread pools winding down),
    but end the process with ``code`` if that has not happened ``settle`` seconds later, e.g.
    because interpreter shutdown waits for a provider call stuck in a worker thread."""

    def fire() -> None:
        stuck = sorted(t.name for t in stuck_threads())
        _log.warning(
            "exiting although %d thread(s) are still running a cloud provider call: %s",
            len(stuck),
            ", ".join(stuck),
        )
        _flush()
        exit_process(code)

    timer = threading.Timer(settle, fire)
    timer.name = "kccm-exit-guard"
    timer.daemon = True
    timer.start()
    return timer
