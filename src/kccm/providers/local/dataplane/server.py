"""The data plane loop: poll the state file, apply listener changes, probe, heartbeat."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kccm.providers.local.dataplane.health import HealthChecker, HealthSettings
from kccm.providers.local.dataplane.model import (
    HealthState,
    ListenerKey,
    ListenerSpec,
    LoadBalancerSpec,
    ProbeTarget,
    diff_listeners,
    listeners_of,
    probe_targets,
)
from kccm.providers.local.dataplane.proxy import Listener, start_listener
from kccm.providers.local.dataplane.store import (
    DataplaneStore,
    HealthRow,
    Heartbeat,
)
from kccm.providers.local.store import resolve_state_path

__all__ = [
    "DataPlane",
    "DataplaneBusyError",
    "DataplaneSettings",
    "default_state_file",
]

log = logging.getLogger("kccm.dataplane")
T = TypeVar("T")


@dataclass(frozen=True)
class DataplaneSettings:
    poll_interval: float = 0.5
    heartbeat_interval: float = 1.0
    stale_after: float = 5.0
    udp_idle_timeout: float = 30.0
    health: HealthSettings = field(default_factory=HealthSettings)


class DataplaneBusyError(RuntimeError):
    def __init__(self, holder: Heartbeat) -> None:
        super().__init__(f"another data plane (pid {holder.pid}) is running")
        self.holder = holder


def default_state_file() -> Path:
    """The store's rule: ``$KCCM_LOCAL_STATE``, else the user's data directory."""
    return resolve_state_path(None)


class DataPlane:
    """Listeners + health checks + heartbeat for one state file, in the running loop."""

    def __init__(
        self, state_file: Path, settings: DataplaneSettings | None = None, pid: int | None = None
    ) -> None:
        self.settings = settings or DataplaneSettings()
        self.pid = os.getpid() if pid is None else pid
        self._store = DataplaneStore(Path(state_file))
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "kccm-dataplane-store")
        self.health = HealthChecker(self.settings.health, self._health_changed)
        self.listeners: dict[ListenerKey, Listener] = {}
        self._applied: dict[ListenerKey, ListenerSpec] = {}
        self._version: int | None = None
        self._retry = False
        self._tasks: list[asyncio.Task[None]] = []
        self._writes: set[asyncio.Task[None]] = set()
        self._reconciled = asyncio.Condition()
        self.reconciles = 0

    async def _db(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    # lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Claim the ``dataplane`` row (waiting for the store's schema), apply, start loops."""
        try:
            await self._claim()
        except DataplaneBusyError:
            await self._db(self._store.close)
            self._executor.shutdown(wait=True)
            raise
        await self.reconcile()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._poll()), loop.create_task(self._heartbeat())]
        log.info("data plane %d serving %s", self.pid, self._store.path)

    async def _claim(self) -> None:
        level = logging.INFO
        while True:
            try:
                holder = await self._db(self._store.claim, self.pid, self.settings.stale_after)
            except (FileNotFoundError, sqlite3.OperationalError) as exc:
                log.log(level, "waiting for the state file %s (%s)", self._store.path, exc)
                level = logging.DEBUG
                await asyncio.sleep(self.settings.poll_interval)
                continue
            if holder is not None:
                raise DataplaneBusyError(holder)
            return

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for listener in self.listeners.values():
            await listener.close()
        self.listeners.clear()
        self._applied.clear()
        await self.health.close()
        if self._writes:
            await asyncio.wait(list(self._writes))
        with contextlib.suppress(sqlite3.Error):
            await self._db(self._store.release, self.pid)
        await self._db(self._store.close)
        self._executor.shutdown(wait=True)
        log.info("data plane %d stopped", self.pid)

    # desired state ---------------------------------------------------------------------
    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.settings.poll_interval)
            try:
                version = await self._db(self._store.data_version)
                if version != self._version or self._retry:
                    self._version = version
                    await self.reconcile()
            except sqlite3.Error as exc:
                log.warning("reading the state file: %s", exc)

    async def reconcile(self) -> None:
        """Read every load balancer and apply the difference."""
        lbs = await self._db(self._store.load_balancers) or []
        self._apply_health(lbs)
        await self._apply_listeners(listeners_of(lbs))
        self.reconciles += 1
        async with self._reconciled:
            self._reconciled.notify_all()

    def _apply_health(self, lbs: list[LoadBalancerSpec]) -> None:
        targets = [target for lb in lbs for target in probe_targets(lb)]
        for lb_name, node in self.health.set_targets(targets):
            self._spawn_write(self._store.forget_health, lb_name, node)

    async def _apply_listeners(self, desired: dict[ListenerKey, ListenerSpec]) -> None:
        diff = diff_listeners(self._applied, desired)
        for key in diff.removed:
            self._applied.pop(key, None)
            listener = self.listeners.pop(key, None)
            if listener is not None:
                await listener.close()
                log.info("listener %s closed", key)
        for spec in diff.updated:
            self.listeners[spec.key].update(spec)
            self._applied[spec.key] = spec
            log.info("listener %s updated (%d backends)", spec.key, len(spec.backends))
        self._retry = False
        for spec in diff.added:
            await self._add(spec)

    async def _add(self, spec: ListenerSpec) -> None:
        try:
            listener = await start_listener(
                spec, self.health.usable, udp_idle_timeout=self.settings.udp_idle_timeout
            )
        except OSError as exc:
            log.error("listener %s: cannot bind: %s (will retry)", spec.key, exc)
            self._retry = True
            return
        self.listeners[spec.key] = listener
        self._applied[spec.key] = spec
        log.info("listener %s open for %s", spec.key, spec.load_balancer)

    async def flush(self) -> None:
        """Wait until every state-file write queued so far has been done."""
        await asyncio.sleep(0)
        await self._db(lambda: None)

    async def wait_reconciled(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, re-checked after every reconcile."""
        async with self._reconciled:
            await self._reconciled.wait_for(predicate)

    # writes ----------------------------------------------------------------------------
    def _health_changed(self, target: ProbeTarget, state: HealthState) -> None:
        row = HealthRow(target.load_balancer, target.node, bool(state.healthy), state.detail)
        self._spawn_write(self._store.write_health, row)

    def _spawn_write(self, fn: Callable[..., None], *args: object) -> None:
        async def write() -> None:
            try:
                await self._db(fn, *args)
            except sqlite3.Error as exc:
                log.warning("writing the state file: %s", exc)

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self._db(self._store.heartbeat, self.pid)
            except sqlite3.Error as exc:
                log.warning("heartbeat: %s", exc)
            await asyncio.sleep(self.settings.heartbeat_interval)


# the process ----------------------------------------------------------------------------
