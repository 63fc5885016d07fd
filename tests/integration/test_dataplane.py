"""The local data plane end to end on loopback: real TCP/UDP backends, a real state file.

No API server: the state file is written with the local provider's own store
(:class:`kccm.providers.local.store.LocalStore`), the data plane runs in this event loop
(``DataPlane``) or as its detached process (``ensure_dataplane_running``). Every address is
inside 127.0.0.0/8; each test draws its own 127.x.y.0/24 so tests never collide.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from kccm.providers.local.dataplane.health import HealthSettings
from kccm.providers.local.dataplane.server import DataPlane, DataplaneBusyError, DataplaneSettings
from kccm.providers.local.dataplane.supervise import ensure_dataplane_running, live_dataplane
from kccm.providers.local.store import LoadBalancerRecord, LocalStore
from kccm.testing.controllers import eventually

FAST = DataplaneSettings(
    poll_interval=0.05,
    heartbeat_interval=0.2,
    udp_idle_timeout=5.0,
    # a down backend refuses at once; the probe timeout only has to outlast a loaded machine
    health=HealthSettings(interval=0.1, timeout=3.0, fall=2, rise=1),
)
NODES = ("n1", "n2", "n3")
WAIT = 30.0
"""Bound on waits for the data plane to reconcile or probe (generous for a loaded machine)."""


def free_port(host: str, kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def subnet() -> str:
    return f"127.{random.randint(1, 250)}.{random.randint(1, 250)}"


@dataclass
class Node:
    name: str
    address: str
    servers: list[Any] = field(default_factory=list)
    health: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    """Accepted connections still open (closed at the end: none left for the GC to warn of)."""

    @contextlib.asynccontextmanager
    async def serving(self, writer: asyncio.StreamWriter) -> AsyncIterator[None]:
        """One accepted connection: closed however its handler ends (a probe cut short by the
        data plane, a proxied stream aborted, the test's end)."""
        self.writers.add(writer)
        try:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                yield
        finally:
            self.writers.discard(writer)
            writer.close()

    async def close_connections(self) -> None:
        for writer in list(self.writers):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _tcp_backend(node: Node, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with node.serving(writer):
            writer.write(node.name.encode() + b"\n")
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    return await asyncio.start_server(handle, node.address, port, reuse_address=True)


class _UdpBackend(asyncio.DatagramProtocol):
    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # 3.11's selector datagram transport does not subclass DatagramTransport
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        assert self.transport is not None
        self.transport.sendto(self.name + b":" + data, addr)


async def _health_server(node: Node, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with node.serving(writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()

    return await asyncio.start_server(handle, node.address, port, reuse_address=True)


@dataclass
class World:
    """Three nodes with TCP/UDP/health servers, a state file, and the VIP to use."""

    store: LocalStore
    state_file: Path
    nodes: dict[str, Node]
    vip: str
    node_port: int
    health_port: int
    tcp_port: int = 80
    udp_port: int = 53

    def put_lb(
        self,
        name: str = "lb-a",
        *,
        nodes: tuple[str, ...] = NODES,
        vip: str | None = None,
        ranges: tuple[str, ...] = ("0.0.0.0/0",),
        affinity: str = "None",
        health: dict[str, Any] | None = None,
        udp: bool = True,
    ) -> LoadBalancerRecord:
        ports: list[dict[str, Any]] = [
            {"name": "t", "protocol": "TCP", "port": self.tcp_port, "node_port": self.node_port}
        ]
        if udp:
            ports.append(
                {"name": "u", "protocol": "UDP", "port": self.udp_port, "node_port": self.node_port}
            )
        address = vip or self.vip
        record = LoadBalancerRecord(
            name=name,
            service=f"default/{name}",
            service_uid=f"uid-{name}",
            vip=address,
            ports=tuple(ports),
            backends=tuple({"node": n, "address": self.nodes[n].address} for n in nodes),
            health=health or {"mode": "node-port", "port": self.health_port, "path": "/healthz"},
            source_ranges=ranges,
            session_affinity=affinity,
        )
        return self.store.ensure_load_balancer(
            record,
            candidates=lambda: [address],
            requested_ip=address,
            in_pool=lambda ip: True,
            retain=False,
        )

    async def health_down(self, name: str) -> None:
        server = self.nodes[name].health
        assert server is not None
        server.close()
        await server.wait_closed()
        self.nodes[name].health = None

    async def health_up(self, name: str) -> None:
        node = self.nodes[name]
        node.health = await _health_server(node, self.health_port)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    net = subnet()
    nodes = {n: Node(n, f"{net}.{i + 1}") for i, n in enumerate(NODES)}
    vip = f"{net}.100"
    node_port = free_port(f"{net}.1")
    health_port = free_port(f"{net}.1")
    loop = asyncio.get_running_loop()
    for node in nodes.values():
        node.servers.append(await _tcp_backend(node, node_port))
        transport, _ = await loop.create_datagram_endpoint(
            lambda node=node: _UdpBackend(node.name),  # type: ignore[misc]
            local_addr=(node.address, node_port),
        )
        node.servers.append(transport)
        node.health = await _health_server(node, health_port)
    state_file = tmp_path / "state.db"
    store = LocalStore(state_file)
    w = World(store, state_file, nodes, vip, node_port, health_port)
    w.tcp_port, w.udp_port = free_port(vip), free_port(vip, socket.SOCK_DGRAM)
    yield w
    store.close()
    for node in nodes.values():
        for server in node.servers:
            server.close()
        if node.health is not None:
            node.health.close()
        await node.close_connections()


@pytest.fixture
async def plane(world: World) -> AsyncIterator[DataPlane]:
    dp = DataPlane(world.state_file, FAST)
    await dp.start()
    yield dp
    await dp.close()


async def until_listening(plane: DataPlane, count: int) -> None:
    await asyncio.wait_for(plane.wait_reconciled(lambda: len(plane.listeners) == count), WAIT)


async def all_checked(plane: DataPlane, lb: str, nodes: tuple[str, ...] = NODES) -> None:
    def done() -> bool:
        states = [plane.health.state(lb, n) for n in nodes]
        return all(s is not None and s.healthy is not None for s in states)

    await asyncio.wait_for(plane.health.wait_for(done), WAIT)


async def ask_tcp(vip: str, port: int, source: str | None = None) -> str:
    local = (source, 0) if source else None
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(vip, port, local_addr=local), 10
    )
    try:
        line = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    if not line:
        raise ConnectionResetError("closed without a byte")
    return line.decode().strip()


class _UdpClient(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.replies.put_nowait(data)


@contextlib.asynccontextmanager
async def udp_client(vip: str, port: int, source: str = "127.0.0.1") -> AsyncIterator[Any]:
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_datagram_endpoint(
        _UdpClient, local_addr=(source, 0), remote_addr=(vip, port)
    )

    async def ask(payload: bytes, wait: float = 5.0) -> str:
        transport.sendto(payload)
        reply = await asyncio.wait_for(proto.replies.get(), wait)
        name, _, echoed = reply.partition(b":")
        assert echoed == payload
        return name.decode()

    try:
        yield ask
    finally:
        transport.close()


async def refused(vip: str, port: int, source: str | None = None) -> bool:
    try:
        await ask_tcp(vip, port, source)
    except (ConnectionError, TimeoutError):
        return True
    return False


# --- in-process data plane -------------------------------------------------------------


async def test_tcp_and_udp_spread_across_backends(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    seen = Counter([await ask_tcp(world.vip, world.tcp_port) for _ in range(30)])
    assert set(seen) == set(NODES), seen
    udp_seen: Counter[str] = Counter()
    for _ in range(30):
        async with udp_client(world.vip, world.udp_port) as ask:
            udp_seen[await ask(b"ping")] += 1
    assert set(udp_seen) == set(NODES), udp_seen


async def test_unhealthy_backend_is_taken_out_and_recorded(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    await all_checked(plane, "lb-a")
    await world.health_down("n3")
    await asyncio.wait_for(
        plane.health.wait_for(lambda: not plane.health.usable("lb-a", "n3")), WAIT
    )
    seen = {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)}
    assert seen == {"n1", "n2"}
    await plane.flush()
    rows = {(h.node, h.healthy) for h in world.store.list_backend_health()}
    assert rows == {("n1", True), ("n2", True), ("n3", False)}
    await world.health_up("n3")
    await asyncio.wait_for(plane.health.wait_for(lambda: plane.health.usable("lb-a", "n3")), WAIT)
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)} == set(NODES)


async def test_no_healthy_backend_refuses_tcp_and_drops_udp(world: World, plane: DataPlane) -> None:
    world.put_lb()
    await until_listening(plane, 2)
    for name in NODES:
        await world.health_down(name)

    def none_usable() -> bool:
        return not any(plane.health.usable("lb-a", n) for n in NODES)

    await asyncio.wait_for(plane.health.wait_for(none_usable), WAIT)
    assert await refused(world.vip, world.tcp_port)
    async with udp_client(world.vip, world.udp_port) as ask:
        with pytest.raises(TimeoutError):
            await ask(b"dropped", wait=0.3)


@pytest.mark.parametrize(
    ("ranges", "source", "allowed"),
    [
        pytest.param(("127.0.0.2/32",), "127.0.0.2", True, id="inside"),
        pytest.param(("127.0.0.2/32",), "127.0.0.3", False, id="outside"),
        pytest.param(("10.0.0.0/8", "127.0.0.0/30"), "127.0.0.3", True, id="second-range"),
    ],
)
async def test_source_ranges_enforced(
    world: World, plane: DataPlane, ranges: tuple[str, ...], source: str, allowed: bool
) -> None:
    world.put_lb(ranges=ranges)
    await until_listening(plane, 2)
    assert await refused(world.vip, world.tcp_port, source) is not allowed
    async with udp_client(world.vip, world.udp_port, source) as ask:
        if allowed:
            assert await ask(b"hi") in NODES
        else:
            with pytest.raises(TimeoutError):
                await ask(b"hi", wait=0.3)


async def test_client_ip_affinity_is_sticky(world: World, plane: DataPlane) -> None:
    world.put_lb(affinity="ClientIP")
    await until_listening(plane, 2)
    by_source = {}
    for i in range(2, 40):
        source = f"127.0.0.{i}"
        picks = {await ask_tcp(world.vip, world.tcp_port, source) for _ in range(3)}
        assert len(picks) == 1, (source, picks)
        by_source[source] = picks.pop()
    assert len(set(by_source.values())) > 1
    async with udp_client(world.vip, world.udp_port, "127.0.0.7") as ask:
        assert await ask(b"x") == by_source["127.0.0.7"]


async def test_backend_change_keeps_a_long_lived_stream(world: World, plane: DataPlane) -> None:
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    reader, writer = await asyncio.open_connection(world.vip, world.tcp_port)
    owner = (await reader.readline()).decode().strip()
    others = tuple(n for n in NODES if n != owner)
    listener = plane.listeners[next(iter(plane.listeners))]
    world.put_lb(nodes=others, udp=False)
    await asyncio.wait_for(
        plane.wait_reconciled(lambda: len(listener.spec.backends) == len(others)), WAIT
    )
    assert plane.listeners[listener.spec.key] is listener
    for i in range(20):
        payload = f"chunk {i}\n".encode()
        writer.write(payload)
        assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(12)} == set(others)
    writer.close()


async def test_deleted_load_balancer_closes_its_listener(world: World, plane: DataPlane) -> None:
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    assert await ask_tcp(world.vip, world.tcp_port) in NODES
    world.store.delete_load_balancer("lb-a", "default/lb-a", keep_claim=False)
    await until_listening(plane, 0)
    assert await refused(world.vip, world.tcp_port)


async def test_thousand_connections_and_datagrams_while_state_changes(
    world: World, plane: DataPlane
) -> None:
    """Issue 7's acceptance on the data plane: zero failures while other LBs change."""
    world.put_lb()
    other_vip = world.vip.rsplit(".", 1)[0] + ".101"
    await until_listening(plane, 2)
    stop = asyncio.Event()

    async def writer() -> int:
        changes = 0
        while not stop.is_set():
            subset = NODES[: 1 + changes % 3]
            await asyncio.to_thread(world.put_lb, "lb-other", nodes=subset, vip=other_vip)
            changes += 1
            await asyncio.sleep(0.02)
        return changes

    async def tcp_load(worker: int) -> int:
        ok = 0
        for _ in range(50):
            ok += await ask_tcp(world.vip, world.tcp_port) in NODES
        return ok

    async def udp_load(worker: int) -> int:
        ok = 0
        async with udp_client(world.vip, world.udp_port) as ask:
            for i in range(100):
                ok += await ask(f"{worker}-{i}".encode()) in NODES
        return ok

    changes = asyncio.create_task(writer())
    tcp = await asyncio.gather(*(tcp_load(w) for w in range(20)))
    udp = await asyncio.gather(*(udp_load(w) for w in range(10)))
    stop.set()
    assert sum(tcp) == 1000
    assert sum(udp) == 1000
    assert await changes > 5


async def test_refusing_backend_is_skipped(world: World, plane: DataPlane) -> None:
    """Health still says yes, the nodePort says no: the next backend takes the connection."""
    world.put_lb(udp=False)
    await until_listening(plane, 1)
    await all_checked(plane, "lb-a")
    tcp_backend = world.nodes["n3"].servers[0]
    tcp_backend.close()
    await tcp_backend.wait_closed()
    assert plane.health.usable("lb-a", "n3")
    assert {await ask_tcp(world.vip, world.tcp_port) for _ in range(30)} == {"n1", "n2"}


async def test_second_data_plane_is_refused(world: World, plane: DataPlane) -> None:
    other = DataPlane(world.state_file, FAST, pid=plane.pid + 1)
    with pytest.raises(DataplaneBusyError, match=f"pid {plane.pid}"):
        await other.start()


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
