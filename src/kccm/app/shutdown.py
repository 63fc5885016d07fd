"""Bounded process exit, whatever a cloud provider is doing.

A provider's blocking (``def``) methods run in worker threads that Python cannot cancel, and
``concurrent.futures`` joins those threads when the interpreter exits; an ``async`` method can
also ignore cancellation for a while. Neither may keep the cloud-controller-manager alive
after a stop signal, as a Go process ends when ``main`` returns whatever its goroutines do:

* :class:`ExitDeadline` is armed when shutdown starts: if the orderly path has not finished
  ``grace + slack`` seconds later, a daemon timer thread flushes the logs and ends the process
  (status 1: the shutdown was not clean);
* :func:`exit_past_stuck_threads` runs once the orderly path has finished: if provider
  threads are still running it ends the process at once with the status already decided,
  instead of letting interpreter shutdown wait for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

__all__ = ["EXIT_FORCED", "SHUTDOWN_SLACK", "ExitDeadline", "exit_past_stuck_threads"]

_log = logging.getLogger("kccm.manager")
EXIT_FORCED = 1
SHUTDOWN_SLACK = 5.0
"""Seconds after the grace period for releasing the lease and flushing events."""

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


def exit_past_stuck_threads(
    code: int, exit_process: ExitFunction = os._exit, *, settle: float = 0.5
) -> None:
    """End the process now with ``code`` if threads would keep it alive; else return.

    Threads get ``settle`` seconds in all to finish (idle pool workers exit at once)."""
    until = time.monotonic() + settle
    for thread in stuck_threads():
        thread.join(max(0.0, until - time.monotonic()))
    stuck = stuck_threads()
    if not stuck:
        return
    _log.warning(
        "exiting although %d thread(s) are still running a cloud provider call: %s",
        len(stuck),
        ", ".join(sorted(t.name for t in stuck)),
    )
    _flush()
    exit_process(code)
