"""Active health checks of the local data plane, as cloud-provider-kind runs them.

``kube-proxy`` and ``node-port`` modes send ``GET http://<address>:<port><path>`` and count a
2xx answer as success; ``tcp`` mode counts a completed TCP connect. One asyncio task per
(load balancer, node) probes every ``interval`` seconds with a ``timeout``; results go through
:class:`HealthState` (unhealthy after ``fall`` failures, healthy after ``rise`` successes) and
every change of verdict is reported to ``on_change`` (which the data plane writes to
``backend_health``). Waiters can await a condition with :meth:`HealthChecker.wait_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kccm.providers.local.dataplane.model import HealthState, ProbeTarget

__all__ = ["HealthChecker", "HealthSettings", "probe"]

log = logging.getLogger("kccm.dataplane")

OnChange = Callable[[ProbeTarget, HealthState], None]


@dataclass(frozen=True, slots=True)
class HealthSettings:
    interval: float = 2.0
    timeout: float = 3.0
    fall: int = 2
    rise: int = 1


async def _http_get(target: ProbeTarget) -> tuple[bool, str]:
    reader, writer = await asyncio.open_connection(target.address, target.port)
    try:
        request = (
            f"GET {target.path} HTTP/1.1\r\nHost: {target.address}:{target.port}\r\n"
            "User-Agent: kccm-dataplane\r\nConnection: close\r\n\r\n"
        )
        writer.write(request.encode())
        await writer.drain()
        status_line = (await reader.readline()).decode("latin-1").strip()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = status_line.split()
    ok = len(parts) >= 2 and parts[1].startswith("2")
    return ok, status_line or "empty response"


async def _tcp_connect(target: ProbeTarget) -> tuple[bool, str]:
    _, writer = await asyncio.open_connection(target.address, target.port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, "connected"


async def probe(target: ProbeTarget, limit: float) -> tuple[bool, str]:
    """One check: (success, detail)."""
    check = _tcp_connect if target.mode == "tcp" else _http_get
    try:
        async with asyncio.timeout(limit):
            return await check(target)
    except TimeoutError:
        return False, f"timeout after {limit:g}s"
    except OSError as exc:
        return False, os.strerror(exc.errno) if exc.errno else str(exc)
    except ValueError as exc:  # a status line longer than the stream limit
        return False, f"bad response: {exc}"


class HealthChecker:
    def __init__(self, settings: HealthSettings, on_change: OnChange) -> None:
        self.settings = settings
        self._on_change = on_change
        self._states: dict[tuple[str, str], HealthState] = {}
        self._tasks: dict[ProbeTarget, asyncio.Task[None]] = {}
        self._changed = asyncio.Condition()

    def usable(self, load_balancer: str, node: str) -> bool:
        state = self._states.get((load_balancer, node))
        return state is None or state.usable

    def state(self, load_balancer: str, node: str) -> HealthState | None:
        return self._states.get((load_balancer, node))

    def set_targets(self, targets: Iterable[ProbeTarget]) -> list[tuple[str, str]]:
        """Start and stop probes to match ``targets``; returns the (lb, node) pairs dropped."""
        wanted = set(targets)
        removed = set()
        for target in [t for t in self._tasks if t not in wanted]:
            self._tasks.pop(target).cancel()
            self._states.pop((target.load_balancer, target.node), None)
            removed.add((target.load_balancer, target.node))
        for target in wanted - self._tasks.keys():
            s = self.settings
            self._states[(target.load_balancer, target.node)] = HealthState(s.fall, s.rise)
            self._tasks[target] = asyncio.get_running_loop().create_task(self._run(target))
        live = {(t.load_balancer, t.node) for t in wanted}
        return sorted(removed - live)

    async def _run(self, target: ProbeTarget) -> None:
        key = (target.load_balancer, target.node)
        while True:
            ok, detail = await probe(target, self.settings.timeout)
            state = self._states.get(key)
            if state is None:
                return
            if state.record(ok, detail):
                log.info(
                    "backend %s of %s is %s (%s)",
                    target.node,
                    target.load_balancer,
                    "healthy" if state.healthy else "unhealthy",
                    detail,
                )
                self._on_change(target, state)
            async with self._changed:
                self._changed.notify_all()
            await asyncio.sleep(self.settings.interval)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, re-checked after every probe."""
        async with self._changed:
            await self._changed.wait_for(predicate)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        self._tasks.clear()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
