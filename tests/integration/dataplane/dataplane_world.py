"""The loopback world of the data plane tests: real TCP/UDP backends and health servers per node,
the local store's state file, and the client helpers (TCP asks, UDP clients, refusals).

Every address is inside 127.0.0.0/8; each test draws its own 127.x.y.0/24 so tests never collide.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kccm.kube.resources import NODES as NODE_RESOURCE
from kccm.providers.local.dataplane.health import HealthSettings
from kccm.providers.local.dataplane.server import DataPlane, DataplaneSettings
from kccm.providers.local.store import LoadBalancerRecord, LocalStore
from kccm.testing.controllers import eventually
from kccm.testing.ports import loopback_net

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


def subnet() -> str:
    return loopback_net()


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


async def register_ready_node(kube: Any, cleanup: Any, node: Node) -> None:
    """``node`` as a Ready Node of the apiserver (its InternalIP, a ``local://`` providerID),
    removed by ``cleanup`` after the test."""
    cleanup.add(NODE_RESOURCE, node.name)
    await kube.create(
        NODE_RESOURCE,
        {
            "metadata": {"name": node.name},
            "spec": {"providerID": f"local://{node.name}"},
            "status": {"addresses": [{"type": "InternalIP", "address": node.address}]},
        },
    )
    ready = {"type": "Ready", "status": "True", "reason": "Kubelet"}
    await kube.patch(
        NODE_RESOURCE, node.name, {"status": {"conditions": [ready]}}, subresource="status"
    )


async def answered(vip: str, port: int) -> str:
    """The first line a TCP connection to ``vip:port`` answers, once one does."""

    async def answer() -> str | None:
        try:
            return await ask_tcp(vip, port)
        except (ConnectionError, TimeoutError):
            return None

    return await eventually(answer)
