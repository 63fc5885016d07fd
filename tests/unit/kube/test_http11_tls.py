"""TLS session resumption in kccm's lean HTTP/1.1 client (kccm.kube.http11.TlsSessions),
against loopback TLS servers, on asyncio's loop and on uvloop: new connections resume the newest
session; a server that does not know the session (other ticket keys: a restarted API server)
still answers after a full handshake, and its session is the one offered next; a session is
never offered to another host name; a server-side use of the context is left alone; the
sessions go with their context."""

from __future__ import annotations

import asyncio
import gc
import ssl
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvloop

from kccm.kube.http11 import ConnectionPool, TlsSessions
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
def server_files(authority: CertificateAuthority, tmp_path: Path) -> tuple[Path, Path]:
    pair = authority.serving(("127.0.0.1", "localhost"))
    (tmp_path / "cert.pem").write_bytes(pair.cert_pem)
    (tmp_path / "key.pem").write_bytes(pair.key_pem)
    return tmp_path / "cert.pem", tmp_path / "key.pem"


async def listen(server_files: tuple[Path, Path]) -> tuple[TlsServer, asyncio.Server]:
    """A TLS server on a loopback port of the running loop; close the listener when done."""
    # a context per server: its own session ticket keys, as a restarted API server has
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*server_files)
    server = TlsServer()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    server.url = f"https://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    return server, listener


@pytest.fixture
async def tls_server(
    server_files: tuple[Path, Path],
) -> AsyncIterator[Callable[[], Awaitable[TlsServer]]]:
    listeners: list[asyncio.Server] = []

    async def start() -> TlsServer:
        server, listener = await listen(server_files)
        listeners.append(listener)
        return server

    yield start
    for listener in listeners:
        listener.close()
        await listener.wait_closed()


async def burst(pool: ConnectionPool, requests: int) -> None:
    """``requests`` GETs at once: each needs a connection of its own."""
    answers = await asyncio.gather(
        *(pool.request("GET", "/", params=None, headers={}, body=None) for _ in range(requests))
    )
    assert [a.body for a in answers] == [b"ok"] * requests


async def first_one_then_four(url: str, client_context: ssl.SSLContext) -> None:
    pool = ConnectionPool(url, client_context)
    try:
        await burst(pool, 1)
        await burst(pool, 4)  # the idle connection is reused; three more are opened
    finally:
        pool.close()


async def test_new_connections_resume_the_newest_session(tls_server, client_context) -> None:  # type: ignore[no-untyped-def]
    server = await tls_server()
    await first_one_then_four(server.url, client_context)
    assert server.resumed == [False, True, True, True]


def test_new_connections_resume_the_newest_session_on_uvloop(
    server_files: tuple[Path, Path], client_context: ssl.SSLContext
) -> None:
    """The daemon's loop (uvloop builds its TLS connections in its own code)."""

    async def run() -> list[bool]:
        server, listener = await listen(server_files)
        try:
            await first_one_then_four(server.url, client_context)
        finally:
            listener.close()
            await listener.wait_closed()
        return server.resumed

    assert uvloop.run(run()) == [False, True, True, True]


async def test_a_server_that_does_not_know_the_session_answers_after_a_full_handshake(
    tls_server, client_context
) -> None:  # type: ignore[no-untyped-def]
    first, restarted = await tls_server(), await tls_server()
    pool = ConnectionPool(first.url, client_context)
    other = ConnectionPool(restarted.url, client_context)  # the same context: the same sessions
    try:
        await burst(pool, 1)
        await burst(other, 1)
        await burst(other, 3)
    finally:
        pool.close()
        other.close()
    assert restarted.resumed == [False, True, True]  # its own session is offered next


async def test_a_session_is_never_offered_to_another_host_name(tls_server, client_context) -> None:  # type: ignore[no-untyped-def]
    server = await tls_server()
    by_address = ConnectionPool(server.url, client_context)
    by_name = ConnectionPool(server.url.replace("127.0.0.1", "localhost"), client_context)
    try:
        await burst(by_address, 1)
        await burst(by_name, 1)  # "localhost" has no session of its own yet
        await burst(by_name, 2)  # the idle connection reused; a new one resumes
    finally:
        by_address.close()
        by_name.close()
    # 127.0.0.1's session was not offered to "localhost"; localhost's own one was, next time
    assert server.resumed == [False, False, True]


def test_a_server_side_use_of_the_context_is_left_alone(
    client_context: ssl.SSLContext,
) -> None:
    sessions = TlsSessions.of(client_context)
    sessions._newest["127.0.0.1"] = object()  # type: ignore[assignment]  # would fail if offered
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    TlsSessions.of(server_side)
    obj = server_side.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=True)
    assert obj.server_side
    assert TlsSessions.of(client_context) is sessions  # one per context


async def test_the_sessions_go_with_their_context(tls_server, authority) -> None:  # type: ignore[no-untyped-def]
    server = await tls_server()
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    pool = ConnectionPool(server.url, context)
    try:
        await burst(pool, 1)
    finally:
        pool.close()
    assert server.resumed == [False]
    gone = weakref.ref(context)
    del context, pool
    for _ in range(100):  # the aborted connections let go of it once their callbacks ran
        gc.collect()
        if gone() is None:
            break
        await asyncio.sleep(0)
    assert gone() is None
