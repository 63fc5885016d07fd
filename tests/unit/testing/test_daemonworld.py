"""kccm.testing.daemonworld's steady-state rules, on a stand-in emulator (its admin answers a
scripted series of states) and a child Python standing in for the daemon."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kccm.emulators import leaked
from kccm.testing import daemonworld
from kccm.testing.controllers import eventually
from kccm.testing.daemon import Daemon, DaemonExited
from kccm.testing.daemonworld import EmulatorWorld

QUIET = {"balancers": [], "pending": []}
PENDING = {"balancers": [], "pending": ["op-1"]}
LEFT = {"balancers": ["lb-1"], "pending": []}


@dataclass
class ScriptedAdmin:
    """Answers ``states`` in turn, then the last one for ever."""

    states: list[dict[str, list[str]]]
    cleared: int = 0
    seen: list[dict[str, list[str]]] = field(default_factory=list)

    def state(self) -> dict[str, list[str]]:
        found = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        self.seen.append(found)
        return found

    def clear_faults(self) -> None:
        self.cleared += 1

    def assert_clean(self, baseline: Mapping[str, list[str]]) -> None:
        left = leaked(self.state(), baseline)
        if left:
            raise AssertionError(f"left with: {left}")


@dataclass
class StandIn:
    admin: ScriptedAdmin


class PendingAware(EmulatorWorld[Any]):
    def quiet(self, state: Mapping[str, list[Any]]) -> bool:
        return not state["pending"]


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    log = tmp_path / "kccm.log"
    log.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], text=True)
    yield Daemon(proc, 0, log)
    proc.kill()
    proc.wait()


def world(daemon: Daemon, *states: dict[str, list[str]], cls: type = PendingAware) -> Any:
    return cls(StandIn(ScriptedAdmin(list(states))), daemon, baseline={})


async def test_quiet_state_waits_until_nothing_is_pending(daemon: Daemon) -> None:
    w = world(daemon, PENDING, PENDING, QUIET)
    assert await w.quiet_state() == QUIET
    assert w.admin.seen == [PENDING, PENDING, QUIET]


async def test_a_world_without_pending_work_takes_the_first_state(daemon: Daemon) -> None:
    w = world(daemon, PENDING, QUIET, cls=EmulatorWorld)
    assert await w.quiet_state() == PENDING


async def test_back_to_steady_clears_faults_then_waits(daemon: Daemon) -> None:
    w = world(daemon, LEFT, LEFT, QUIET)
    w.steady = QUIET
    await w.back_to_steady()
    assert (w.admin.cleared, w.admin.seen[-1]) == (1, QUIET)


async def test_back_to_steady_names_what_is_left(
    daemon: Daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        daemonworld, "patient", functools.partial(eventually, within=0.5, interval=0.05)
    )
    w = world(daemon, LEFT)
    w.steady = QUIET
    with pytest.raises(AssertionError, match=r"left behind: \{'balancers': \['lb-1'\]\}"):
        await w.back_to_steady()


async def test_until_fails_at_once_when_the_daemon_exited(daemon: Daemon) -> None:
    daemon.proc.kill()
    daemon.proc.wait()
    w = world(daemon, QUIET)

    async def never() -> None:
        return None

    with pytest.raises(DaemonExited, match="kccm exited"):
        await w.until(never)


EXITS_WITH = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit({}))\n"
    "print('up', flush=True)\n"
    "time.sleep(60)\n"
)


def daemon_exiting_with(code: int, log: Path) -> Daemon:
    """A stand-in daemon that runs until SIGTERM, then exits with ``code``."""
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", EXITS_WITH.format(code)], stdout=sink, text=True
        )
    return Daemon(proc, 0, log)


@dataclass
class Ends:
    """What a module's end did, in order (its daemons: ``daemon``)."""

    daemon: Daemon
    done: list[str] = field(default_factory=list)

    def stop_all(self, grace: float) -> None:
        self.daemon.stop(grace)
        self.done.append(f"stop {grace:g}")

    async def close(self) -> None:
        self.done.append("close")

    async def remove_base(self) -> None:
        self.done.append("remove base")

    async def routes_gone(self) -> bool:
        self.done.append("routes gone")
        return True


ENDINGS = {
    "clean": (0, QUIET, None),
    "daemon-failed": (3, QUIET, "did not finish its in-flight work within 30 s \\(3\\)"),
    "emulator-left": (0, LEFT, "left with: \\{'balancers': \\['lb-1'\\]\\}"),
}


@pytest.mark.parametrize(("code", "state", "error"), ENDINGS.values(), ids=list(ENDINGS))
async def test_module_world_ends_in_order_and_judges(
    tmp_path: Path, code: int, state: dict[str, list[str]], error: str | None
) -> None:
    daemon = daemon_exiting_with(code, tmp_path / "log")
    await eventually(lambda: daemon.logged("up"))  # its SIGTERM handler is set
    w = EmulatorWorld(StandIn(ScriptedAdmin([state])), daemon, QUIET)
    ends = Ends(daemon)
    block = daemonworld.module_world(
        w,
        ends,  # type: ignore[arg-type]
        ends,  # type: ignore[arg-type]
        nodes=[],
        routes_gone=ends.routes_gone,
        remove_base=ends.remove_base,
        label="stand-in",
    )
    if error is None:
        async with block:
            pass
    else:
        with pytest.raises(AssertionError, match=error):
            async with block:
                pass
    assert ends.done == ["routes gone", "stop 30", "remove base", "close"]
