"""One health probe against real loopback servers: what counts as success."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from kccm.providers.local.dataplane.health import probe
from kccm.providers.local.dataplane.model import HealthMode, ProbeTarget
from kccm.testing.ports import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def answering(status: bytes) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    return handle


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()
    writer.close()
    await writer.wait_closed()


def closed_port() -> int:
    """A port nothing listens on: claimed here (kccm.testing.ports) and never bound."""
    return free_port()


@pytest.fixture
async def server(request: pytest.FixtureRequest) -> AsyncIterator[int]:
    handler: Handler | None = request.param
    if handler is None:
        yield closed_port()
        return
    srv = await asyncio.start_server(handler, "127.0.0.1", 0)
    yield int(srv.sockets[0].getsockname()[1])
    srv.close()


@pytest.mark.parametrize(
    ("server", "mode", "ok", "detail"),
    [
        pytest.param(answering(b"200 OK"), "kube-proxy", True, "200", id="http-200"),
        pytest.param(answering(b"204 No Content"), "node-port", True, "204", id="http-204"),
        pytest.param(
            answering(b"503 Service Unavailable"), "kube-proxy", False, "503", id="http-503"
        ),
        pytest.param(None, "kube-proxy", False, "refused", id="http-refused"),
        pytest.param(silent, "node-port", False, "timeout", id="http-silent-times-out"),
        pytest.param(silent, "tcp", True, "connected", id="tcp-connect"),
        pytest.param(None, "tcp", False, "refused", id="tcp-refused"),
    ],
    indirect=["server"],
)
async def test_probe(server: int, mode: HealthMode, ok: bool, detail: str) -> None:
    target = ProbeTarget("lb", "n1", mode, "127.0.0.1", server, "/healthz")
    got_ok, got_detail = await probe(target, 0.3)
    assert got_ok is ok
    assert detail.lower() in got_detail.lower()
