"""What run_manager sets for the daemon's whole process before its loop starts."""

from __future__ import annotations

import sys
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from kccm.app import manager as manager_module
from kccm.app.config import ManagerConfig
from kccm.util.loop import SWITCH_INTERVAL


@pytest.fixture
def switch_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("switch_interval")
def test_the_daemon_hands_the_gil_over_every_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython's 5 ms made the serving thread's answers wait behind the provider's threads
    (kccm.util.loop); the daemon offers the GIL every millisecond."""
    seen: list[float] = []

    def fake_run_loop(main: Coroutine[Any, Any, int]) -> int:
        main.close()
        seen.append(sys.getswitchinterval())
        return 0

    monkeypatch.setattr(manager_module, "run_loop", fake_run_loop)
    sys.setswitchinterval(0.005)
    assert manager_module.run_manager(ManagerConfig(cloud_provider="fake")) == 0
    assert seen == [pytest.approx(SWITCH_INTERVAL)]
    assert SWITCH_INTERVAL == 0.001
