"""The demo's network side: each node's HTTP servers (kube-proxy stand-ins) and the client
that sends requests through the load balancer's VIP."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["HEALTH_PORT", "NodeServers", "connect_refused", "fetch", "spread", "spread_text"]

HEALTH_PORT = 10256


def _response(body: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


async def _answer(name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
        parts = request.split(b" ", 2)
        path = parts[1] if len(parts) > 1 else b"/"
        writer.write(_response(b"ok" if path.startswith(b"/healthz") else name.encode()))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
        pass
    finally:
        writer.close()


@dataclass
class NodeServers:
    """A node's HTTP server at the nodePort and its :10256/healthz."""

    name: str
    address: str
    servers: list[asyncio.Server] = field(default_factory=list)

    async def start(self, node_port: int) -> None:
        for port in (node_port, HEALTH_PORT):
            server = await asyncio.start_server(
                lambda r, w: _answer(self.name, r, w), self.address, port
            )
            self.servers.append(server)

    async def stop(self) -> None:
        for server in self.servers:
            server.close()
        for server in self.servers:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5.0)
        self.servers.clear()


async def fetch(host: str, port: int, limit: float = 5.0) -> str:
    """One HTTP/1.0 GET / within ``limit`` seconds; the response body."""
    async with asyncio.timeout(limit):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(b"GET / HTTP/1.0\r\nHost: demo\r\n\r\n")
            data = await reader.read()
        finally:
            writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError(f"unexpected response {head[:40]!r}")
    return body.decode()


async def spread(host: str, port: int, count: int) -> tuple[Counter[str], list[str]]:
    """``count`` sequential requests: answers per node, and the failures."""
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for _ in range(count):
        try:
            seen[await fetch(host, port)] += 1
        except (OSError, TimeoutError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
    return seen, failures


def spread_text(seen: Counter[str], failures: Sequence[str]) -> str:
    parts = [f"{name} {count}" for name, count in sorted(seen.items())]
    text = ", ".join(parts) or "no answers"
    return f"{text}; {len(failures)} failed" + (f" (first: {failures[0]})" if failures else "")


async def connect_refused(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2.0)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    return False
