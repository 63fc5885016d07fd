"""The local provider starts the data plane at initialize() unless told not to or one runs."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane import live_dataplane
from kccm.providers.local.store import LocalStore


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


def test_false_does_not_start(store: LocalStore) -> None:
    starter = Starter()
    made = cloud(store, "[Global]\nstart-dataplane = false\n", starter)
    made.initialize(None, asyncio.Event())
    assert starter.calls == []
    assert made.dataplane_pid is None


def test_true_starts_once_with_the_state_file(store: LocalStore) -> None:
    starter = Starter()
    made = cloud(store, "[Global]\nstart-dataplane = true\n", starter)
    made.initialize(None, asyncio.Event())
    assert starter.calls == [store.path]
    assert made.dataplane_pid == starter.pid


def test_a_failed_start_is_logged_not_fatal(
    store: LocalStore, caplog: pytest.LogCaptureFixture
) -> None:
    starter = Starter(error=RuntimeError("the data plane did not start"))
    made = cloud(store, "", starter)
    with caplog.at_level(logging.ERROR, logger="kccm.providers.local"):
        made.initialize(None, asyncio.Event())
    assert made.dataplane_pid is None
    assert "did not start" in caplog.text


def _stop(pid: int, state_file: Path) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while live_dataplane(state_file) is not None and time.monotonic() < deadline:
        time.sleep(0.05)


def test_real_start_then_live_heartbeat_is_reused(store: LocalStore) -> None:
    """The real starter: the first initialize() starts a data plane; a second provider sees
    its heartbeat and does not start another."""
    first = cloud(store, "")
    first.initialize(None, asyncio.Event())
    pid = first.dataplane_pid
    assert pid is not None
    try:
        beat = live_dataplane(store.path)
        assert beat is not None
        assert beat.pid == pid
        second = cloud(store, "")
        second.initialize(None, asyncio.Event())
        assert second.dataplane_pid == pid
    finally:
        _stop(pid, store.path)
    assert live_dataplane(store.path) is None
