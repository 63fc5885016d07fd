"""The local provider's L4 data plane: a long-lived asyncio proxy driven by the state file.

Desired state is every row of ``load_balancers``. The data plane polls ``PRAGMA data_version``
every ``poll_interval`` (0.5 s) — one cheap pragma while nothing changes — and on a change
re-reads the rows, diffs the listeners by (vip, protocol, port) and applies only the
difference: unchanged listeners are not touched, a changed backend set or source range is
swapped in place (open connections keep flowing), removed listeners are closed, and a listener
that cannot bind is retried on the next poll.

Health: one probe per (load balancer, node) as cloud-provider-kind does (see
:mod:`.dataplane_health`). A backend is *unknown* until its first check completes and unknown
counts as healthy, so a restarted data plane or a new backend serves at once; the first result
then decides, and afterwards ``fall`` failures mark it unhealthy and ``rise`` successes healthy.
Every verdict change is one ``backend_health`` write.

Process: ``kccm local dataplane --state-file PATH`` (or ``python -m
kccm.providers.local.dataplane_main``). It claims the single ``dataplane`` row (refusing to
start while another live process heartbeats there), heartbeats every second, and on SIGTERM
or SIGINT closes its listeners, drops its row and exits 0. :func:`ensure_dataplane_running`
starts one detached (its own session, stdout/stderr to ``dataplane.log`` beside the state
file) unless a live one heartbeats, so restarting the controller manager never drops traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import logging
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kccm.providers.local.dataplane_health import HealthChecker, HealthSettings
from kccm.providers.local.dataplane_model import (
    HealthState,
    ListenerKey,
    ListenerSpec,
    LoadBalancerSpec,
    ProbeTarget,
    diff_listeners,
    listeners_of,
    probe_targets,
)
from kccm.providers.local.dataplane_proxy import Listener, start_listener
from kccm.providers.local.dataplane_store import (
    DataplaneStore,
    HealthRow,
    Heartbeat,
    pid_alive,
    read_heartbeat,
)
from kccm.providers.local.store import resolve_state_path

__all__ = [
    "DataPlane",
    "DataplaneBusyError",
    "DataplaneSettings",
    "default_state_file",
    "ensure_dataplane_running",
    "live_dataplane",
    "main",
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
def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds from 0.01 to 3600."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0.01 <= value <= 3600):
        raise argparse.ArgumentTypeError(f"{text} is not from 0.01 to 3600 seconds")
    return value


def _count(text: str) -> int:
    """An argparse type: a whole number from 1 to 100."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError(f"{text} is not from 1 to 100")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kccm local dataplane",
        description="Run the local provider's L4 data plane until SIGTERM.",
    )
    parser.add_argument("--state-file", type=Path, default=None, help="the local state file")
    parser.add_argument("--poll-interval", type=_seconds, default=0.5, help="seconds")
    parser.add_argument("--health-interval", type=_seconds, default=2.0, help="seconds")
    parser.add_argument("--health-timeout", type=_seconds, default=3.0, help="seconds")
    parser.add_argument("--unhealthy-threshold", type=_count, default=2)
    parser.add_argument("--healthy-threshold", type=_count, default=1)
    parser.add_argument("--udp-idle-timeout", type=_seconds, default=30.0, help="seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def _settings(ns: argparse.Namespace) -> DataplaneSettings:
    health = HealthSettings(
        interval=ns.health_interval,
        timeout=ns.health_timeout,
        fall=ns.unhealthy_threshold,
        rise=ns.healthy_threshold,
    )
    return DataplaneSettings(
        poll_interval=ns.poll_interval, udp_idle_timeout=ns.udp_idle_timeout, health=health
    )


async def _serve(state_file: Path, settings: DataplaneSettings) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    plane = DataPlane(state_file, settings)
    starting = loop.create_task(plane.start())
    stopping = loop.create_task(stop.wait())
    await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        log.info("signal received while waiting for the state file")
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await plane.close()
        return 0
    if isinstance(starting.exception(), DataplaneBusyError):
        stopping.cancel()
        log.error("%s", starting.exception())
        return 1
    try:
        starting.result()
        await stopping
        log.info("signal received, closing listeners")
    finally:
        await plane.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kccm local dataplane``: run in the foreground until SIGTERM; exit 0."""
    ns = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if ns.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    state_file = ns.state_file or default_state_file()
    return asyncio.run(_serve(state_file, _settings(ns)))


def live_dataplane(
    state_file: Path, stale_after: float = 5.0, *, now: float | None = None
) -> Heartbeat | None:
    """The data plane heartbeating in ``state_file``, if one is alive: its row is younger
    than ``stale_after`` seconds at ``now`` (epoch seconds; default the system time) and its
    pid is a live process (not a zombie)."""
    _reap()
    try:
        beat = read_heartbeat(state_file)
    except sqlite3.Error:
        return None
    at = time.time() if now is None else now
    if beat is None or at - beat.heartbeat_at > stale_after:
        return None
    return beat if pid_alive(beat.pid) else None


def ensure_dataplane_running(
    state_file: str | os.PathLike[str],
    *,
    timeout: float = 10.0,
    extra_args: Sequence[str] = (),
) -> int:
    """The pid of the live data plane for ``state_file``, starting a detached one if needed.

    The child runs in a new session with stdin closed and output appended to
    ``dataplane.log`` beside the state file, so it outlives its caller (a SIGKILLed controller
    manager leaves traffic flowing). Waits up to ``timeout`` seconds for a heartbeat; raises
    RuntimeError when none comes.
    """
    path = Path(state_file)
    beat = live_dataplane(path)
    if beat is not None:
        return beat.pid
    child = _spawn(path, extra_args)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        beat = live_dataplane(path)
        if beat is not None:
            return beat.pid
        if child.poll() is not None and child.returncode != 1:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the data plane did not start; see {path.with_name('dataplane.log')}")


_CHILDREN: list[subprocess.Popen[bytes]] = []
"""Data planes started here: kept so they are reaped (no zombie, no ResourceWarning)."""


def _reap() -> None:
    _CHILDREN[:] = [child for child in _CHILDREN if child.poll() is None]


def _spawn(path: Path, extra_args: Sequence[str]) -> subprocess.Popen[bytes]:
    _reap()
    command = [sys.executable, "-m", "kccm.providers.local.dataplane_main"]
    command += ["--state-file", str(path), *extra_args]
    log_path = path.with_name("dataplane.log")
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as out:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN.append(child)
    return child
