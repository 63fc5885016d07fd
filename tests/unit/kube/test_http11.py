"""kccm's lean HTTP/1.1 client (kccm.kube.http11) against a raw loopback server that writes
exactly the bytes each case scripts: framing (Content-Length, chunked split anywhere, gzip),
keep-alive reuse, a connection the server closed while idle (GET sent again, POST not), a
timed-out or cancelled request (its connection is closed, never reused), malformed answers."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from kccm.kube.http11 import ConnectionPool
from kccm.util.clock import FakeClock


@dataclass
class Server:
    """Reads one request head at a time and answers with the next scripted reply: bytes (sent
    in the pieces given), or None (close the connection without answering)."""

    replies: list[list[bytes] | None]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n")
                     if line.lower().startswith(b"content-length:")),
                    0,
                )  # fmt: skip
                self.requests.append(head + await reader.readexactly(length))
                reply = self.replies.pop(0)
                if reply is None:
                    break
                for piece in reply:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[list[list[bytes] | None]], asyncio.Future[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(replies: list[list[bytes] | None]) -> Server:
        server = Server(replies)
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        servers.append(listener)
        port = listener.sockets[0].getsockname()[1]
        server.url = f"http://127.0.0.1:{port}"
        return server

    yield start  # type: ignore[misc]
    for listener in servers:
        listener.close()
        await listener.wait_closed()


def ok(body: bytes = b'{"a":1}', extra: str = "") -> list[bytes]:
    return [f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body]


async def get(pool: ConnectionPool, path: str = "/api/v1/x", method: str = "GET") -> bytes:
    body = b"{}" if method != "GET" else None
    answer = await pool.request(method, path, params=None, headers={}, body=body)
    return answer.body


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
)


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        pytest.param(ok(), b'{"a":1}', id="content-length"),
        pytest.param([CHUNKED], b"hello world", id="chunked-in-one-piece"),
        pytest.param(
            [CHUNKED[:60], CHUNKED[60:63], CHUNKED[63:]],
            b"hello world",
            id="chunked-split-inside-a-size-line-and-a-chunk",
        ),
        pytest.param([bytes([b]) for b in CHUNKED], b"hello world", id="chunked-byte-by-byte"),
        pytest.param(
            ok(gzip.compress(b"[1,2,3]"), "Content-Encoding: gzip\r\n"),
            b"[1,2,3]",
            id="gzip-inflated",
        ),
        pytest.param([b"HTTP/1.1 204 No Content\r\n\r\n"], b"", id="no-content"),
    ],
)
async def test_answers_are_read_by_their_framing(serve, reply, body) -> None:  # type: ignore[no-untyped-def]
    server = await serve([reply, ok(b"next")])
    pool = ConnectionPool(server.url, False)
    assert await get(pool) == body
    assert await get(pool) == b"next"  # the framing ended exactly where the answer did
    assert server.connections == 1
    pool.close()


async def test_the_request_carries_method_query_headers_and_body(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve([ok()])
    pool = ConnectionPool(server.url + "/prefix", False)
    await pool.request(
        "PATCH", "/api/v1/nodes/n1", params={"labelSelector": "a=b,c in (d)"},
        headers={"Authorization": "Bearer t"}, body=b'{"x":1}',
    )  # fmt: skip
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "PATCH /prefix/api/v1/nodes/n1?labelSelector=a%3Db%2Cc+in+%28d%29 HTTP/1.1"
    assert "Authorization: Bearer t" in lines
    assert "Content-Length: 7" in lines
    assert body == b'{"x":1}'
    pool.close()


@pytest.mark.parametrize(
    ("method", "sent_again"),
    [pytest.param("GET", True, id="get-is-sent-again"),
     pytest.param("DELETE", True, id="delete-is-sent-again"),
     pytest.param("PUT", True, id="put-is-sent-again"),
     pytest.param("POST", False, id="post-is-not"),
     pytest.param("PATCH", False, id="patch-is-not")],
)  # fmt: skip
async def test_a_reused_connection_the_server_closed_meanwhile(  # type: ignore[no-untyped-def]
    serve, method, sent_again
) -> None:
    server = await serve([ok(b"first"), None, ok(b"again")])
    pool = ConnectionPool(server.url, False)
    assert await get(pool) == b"first"
    if sent_again:
        assert await get(pool, method=method) == b"again"
        assert server.connections == 2
    else:
        with pytest.raises(ConnectionError):
            await get(pool, method=method)
    pool.close()


async def test_connection_close_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve([ok(b"a", "Connection: close\r\n"), ok(b"b")])
    pool = ConnectionPool(server.url, False)
    assert await get(pool) == b"a"
    assert await get(pool) == b"b"
    assert server.connections == 2
    pool.close()


async def test_a_timed_out_request_closes_its_connection(serve) -> None:  # type: ignore[no-untyped-def]
    half = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"
    server = await serve([[half], ok(b"fresh")])
    pool = ConnectionPool(server.url, False)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await get(pool)
    assert await get(pool) == b"fresh"  # not the rest of the old answer
    assert server.connections == 2
    pool.close()


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param([b"SPDY/3 200 OK\r\n\r\n"], id="not-http"),
        pytest.param([b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n"], id="header-without-colon"),
        pytest.param([b"HTTP/1.1 200 OK\r\nX: y\r\n\r\n{}"], id="no-framing"),
        pytest.param(
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], id="bad-chunk-size"
        ),
    ],
)
async def test_a_malformed_answer_is_an_os_error(serve, reply) -> None:  # type: ignore[no-untyped-def]
    server = await serve([reply, ok(b"fresh")])
    pool = ConnectionPool(server.url, False)
    with pytest.raises(OSError, match="malformed HTTP answer"):
        await get(pool)
    assert await get(pool) == b"fresh"
    pool.close()


async def test_an_answer_ending_early_is_a_connection_error(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve([[b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"], None])
    server.replies.pop()  # the server closes after the partial answer
    pool = ConnectionPool(server.url, False)
    with pytest.raises(ConnectionResetError):
        await get(pool)
    pool.close()


async def test_a_connection_idle_too_long_is_not_reused(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve([ok(b"a"), ok(b"b"), ok(b"c")])
    clock = FakeClock()
    pool = ConnectionPool(server.url, False, max_idle=60.0, clock=clock)
    assert await get(pool) == b"a"
    await clock.advance(60.0)
    assert await get(pool) == b"b"
    assert server.connections == 1  # reused while not idle too long
    await clock.advance(60.5)
    assert await get(pool) == b"c"
    assert server.connections == 2  # the idle one was closed, a new one opened
    pool.close()
