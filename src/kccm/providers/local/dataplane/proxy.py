"""TCP and UDP listeners of the local data plane (asyncio protocols, no streams).

A listener owns one socket on ``vip:port`` and a :class:`ListenerSpec` that can be swapped at
any time (:meth:`update`): connections already forwarded keep their backend and keep flowing;
only new connections (and UDP sessions whose backend left the healthy set) see the new spec.
A backend marked ``draining`` (kccm's drain) gets no new connection or UDP session, and keeps
the ones it has.

TCP: a client outside the source ranges, or arriving while no backend is healthy, is reset at
once (``SO_LINGER`` 0). Otherwise a backend is chosen — rendezvous hash of the client IP for
``sessionAffinity: ClientIP``, round-robin over the healthy set otherwise — and bytes are
relayed with flow control in both directions (reading pauses while the other side's write
buffer is above its high-water mark). A backend that refuses is skipped for the next one.

UDP: one session per client address, holding a connected socket to its backend; replies go back
from the VIP. Sessions expire after ``udp_idle_timeout`` seconds without traffic. Datagrams
from outside the source ranges, or while nothing is healthy, are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import struct
from collections.abc import Callable
from typing import Any, cast

from kccm.providers.local.dataplane.model import (
    Backend,
    ListenerSpec,
    SourceFilter,
    rendezvous_pick,
)

__all__ = ["HealthView", "Listener", "TcpListener", "UdpListener", "start_listener"]

log = logging.getLogger("kccm.dataplane")

HealthView = Callable[[str, str], bool]
"""``usable(load_balancer, node)``: whether a backend may receive new traffic."""

CONNECT_TIMEOUT = 3.0
_HIGH_WATER = 1 << 20


def _reset(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class Listener:
    """Shared by both protocols: the spec, its filter, backend choice."""

    protocol_name = ""

    def __init__(self, spec: ListenerSpec, usable: HealthView) -> None:
        self._usable = usable
        self._rr = itertools.count()
        self.spec = spec
        self.filter = SourceFilter(spec.source_ranges)

    def update(self, spec: ListenerSpec) -> None:
        if spec.source_ranges != self.spec.source_ranges:
            self.filter = SourceFilter(spec.source_ranges)
        self.spec = spec

    def healthy(self) -> list[Backend]:
        """The backends a new connection may go to: usable, and not draining."""
        lb = self.spec.load_balancer
        return [b for b in self.spec.backends if not b.draining and self._usable(lb, b.node)]

    def candidates(self, client_ip: str) -> list[Backend]:
        """Healthy backends in the order to try them: the chosen one first."""
        healthy = self.healthy()
        if not healthy:
            return []
        if self.spec.client_ip_affinity:
            first = rendezvous_pick(client_ip, healthy)
            start = healthy.index(first) if first is not None else 0
        else:
            start = next(self._rr) % len(healthy)
        return healthy[start:] + healthy[:start]

    async def close(self) -> None:
        raise NotImplementedError


class _BackendSide(asyncio.Protocol):
    def __init__(self, client: _ClientSide) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        self.client.send(data)

    def eof_received(self) -> bool:
        self.client.peer_eof()
        return True

    def pause_writing(self) -> None:
        self.client.pause_reading()

    def resume_writing(self) -> None:
        self.client.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.backend_lost()


class _ClientSide(asyncio.Protocol):
    def __init__(self, listener: TcpListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.backend: _BackendSide | None = None
        self.pending: list[bytes] = []
        self.eof = False
        self.closed = False

    # client socket events
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=_HIGH_WATER)
        peer = transport.get_extra_info("peername")
        client_ip = str(peer[0]) if peer else ""
        if self.listener.closing or not self.listener.filter.allows(client_ip):
            # closing: a connection accepted just before the listener closed is only made now;
            # proxied, it would outlive the listener and never be closed
            _reset(transport)
            return
        candidates = self.listener.candidates(client_ip)
        if not candidates:
            _reset(transport)
            return
        self.listener.connections.add(self)
        transport.pause_reading()
        self.listener.spawn(self._connect(candidates))

    async def _connect(self, candidates: list[Backend]) -> None:
        loop = asyncio.get_running_loop()
        port = self.listener.spec.node_port
        for backend in candidates:
            if self.closed:
                return
            try:
                _, side = await asyncio.wait_for(
                    loop.create_connection(lambda: _BackendSide(self), backend.address, port),
                    CONNECT_TIMEOUT,
                )
            except (OSError, TimeoutError) as exc:
                log.debug("backend %s:%d unreachable: %s", backend.address, port, exc)
                continue
            self._attached(side)
            return
        if self.transport is not None:
            _reset(self.transport)

    def _attached(self, side: _BackendSide) -> None:
        self.backend = side
        assert side.transport is not None
        if self.closed:
            side.transport.close()
            return
        for chunk in self.pending:
            side.transport.write(chunk)
        self.pending.clear()
        if self.eof and side.transport.can_write_eof():
            side.transport.write_eof()
        if self.transport is not None and not self.eof:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.backend is None or self.backend.transport is None:
            self.pending.append(data)
            return
        self.backend.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        side = self.backend.transport if self.backend is not None else None
        if side is not None and side.can_write_eof():
            side.write_eof()
        return True

    def pause_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.listener.connections.discard(self)
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.close()

    # called by the backend side
    def send(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def peer_eof(self) -> None:
        if self.transport is not None and self.transport.can_write_eof():
            self.transport.write_eof()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def backend_lost(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class TcpListener(Listener):
    protocol_name = "TCP"

    def __init__(self, spec: ListenerSpec, usable: HealthView) -> None:
        super().__init__(spec, usable)
        self.server: asyncio.Server | None = None
        self.connections: set[_ClientSide] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: _ClientSide(self),
            self.spec.key.vip,
            self.spec.key.port,
            reuse_address=True,
            backlog=4096,
        )

    def spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self.closing = True
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.abort()
        for task in list(self._tasks):
            task.cancel()
        if self.server is not None:
            await self.server.wait_closed()


class _UdpSession(asyncio.DatagramProtocol):
    def __init__(self, listener: UdpListener, client: tuple[Any, ...], backend: Backend) -> None:
        self.listener = listener
        self.client = client
        self.backend = backend
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: list[bytes] = []
        self.last_seen = asyncio.get_running_loop().time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # 3.11's selector datagram transport does not subclass DatagramTransport
        self.transport = cast(asyncio.DatagramTransport, transport)
        for data in self.pending:
            self.transport.sendto(data)
        self.pending.clear()

    def forward(self, data: bytes) -> None:
        self.last_seen = asyncio.get_running_loop().time()
        if self.transport is None:
            self.pending.append(data)
        else:
            self.transport.sendto(data)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self.last_seen = asyncio.get_running_loop().time()
        self.listener.reply(data, self.client)

    def error_received(self, exc: Exception) -> None:
        log.debug("udp session %s -> %s: %s", self.client, self.backend.address, exc)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class UdpListener(Listener, asyncio.DatagramProtocol):
    protocol_name = "UDP"

    def __init__(self, spec: ListenerSpec, usable: HealthView, idle_timeout: float) -> None:
        super().__init__(spec, usable)
        self.idle_timeout = idle_timeout
        self.transport: asyncio.DatagramTransport | None = None
        self.sessions: dict[tuple[Any, ...], _UdpSession] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._connecting: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(
            lambda: self, local_addr=(self.spec.key.vip, self.spec.key.port)
        )
        self._sweeper = loop.create_task(self._sweep())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # 3.11's selector datagram transport does not subclass DatagramTransport
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        client_ip = str(addr[0])
        if not self.filter.allows(client_ip):
            return
        session = self.sessions.get(addr)
        if session is not None and not self._still_usable(session.backend):
            self._drop(addr)
            session = None
        if session is None:
            session = self._open(addr, client_ip)
            if session is None:
                return
        session.forward(data)

    def _still_usable(self, backend: Backend) -> bool:
        """An established session keeps its backend while it is listed (draining or not)
        and usable."""
        listed = any(
            b.node == backend.node and b.address == backend.address for b in self.spec.backends
        )
        return listed and self._usable(self.spec.load_balancer, backend.node)

    def _open(self, addr: tuple[Any, ...], client_ip: str) -> _UdpSession | None:
        candidates = self.candidates(client_ip)
        if not candidates:
            return None
        session = _UdpSession(self, addr, candidates[0])
        self.sessions[addr] = session
        task = asyncio.get_running_loop().create_task(self._connect(session))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)
        return session

    async def _connect(self, session: _UdpSession) -> None:
        loop = asyncio.get_running_loop()
        remote = (session.backend.address, self.spec.node_port)
        try:
            await loop.create_datagram_endpoint(lambda: session, remote_addr=remote)
        except OSError as exc:
            log.warning("udp backend %s:%d: %s", remote[0], remote[1], exc)
            if self.sessions.get(session.client) is session:
                del self.sessions[session.client]

    def reply(self, data: bytes, client: tuple[Any, ...]) -> None:
        if self.transport is not None:
            self.transport.sendto(data, client)

    def _drop(self, addr: tuple[Any, ...]) -> None:
        session = self.sessions.pop(addr, None)
        if session is not None:
            session.close()

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        period = max(0.05, min(self.idle_timeout / 2, 5.0))
        while True:
            await asyncio.sleep(period)
            deadline = loop.time() - self.idle_timeout
            for addr in [a for a, s in self.sessions.items() if s.last_seen < deadline]:
                self._drop(addr)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for task in list(self._connecting):
            task.cancel()
        for addr in list(self.sessions):
            self._drop(addr)
        if self.transport is not None:
            self.transport.close()


async def start_listener(
    spec: ListenerSpec, usable: HealthView, *, udp_idle_timeout: float
) -> Listener:
    """Bind and serve one listener; OSError when the address cannot be bound."""
    listener: TcpListener | UdpListener
    if spec.key.protocol == "UDP":
        listener = UdpListener(spec, usable, udp_idle_timeout)
    else:
        listener = TcpListener(spec, usable)
    await listener.start()
    return listener
