"""Named health checks and the apiserver's healthz response format.

A check is a callable taking no argument, plain or ``async``. It passes when it returns
(``None`` or anything but ``False``) and fails when it raises or returns ``False``. The server
runs checks on its own thread: a plain check there (it must be thread-safe), an ``async`` one on
:attr:`HealthChecks.home`, the loop its state belongs to.

The aggregate answer mirrors ``k8s.io/apiserver/pkg/server/healthz``:

* every check passes → 200 ``ok``; with ``?verbose`` one ``[+]<name> ok`` line per check and
  ``<endpoint> check passed``;
* any check fails → 500 listing every check, a failing one as ``[-]<name> failed: reason
  withheld`` (the reason is logged, never served), and ``<endpoint> check failed``;
* ``?exclude=<name>`` (repeatable) skips a check; an unknown name adds a ``warn:`` line;
* with no check registered, a ``ping`` check that always passes stands in (as upstream).

One check alone (``/<endpoint>/<name>``) answers 200 ``ok`` or 500
``internal server error: <reason>``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.loop import on_loop

__all__ = ["HealthCheck", "HealthChecks", "HealthResponse", "LoopPulse", "ping"]

HealthCheck = Callable[[], object]

_log = logging.getLogger(__name__)


def ping() -> None:
    """The check used when none is registered: always passes."""


@dataclass(frozen=True)
class HealthResponse:
    status: int
    body: str


class HealthChecks:
    """The ordered checks behind one endpoint (``healthz``, ``readyz`` or ``livez``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.home: asyncio.AbstractEventLoop | None = None  # where ``async`` checks run
        self._checks: dict[str, HealthCheck] = {}

    @property
    def names(self) -> list[str]:
        """The names served, in registration order (``ping`` when there are none)."""
        return list(self._effective())

    def add(self, name: str, check: HealthCheck) -> None:
        """Register ``check`` under ``name``; a name may be registered once."""
        if not name or "/" in name:
            raise ValueError(f"invalid health check name {name!r}")
        if name in self._checks:
            raise ValueError(f"health check {name!r} is already registered")
        self._checks[name] = check

    def remove(self, name: str) -> None:
        self._checks.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._effective()

    async def check_one(self, name: str) -> HealthResponse:
        """The ``/<endpoint>/<name>`` answer. ``name`` must be a served check."""
        error = await _run(self._effective()[name], self.home)
        if error is None:
            return HealthResponse(200, "ok")
        return HealthResponse(500, f"internal server error: {error}\n")

    async def check_all(self, *, verbose: bool, exclude: Iterable[str] = ()) -> HealthResponse:
        """The aggregate ``/<endpoint>`` answer."""
        excluded = set(exclude)
        lines, failed = await self._run_all(excluded)
        unknown = sorted(excluded - set(self._effective()))
        if unknown:
            lines.append(
                f"warn: some health checks cannot be excluded: no matches for {_quoted(unknown)}\n"
            )
        if failed:
            _log.info("%s check failed: %s", self.endpoint, ",".join(failed))
            return HealthResponse(500, "".join(lines) + f"{self.endpoint} check failed\n")
        if not verbose:
            return HealthResponse(200, "ok")
        return HealthResponse(200, "".join(lines) + f"{self.endpoint} check passed\n")

    async def _run_all(self, excluded: set[str]) -> tuple[list[str], list[str]]:
        lines: list[str] = []
        failed: list[str] = []
        for name, check in self._effective().items():
            if name in excluded:
                continue
            error = await _run(check, self.home)
            if error is None:
                lines.append(f"[+]{name} ok\n")
            else:
                _log.info("%s check %s failed: %s", self.endpoint, name, error)
                lines.append(f"[-]{name} failed: reason withheld\n")
                failed.append(name)
        return lines, failed

    def _effective(self) -> dict[str, HealthCheck]:
        """A copy: the daemon's loop may register checks while the serving thread runs them."""
        return dict(self._checks) or {"ping": ping}


async def _run(check: HealthCheck, home: asyncio.AbstractEventLoop | None) -> str | None:
    """None when ``check`` passes, else the reason it failed."""
    try:
        result = check()
        if inspect.isawaitable(result):
            result = await on_loop(home, result)
    except Exception as exc:
        return str(exc) or type(exc).__name__
    return "check returned False" if result is False else None


def _quoted(names: list[str]) -> str:
    return ",".join(f'"{name}"' for name in names)


class LoopPulse:
    """The daemon loop's pulse, for checks that run on the server's thread.

    While the server shared the daemon's loop, a loop stuck in a blocking call made every
    health request time out, and the kubelet's liveness probe restarted the process. Served
    from a thread of its own, the server would answer regardless; the controllers' checks call
    :meth:`check` instead, which fails once the loop has not run for ``stale_after`` seconds
    (a busy loop still runs :meth:`run` every ``period`` plus its longest callback)."""

    def __init__(
        self, clock: Clock = REAL_CLOCK, *, period: float = 1.0, stale_after: float = 10.0
    ) -> None:
        self._clock = clock
        self.period, self.stale_after = period, stale_after
        self._last: float | None = None  # None: not running (yet), nothing to judge

    async def run(self) -> None:
        """Beat until cancelled (on the loop to watch)."""
        while True:
            self._last = self._clock.monotonic()
            await self._clock.sleep(self.period)

    def check(self) -> None:
        """Raise when the loop has not beaten for ``stale_after`` seconds."""
        last = self._last
        if last is None:
            return
        silent = self._clock.monotonic() - last
        if silent > self.stale_after:
            raise RuntimeError(f"the controllers' event loop has not run for {silent:.0f}s")
