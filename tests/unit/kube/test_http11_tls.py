"""TLS session resumption in kccm's lean HTTP/1.1 client (kccm.kube.http11.TlsSessions),
against loopback TLS servers: new connections resume the newest session; a server that does
not know the session (other ticket keys: a restarted API server) still answers after a full
handshake, and its session is the one offered next."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kccm.kube.http11 import ConnectionPool
from kccm.testing.certs import CertificateAuthority

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@dataclass
class TlsServer:
    url: str = ""
    resumed: list[bool] = field(default_factory=list)  # per connection, in accept order

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.resumed.append(writer.get_extra_info("ssl_object").session_reused)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
def authority() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture
def client_context(authority: CertificateAuthority) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=authority.cert_pem.decode())


@pytest.fixture
async def tls_server(
    authority: CertificateAuthority, tmp_path: Path
) -> AsyncIterator[Callable[[], asyncio.Future[TlsServer]]]:
    pair = authority.serving(("127.0.0.1",))
    (tmp_path / "cert.pem").write_bytes(pair.cert_pem)
    (tmp_path / "key.pem").write_bytes(pair.key_pem)
    listeners: list[asyncio.Server] = []

    async def start() -> TlsServer:
        # a context per server: its own session ticket keys, as a restarted API server has
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        server = TlsServer()
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
        listeners.append(listener)
        server.url = f"https://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        return server

    yield start  # type: ignore[misc]
    for listener in listeners:
        listener.close()
        await listener.wait_closed()


async def burst(pool: ConnectionPool, requests: int) -> None:
    """``requests`` GETs at once: each needs a connection of its own."""
    answers = await asyncio.gather(
        *(pool.request("GET", "/", params=None, headers={}, body=None) for _ in range(requests))
    )
    assert [a.body for a in answers] == [b"ok"] * requests


async def test_new_connections_resume_the_newest_session(tls_server, client_context) -> None:  # type: ignore[no-untyped-def]
    server = await tls_server()
    pool = ConnectionPool(server.url, client_context)
    await burst(pool, 1)
    await burst(pool, 4)  # the idle connection is reused; three more are opened
    assert server.resumed == [False, True, True, True]
    pool.close()


async def test_a_server_that_does_not_know_the_session_answers_after_a_full_handshake(
    tls_server, client_context
) -> None:  # type: ignore[no-untyped-def]
    first, restarted = await tls_server(), await tls_server()
    pool = ConnectionPool(first.url, client_context)
    await burst(pool, 1)
    other = ConnectionPool(restarted.url, client_context)  # the same context: the same sessions
    await burst(other, 1)
    await burst(other, 3)
    assert restarted.resumed == [False, True, True]  # its own session is offered next
    pool.close()
    other.close()
