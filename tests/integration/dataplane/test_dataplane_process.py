"""The local data plane as its detached process (``ensure_dataplane_running``): it survives its
parent, stops on SIGTERM, and keeps traffic flowing while a state-file writer is SIGKILLed;
no API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dataplane_world import (
    NODES,
    World,
    ask_tcp,
    refused,
    udp_client,
)

from kccm.providers.local.dataplane.supervise import ensure_dataplane_running, live_dataplane
from kccm.testing.controllers import eventually

# --- the process ------------------------------------------------------------------------

PARENT = """
import sys, time
from kccm.providers.local.dataplane.supervise import ensure_dataplane_running
pid = ensure_dataplane_running(sys.argv[1], extra_args=sys.argv[2:])
print(pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def spawned(world: World) -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _heartbeat_after(state_file: Path, since: float) -> bool:
    beat = live_dataplane(state_file)
    return beat is not None and beat.heartbeat_at > since


async def _answer(world: World) -> str | None:
    """The backend answering on the VIP, or None while nothing listens there yet."""
    with contextlib.suppress(ConnectionError, TimeoutError):
        return await ask_tcp(world.vip, world.tcp_port)
    return None


async def _await(check: Any) -> None:
    """Poll another process's state (no event to await across processes)."""

    async def probe() -> bool:
        return bool(check())

    await eventually(probe, 30)


async def test_dataplane_process_survives_its_parent_and_stops_on_sigterm(
    world: World, spawned: list[int]
) -> None:
    world.put_lb(udp=False)
    parent = await asyncio.create_subprocess_exec(
        *[sys.executable, "-c", PARENT, str(world.state_file), "--poll-interval", "0.1"],
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    pid = int(await asyncio.wait_for(parent.stdout.readline(), 60))
    spawned.append(pid)
    assert ensure_dataplane_running(world.state_file) == pid
    parent.kill()
    await parent.wait()
    killed_at = time.time()
    await _await(lambda: _heartbeat_after(world.state_file, killed_at + 0.5))
    assert await eventually(lambda: _answer(world), 30) in NODES  # its listener may lag a beat
    os.kill(pid, signal.SIGTERM)
    await _await(lambda: live_dataplane(world.state_file) is None)
    assert world.store.dataplane_heartbeat() is None
    assert await refused(world.vip, world.tcp_port)
    log = (world.state_file.parent / "dataplane.log").read_text()
    assert "signal received" in log
    assert json.dumps(pid) in log


WRITER = """
import sys, time
from kccm.providers.local.store import LoadBalancerRecord, LocalStore
state, vip, *addresses = sys.argv[1:]
store = LocalStore(state)
i = 0
while True:
    backends = [{"node": f"n{k}", "address": a} for k, a in enumerate(addresses[: 1 + i % 3])]
    store.ensure_load_balancer(
        LoadBalancerRecord(
            name="lb-other", service="default/lb-other", service_uid="u", vip=vip,
            ports=({"name": "t", "protocol": "TCP", "port": 8081, "node_port": 30001},),
            backends=tuple(backends), health={"mode": "tcp"},
        ),
        candidates=lambda: [vip], requested_ip=vip, in_pool=lambda ip: True, retain=False,
    )
    if i == 0:
        print("wrote", flush=True)
    i += 1
    time.sleep(0.005)
"""
KILLS = 3


@dataclass
class Traffic:
    """Requests answered so far, and a condition to wait for a count."""

    answered: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def add(self, ok: bool) -> bool:
        async with self.changed:
            self.answered += ok
            self.changed.notify_all()
        return ok

    async def reach(self, count: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.answered >= count)


async def test_traffic_flows_while_a_writer_is_sigkilled_and_restarted(
    world: World, spawned: list[int]
) -> None:
    """Issue 7's acceptance against the data plane process: at least 1000 TCP connections and
    1000 UDP datagrams through one VIP with zero failures while the process writing the state
    file (standing in for the controller manager) is SIGKILLed and restarted over and over.

    Driven by events, not wall time: each writer is killed only after it has written (it
    prints a line) and after more traffic has been answered since the previous kill; the load
    runs until the writer has been killed ``KILLS`` times, however slow the machine is."""
    world.put_lb()
    pid = await asyncio.to_thread(
        ensure_dataplane_running, world.state_file, extra_args=["--poll-interval", "0.1"]
    )
    spawned.append(pid)

    async def serving() -> bool:  # another process: polled
        return not await refused(world.vip, world.tcp_port)

    await eventually(serving, 30)
    other_vip = world.vip.rsplit(".", 1)[0] + ".102"
    addresses = [n.address for n in world.nodes.values()]
    writer_args = [sys.executable, "-c", WRITER, str(world.state_file), other_vip, *addresses]
    traffic = Traffic()
    killed = asyncio.Event()
    kills = 0

    async def killer() -> None:
        nonlocal kills
        while kills < KILLS:
            proc = await asyncio.create_subprocess_exec(*writer_args, stdout=subprocess.PIPE)
            assert proc.stdout is not None
            assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"wrote\n"
            await traffic.reach(traffic.answered + 100)  # traffic flowed with this writer
            proc.kill()
            await proc.wait()
            kills += 1
        killed.set()

    async def tcp_load() -> int:
        sent = 0
        while sent < 50 or not killed.is_set():
            sent += 1
            await traffic.add(await ask_tcp(world.vip, world.tcp_port) in NODES)
        return sent

    async def udp_load(worker: int) -> int:
        sent = 0
        async with udp_client(world.vip, world.udp_port) as ask:
            while sent < 100 or not killed.is_set():
                sent += 1
                await traffic.add(await ask(f"{worker}-{sent}".encode()) in NODES)
        return sent

    async with asyncio.timeout(300):
        killing = asyncio.create_task(killer())
        sent = await asyncio.gather(
            *(tcp_load() for _ in range(20)), *(udp_load(w) for w in range(10))
        )
        await killing
    tcp, udp = sum(sent[:20]), sum(sent[20:])
    assert tcp >= 1000
    assert udp >= 1000
    assert traffic.answered == tcp + udp  # zero failures
    assert kills == KILLS
    assert live_dataplane(world.state_file) is not None


async def test_sigterm_while_waiting_for_the_state_file_exits_0(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "kccm.providers.local.dataplane_main"],
        *["--state-file", str(tmp_path / "not-yet.db")],
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), 60)
    assert b"waiting for the state file" in line
    proc.terminate()
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert not (tmp_path / "not-yet.db").exists()
