"""The local provider's supervision of its data plane process: start it at ``initialize``,
check its heartbeat every ``dataplane-check-interval`` on the clock, start a new one when it
died (the process itself is started and found by :mod:`.dataplane.supervise`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from kccm.cloudprovider import ControllerClientBuilder
from kccm.providers.local.base import LocalBase
from kccm.util.clock import Clock

__all__ = [
    "DataplaneProbe",
    "DataplaneStarter",
    "DataplaneStopper",
    "DataplaneSupervision",
    "probe_dataplane",
    "start_dataplane",
    "stop_dataplane",
]

log = logging.getLogger("kccm.providers.local")

DataplaneStarter = Callable[[Path], int]
"""Given the state file, make sure a data plane serves it; returns its pid."""


DataplaneProbe = Callable[[Path, float], int | None]
"""Given the state file and the time now (epoch seconds): the pid of the data plane whose
heartbeat is fresh and whose process lives, else None."""

DataplaneStopper = Callable[[Path, int], None]
"""Given the state file and a data plane's pid: stop it (and wait until it has)."""

BACKEND_SETS_SCHEMA = 2
"""The schema version from which backend lists are in ``backend_sets``: a data plane started
before a file was migrated to it reads the old rows (it would drop every listener)."""


def start_dataplane(state_file: Path) -> int:
    """The default :data:`DataplaneStarter`: the live data plane's pid, starting one if none
    heartbeats (imported here so the provider's import stays light)."""
    from kccm.providers.local.dataplane.supervise import ensure_dataplane_running

    return ensure_dataplane_running(state_file)


def stop_dataplane(state_file: Path, pid: int, timeout: float = 10.0) -> None:
    """The default :data:`DataplaneStopper`: SIGTERM, then wait until no data plane
    heartbeats in ``state_file`` (it drops its row when it stops) or ``timeout`` passed."""
    from kccm.providers.local.dataplane.supervise import live_dataplane

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while live_dataplane(state_file) is not None and time.monotonic() < deadline:
        time.sleep(0.05)


def probe_dataplane(state_file: Path, now: float) -> int | None:
    """The default :data:`DataplaneProbe`: the heartbeat row of the state file."""
    from kccm.providers.local.dataplane.supervise import live_dataplane

    beat = live_dataplane(state_file, now=now)
    return None if beat is None else beat.pid


class DataplaneSupervision(LocalBase):
    """Starts the data plane and restarts it when its heartbeat stops."""

    def _init_supervision(
        self,
        starter: DataplaneStarter,
        probe: DataplaneProbe,
        clock: Clock,
        stopper: DataplaneStopper = stop_dataplane,
    ) -> None:
        self._start_dataplane = starter
        self._probe_dataplane = probe
        self._stop_dataplane = stopper
        self._clock = clock
        self.dataplane_pid: int | None = None
        """The data plane found or started last (None: not asked, or failed)."""
        self.dataplane_restarts = 0
        """How many times the supervisor started a data plane after the first one died."""
        self.dataplane_checks = 0
        self._checked = asyncio.Condition()
        self._supervisor: asyncio.Task[None] | None = None

    async def initialize(
        self, client_builder: ControllerClientBuilder | None, stop: asyncio.Event
    ) -> None:
        """Start the data plane unless one heartbeats or ``start-dataplane = false``, then
        supervise it until ``stop`` is set.

        A data plane that cannot start is logged, not fatal: the load balancers are still
        recorded, the supervisor tries again at its next check, and a data plane started
        separately serves them too.
        """
        older = 0 < self.store.migrated_from < BACKEND_SETS_SCHEMA
        if not self.config.global_.start_dataplane:
            log.info("start-dataplane = false: not starting the data plane")
            if older:
                log.warning(
                    "%s was migrated from schema version %d: restart the data plane that "
                    "serves it (one started before reads the old rows)",
                    self.store.path,
                    self.store.migrated_from,
                )
            return
        if older:
            await self._replace_older_dataplane()
        pid = await self._start()
        if pid is not None:
            log.info("data plane pid %d serves %s", pid, self.store.path)
        self._supervisor = asyncio.get_running_loop().create_task(
            self._supervise(stop), name="kccm-local-dataplane-supervisor"
        )

    async def _replace_older_dataplane(self) -> None:
        """The file was just migrated from a schema before :data:`BACKEND_SETS_SCHEMA`: a data
        plane running now was started by an older kccm, reads the old rows and would serve
        nothing; stop it, so that a current one is started (a brief gap in traffic)."""
        now = self._clock.now().timestamp()
        pid = await asyncio.to_thread(self._probe_dataplane, self.store.path, now)
        if pid is None:
            return
        log.warning(
            "%s was migrated from schema version %d: stopping data plane pid %d, which reads "
            "the old schema, to start a current one",
            self.store.path,
            self.store.migrated_from,
            pid,
        )
        await asyncio.to_thread(self._stop_dataplane, self.store.path, pid)

    async def _start(self) -> int | None:
        try:
            self.dataplane_pid = await asyncio.to_thread(self._start_dataplane, self.store.path)
        except (OSError, RuntimeError) as err:
            log.error("the data plane for %s did not start: %s", self.store.path, err)
            self.dataplane_pid = None
        return self.dataplane_pid

    async def _supervise(self, stop: asyncio.Event) -> None:
        interval = self.config.global_.dataplane_check_interval
        while not stop.is_set():
            await self._clock.sleep(interval)
            if stop.is_set():
                return
            await self.check_dataplane()

    async def check_dataplane(self) -> bool:
        """One supervisor check: when no data plane heartbeats (its process died, or its
        heartbeat is older than the staleness limit on the clock), start one. Returns whether
        a data plane was started."""
        now = self._clock.now().timestamp()
        pid = await asyncio.to_thread(self._probe_dataplane, self.store.path, now)
        started = False
        if pid is None:
            log.warning(
                "the data plane for %s is not running (last pid %s): starting a new one",
                self.store.path,
                self.dataplane_pid,
            )
            started = await self._start() is not None
            if started:
                self.dataplane_restarts += 1
                log.info(
                    "data plane restarted: pid %s serves %s", self.dataplane_pid, self.store.path
                )
        else:
            self.dataplane_pid = pid
        async with self._checked:
            self.dataplane_checks += 1
            self._checked.notify_all()
        return started

    async def wait_dataplane_checks(self, count: int) -> None:
        """Wait until the supervisor has made ``count`` checks (for tests)."""
        async with self._checked:
            await self._checked.wait_for(lambda: self.dataplane_checks >= count)
