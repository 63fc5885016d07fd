"""Forced interleavings of concurrent syncs, for tests of races: never a sleep.

Each sync runs in its own thread under a role name (:meth:`Interleaving.run`). The code under
test is watched through hooks the test installs (a wrapped API call, a logging handler, a
wrapped lock): :meth:`Interleaving.mark` records that the current role reached a point
(``"read"``), :meth:`Interleaving.before` holds the current role at a point until another role
has reached one of the points its :class:`Stop` names. A role waiting for a lock that the code
under test takes (:meth:`Interleaving.watched`, :meth:`Interleaving.lock_log`) reaches
``"waits"``, so a stop written for the racy code (``until`` the other role has read) also ends
when the fix makes the other role wait its turn. Every role reaches ``"done"`` when its sync
returns or raises.

The one timeout, :data:`SAFETY_NET`, only turns a deadlock (an interleaving the code cannot
take) into a test failure; it is never what a passing test waits for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["SAFETY_NET", "Interleaving", "Stop", "WatchedLock"]

SAFETY_NET = 60.0


@dataclass(frozen=True)
class Stop:
    """Role ``role`` stops at its first ``point`` until one of ``until`` is reached
    (``"<role>:<point>"``)."""

    role: str
    point: str
    until: tuple[str, ...]


class _Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class WatchedLock:
    """A lock standing in for ``inner`` that marks ``"waits"`` when it must wait."""

    def __init__(self, inner: _Lock, order: Interleaving) -> None:
        self.inner = inner
        self.order = order

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.inner.acquire(blocking=False):
            return True
        if not blocking:
            return False
        self.order.mark("waits")
        return self.inner.acquire(True, timeout)

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _Marker(logging.Handler):
    def __init__(self, order: Interleaving, point: str) -> None:
        super().__init__(logging.DEBUG)
        self.order = order
        self.point = point

    def emit(self, record: logging.LogRecord) -> None:
        self.order.mark(self.point)


class Interleaving:
    """The points the roles reached, and the stops that wait for them."""

    def __init__(self, stops: Iterable[Stop] = (), safety_net: float = SAFETY_NET) -> None:
        self.stops = {(s.role, s.point): s for s in stops}
        self.safety_net = safety_net
        self.reached: set[str] = set()
        self._stopped: set[tuple[str, str]] = set()
        self._cond = threading.Condition()
        self._local = threading.local()

    @property
    def role(self) -> str:
        """The current thread's role ("" outside :meth:`run`)."""
        return str(getattr(self._local, "role", ""))

    def mark(self, point: str) -> None:
        """The current role reached ``point``."""
        if not self.role:
            return
        with self._cond:
            self.reached.add(f"{self.role}:{point}")
            self._cond.notify_all()

    def before(self, point: str) -> None:
        """Hold the current role at ``point`` (its first time there) as its stop says."""
        stop = self.stops.get((self.role, point)) if self.role else None
        if stop is None or (self.role, point) in self._stopped:
            return
        self._stopped.add((self.role, point))
        with self._cond:
            met = self._cond.wait_for(lambda: self.reached & set(stop.until), self.safety_net)
        if not met:
            raise AssertionError(f"{self.role} waited at {point} in vain for one of {stop.until}")

    def watched(self, inner: _Lock) -> WatchedLock:
        return WatchedLock(inner, self)

    @contextmanager
    def lock_log(self, logger: str, point: str = "waits") -> Iterator[None]:
        """Mark ``point`` whenever ``logger`` logs (a lock that says at DEBUG that it waits)."""
        target = logging.getLogger(logger)
        handler = _Marker(self, point)
        level = target.level
        target.setLevel(logging.DEBUG)
        target.addHandler(handler)
        try:
            yield
        finally:
            target.removeHandler(handler)
            target.setLevel(level)

    def run(self, syncs: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
        """Each sync in its own thread under its role; what each returned or raised."""
        results: dict[str, Any] = {}

        def body(role: str, sync: Callable[[], Any]) -> None:
            self._local.role = role
            try:
                results[role] = sync()
            except Exception as err:  # the test looks at it
                results[role] = err
            finally:
                self.mark("done")

        threads = [
            threading.Thread(target=body, args=item, name=f"sync-{item[0]}")
            for item in syncs.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.safety_net * 2)
        if any(t.is_alive() for t in threads):
            raise AssertionError("a sync never finished")
        return results
