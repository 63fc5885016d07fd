"""The local provider starts the data plane at initialize() unless told not to or one runs,
then supervises it: a data plane that died (or stopped heartbeating, on the clock) is started
again."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.store import pid_alive
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.provider import probe_dataplane
from kccm.providers.local.store import LocalStore
from kccm.util.clock import FakeClock


class Starter:
    """An injected starter that records its calls and answers a fixed pid."""

    def __init__(self, pid: int = 4242, error: Exception | None = None) -> None:
        self.calls: list[Path] = []
        self.pid = pid
        self.error = error

    def __call__(self, state_file: Path) -> int:
        self.calls.append(state_file)
        if self.error is not None:
            raise self.error
        return self.pid


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    opened = LocalStore(tmp_path / "state.db")
    yield opened
    opened.close()


def cloud(store: LocalStore, text: str, starter: Starter | None = None) -> LocalCloud:
    config = load_local_config(io.StringIO(text))
    if starter is None:
        return LocalCloud(store, config)
    return LocalCloud(store, config, dataplane_starter=starter)


def test_start_dataplane_defaults_to_true() -> None:
    assert load_local_config(None).global_.start_dataplane is True
    text = "[Global]\nstart-dataplane = false\n"
    assert load_local_config(io.StringIO(text)).global_.start_dataplane is False


async def test_false_does_not_start(store: LocalStore) -> None:
    starter = Starter()
    made = cloud(store, "[Global]\nstart-dataplane = false\n", starter)
    await made.initialize(None, asyncio.Event())
    assert starter.calls == []
    assert made.dataplane_pid is None


async def test_true_starts_once_with_the_state_file(store: LocalStore) -> None:
    starter = Starter()
    made = cloud(store, "[Global]\nstart-dataplane = true\n", starter)
    await made.initialize(None, asyncio.Event())
    assert starter.calls == [store.path]
    assert made.dataplane_pid == starter.pid


async def test_a_failed_start_is_logged_not_fatal(
    store: LocalStore, caplog: pytest.LogCaptureFixture
) -> None:
    starter = Starter(error=RuntimeError("the data plane did not start"))
    made = cloud(store, "", starter)
    with caplog.at_level(logging.ERROR, logger="kccm.providers.local"):
        await made.initialize(None, asyncio.Event())
    assert made.dataplane_pid is None
    assert "did not start" in caplog.text


def _stop(pid: int, state_file: Path) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while live_dataplane(state_file) is not None and time.monotonic() < deadline:
        time.sleep(0.05)


async def test_real_start_then_live_heartbeat_is_reused(store: LocalStore) -> None:
    """The real starter: the first initialize() starts a data plane; a second provider sees
    its heartbeat and does not start another."""
    first, stop = cloud(store, ""), asyncio.Event()
    await first.initialize(None, stop)
    pid = first.dataplane_pid
    assert pid is not None
    try:
        beat = live_dataplane(store.path)
        assert beat is not None
        assert beat.pid == pid
        second = cloud(store, "")
        await second.initialize(None, stop)
        assert second.dataplane_pid == pid
    finally:
        stop.set()  # no supervisor restarts the data plane stopped below
        _stop(pid, store.path)
    assert live_dataplane(store.path) is None


# -- supervision -----------------------------------------------------------------------------


class Probe:
    """An injected probe: answers ``pid`` (None: no live data plane) and records the times."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.asked_at: list[float] = []

    def __call__(self, state_file: Path, now: float) -> int | None:
        self.asked_at.append(now)
        return self.pid


def supervised(
    store: LocalStore, starter: Starter, probe: object, clock: FakeClock, text: str = ""
) -> LocalCloud:
    config = load_local_config(io.StringIO(text))
    return LocalCloud(
        store,
        config,
        dataplane_starter=starter,
        dataplane_probe=probe,
        clock=clock,  # type: ignore[arg-type]
    )


async def test_a_dead_dataplane_is_started_again_at_the_next_check(
    store: LocalStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock, starter, probe, stop = FakeClock(), Starter(pid=11), Probe(pid=11), asyncio.Event()
    made = supervised(store, starter, probe, clock, "[Global]\ndataplane-check-interval = 3\n")
    await made.initialize(None, stop)
    await clock.advance(3)
    await asyncio.wait_for(made.wait_dataplane_checks(1), 10)
    assert (len(starter.calls), made.dataplane_restarts) == (1, 0)  # alive: left alone
    probe.pid, starter.pid = None, 12  # the data plane dies
    with caplog.at_level(logging.WARNING, logger="kccm.providers.local"):
        await clock.advance(3)
        await asyncio.wait_for(made.wait_dataplane_checks(2), 10)
    assert (len(starter.calls), made.dataplane_restarts, made.dataplane_pid) == (2, 1, 12)
    assert "is not running (last pid 11): starting a new one" in caplog.text
    assert [round(t - probe.asked_at[0]) for t in probe.asked_at] == [0, 3]  # the clock's time
    stop.set()


async def test_a_failed_restart_is_tried_again_at_the_next_check(store: LocalStore) -> None:
    clock, stop = FakeClock(), asyncio.Event()
    starter, probe = Starter(error=RuntimeError("no")), Probe(pid=None)
    made = supervised(store, starter, probe, clock)
    await made.initialize(None, stop)
    for checks in (1, 2):
        await clock.advance(2)
        await asyncio.wait_for(made.wait_dataplane_checks(checks), 10)
    assert (len(starter.calls), made.dataplane_restarts, made.dataplane_pid) == (3, 0, None)
    stop.set()


def _beat(state_file: Path, pid: int, at: float) -> None:
    conn = sqlite3.connect(state_file)
    with conn:
        conn.execute(
            "INSERT OR REPLACE INTO dataplane (id, pid, heartbeat_at) VALUES (1, ?, ?)", (pid, at)
        )
    conn.close()


async def test_a_stale_heartbeat_is_dead_on_the_clock(store: LocalStore) -> None:
    """The real probe: a heartbeat from a live pid is fresh for 5 s of the clock's wall time,
    then the data plane counts as dead and is started again."""
    clock, starter, stop = FakeClock(), Starter(pid=os.getpid()), asyncio.Event()
    made = supervised(store, starter, probe_dataplane, clock)
    _beat(store.path, os.getpid(), clock.now().timestamp())
    await made.initialize(None, stop)
    for checks in (1, 2):  # at 2 s and 4 s the heartbeat is fresh
        await clock.advance(2)
        await asyncio.wait_for(made.wait_dataplane_checks(checks), 10)
    assert made.dataplane_restarts == 0
    await clock.advance(2)  # at 6 s it is stale
    await asyncio.wait_for(made.wait_dataplane_checks(3), 10)
    assert made.dataplane_restarts == 1
    stop.set()


async def test_stop_ends_the_supervision(store: LocalStore) -> None:
    clock, starter, probe, stop = FakeClock(), Starter(), Probe(pid=None), asyncio.Event()
    made = supervised(store, starter, probe, clock)
    await made.initialize(None, stop)
    stop.set()
    await clock.advance(10)
    assert probe.asked_at == []
    assert len(starter.calls) == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("0", "0.0 is not a number of seconds from 0.1 to 3600", id="zero"),
        pytest.param("-1", "-1.0 is not a number", id="negative"),
        pytest.param("nan", "nan is not a number", id="nan"),
        pytest.param("1e9", "1000000000.0 is not a number", id="huge"),
    ],
)
def test_check_interval_must_be_sensible(value: str, message: str) -> None:
    with pytest.raises(CloudConfigError, match=f"dataplane-check-interval: {message}"):
        load_local_config(io.StringIO(f"[Global]\ndataplane-check-interval = {value}\n"))


def _wait_dead(pid: int) -> None:
    """A signal is delivered asynchronously: wait (bounded) until the process is gone."""
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


async def test_a_sigkilled_dataplane_is_replaced(store: LocalStore) -> None:
    """The real starter and probe: SIGKILL the data plane, the next check starts another."""
    made, stop = cloud(store, ""), asyncio.Event()
    await made.initialize(None, stop)
    stop.set()
    first = made.dataplane_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    await asyncio.to_thread(_wait_dead, first)
    try:
        assert await made.check_dataplane() is True
        second = made.dataplane_pid
        assert second is not None
        assert second != first
        beat = live_dataplane(store.path)
        assert beat is not None
        assert beat.pid == second
    finally:
        if made.dataplane_pid not in (None, first):
            _stop(made.dataplane_pid, store.path)  # type: ignore[arg-type]


def test_a_data_plane_stopped_by_its_pid_is_reaped_when_the_starter_exits(tmp_path: Path) -> None:
    """A data plane stopped by its pid after the starter's last probe is still the starter's
    child: it is reaped at exit, so the interpreter does not warn "subprocess N is still
    running" (the warning the whole unit layer used to print once at its end)."""
    state = tmp_path / "state.db"
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from kccm.providers.local.dataplane.store import pid_alive
        from kccm.providers.local.dataplane.supervise import ensure_dataplane_running
        from kccm.providers.local.store import LocalStore
        LocalStore({str(state)!r}).close()
        pid = ensure_dataplane_running({str(state)!r})
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(pid), "the data plane did not stop on SIGTERM"
        """
    )
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "still running" not in done.stderr
