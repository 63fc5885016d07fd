"""A lean HTTP/1.1 client for the API server's unary requests (everything but watches).

Why not aiohttp for these: node initialisation is three small requests per Node, and at
1,000 Nodes aiohttp's per-request machinery (request and response objects, URL parsing,
header multidicts, timers, tracing hooks, payload writers) was most of kccm's CPU per
request. This client does only what the API server needs: one request at a time per
keep-alive connection from a pool, a request written in one piece, a response read by
``Content-Length`` or ``chunked`` framing, ``gzip`` bodies inflated (the API server
compresses large lists, as it does for client-go, which asks for gzip too).

Failures, as aiohttp (RFC 9112 section 9.3.1) and Go's transport handle them: a connection
idle longer than :data:`MAX_IDLE` is not reused (the API server drops idle connections after
90 s); a request on a reused connection that ended before any byte of an answer came back is
sent again once on a new connection when its method is idempotent (GET, HEAD, OPTIONS, TRACE,
PUT, DELETE: never POST or PATCH); any other failure closes the connection and raises
:class:`OSError` (or :class:`TimeoutError`); a cancelled request closes its connection.

TLS connections resume the newest session (:class:`TlsSessions`): HTTP/1.1 needs a connection
per concurrent request, so a burst of writes opens dozens at once, and a full handshake costs
about 2 ms of CPU here (OpenSSL 3: certificate chain, signatures) where a resumed one costs
20-40 % less (bench/request_cost.py). client-go needs one handshake for its single HTTP/2
connection.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["Answer", "ConnectionPool", "TlsSessions"]

_MAX_HEAD = 64 * 1024
MAX_IDLE = 60.0
"""Seconds a pooled connection may idle and still be reused (the API server's IdleTimeout is
90 s: a connection it is about to close is not picked)."""
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: Mapping[str, str]  # lower-cased names
    body: bytes


class _ServerClosed(ConnectionError):
    """The connection ended before any byte of the answer came back."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        self._head: tuple[int, str, dict[str, str], int] | None = None  # ..., body start
        self._chunks: list[bytes] = []
        self._chunk_at = 0

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._waiter is None or self._waiter.done():
            if self._waiter is None:  # bytes nobody asked for: the connection is unusable
                self.close()
            return
        try:
            answer = self._parse()
        except ValueError as exc:
            self._fail(OSError(f"malformed HTTP answer: {exc}"))
            return
        if answer is not None:
            self._waiter.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            if not self._buffer and self._head is None:
                self._waiter.set_exception(_ServerClosed("the server closed the connection"))
            else:
                self._waiter.set_exception(
                    ConnectionResetError("the connection ended in the middle of an answer")
                )

    # -- requests -------------------------------------------------------------------------

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._buffer.clear()
        self._head, self._chunks, self._chunk_at = None, [], 0
        self.transport.write(request)
        return self._waiter

    def done(self) -> None:
        """The answer was taken; the connection may serve the next request."""
        self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    # -- parsing --------------------------------------------------------------------------

    def _parse(self) -> Answer | None:
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > _MAX_HEAD:
                    raise ValueError("header section too long")
                return None
            self._head = _parse_head(bytes(self._buffer[:end]), end + 4)
            self._chunk_at = end + 4
        status, _, headers, start = self._head
        if status in (204, 304):
            return self._answer(b"")
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._dechunk()
            return None if body is None else self._answer(body)
        length = headers.get("content-length")
        if length is None:
            raise ValueError("neither Content-Length nor chunked framing")
        need = start + int(length)
        if len(self._buffer) < need:
            return None
        return self._answer(bytes(self._buffer[start:need]))

    def _dechunk(self) -> bytes | None:
        buffer, at = self._buffer, self._chunk_at
        while True:
            line_end = buffer.find(b"\r\n", at)
            if line_end < 0:
                return None
            size = int(bytes(buffer[at:line_end]).split(b";", 1)[0], 16)
            if size == 0:  # the last chunk, then trailers up to an empty line
                if buffer.find(b"\r\n\r\n", line_end) < 0:
                    self._chunk_at = at
                    return None
                return b"".join(self._chunks)
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                self._chunk_at = at
                return None
            self._chunks.append(bytes(buffer[line_end + 2 : data_end]))
            at = self._chunk_at = data_end + 2

    def _answer(self, body: bytes) -> Answer:
        assert self._head is not None
        status, reason, headers, _ = self._head
        if headers.get("content-encoding", "").lower() == "gzip" and body:
            body = zlib.decompress(body, wbits=31)
        if headers.get("connection", "").lower() == "close":
            self.closed = True
        return Answer(status, reason, headers, body)


def _parse_head(head: bytes, body_start: int) -> tuple[int, str, dict[str, str], int]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"status line {lines[0]!r}")
    code, _, reason = rest.partition(" ")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    return int(code), reason, headers, body_start


class TlsSessions:
    """TLS 1.3 session resumption (RFC 8446 section 2.2) for the connections a client context
    opens: the newest session a server gave for a host name is offered on each new connection
    to that same name, whichever library opens it (the lean pool; aiohttp's watches share the
    context). A resumed connection is authenticated by the key of the session it resumes, whose
    handshake verified the server's certificate for that name (RFC 8446 section 4.6.1: only for
    the same name, so a session is never offered to another host name); the API server checks
    the client's certificate or token as before. TLS 1.2 sessions are not kept (their tickets
    give no forward secrecy).

    asyncio and uvloop build each connection's TLS state with ``context.wrap_bio(...)`` and
    take no session argument, so the context's ``wrap_bio`` is wrapped (on the instance, once
    per context: :meth:`of`). A server that does not accept the session (restarted, other ticket
    keys, another server behind the same address, single-use tickets) gets a full handshake, as
    before, and the session of that connection is offered next. The sessions live on the
    context (one cycle with it, freed with it).
    """

    def __init__(self, context: ssl.SSLContext) -> None:
        self._newest: dict[str, ssl.SSLSession] = {}
        newest = self._newest
        wrap_bio = context.wrap_bio

        def resuming_wrap_bio(
            incoming: ssl.MemoryBIO,
            outgoing: ssl.MemoryBIO,
            server_side: bool = False,
            server_hostname: str | bytes | None = None,
            session: ssl.SSLSession | None = None,
        ) -> ssl.SSLObject:
            if session is None and not server_side and server_hostname is not None:
                session = newest.get(_host_name(server_hostname))
            return wrap_bio(incoming, outgoing, server_side, server_hostname, session)

        context.wrap_bio = resuming_wrap_bio  # type: ignore[method-assign]
        setattr(context, _SESSIONS_ATTRIBUTE, self)

    @classmethod
    def of(cls, context: ssl.SSLContext) -> TlsSessions:
        """The one :class:`TlsSessions` of ``context`` (made on first use)."""
        sessions: TlsSessions | None = getattr(context, _SESSIONS_ATTRIBUTE, None)
        return sessions if sessions is not None else cls(context)

    def remember(self, transport: asyncio.BaseTransport, server_hostname: str) -> None:
        """Keep the session of ``transport``'s connection to ``server_hostname`` once an answer
        was read on it (a TLS 1.3 server sends its session ticket after the handshake, before
        the answer)."""
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.version() != "TLSv1.3":
            return
        session = ssl_object.session
        if session is not None and session.has_ticket:
            self._newest[server_hostname] = session


_SESSIONS_ATTRIBUTE = "_kccm_tls_sessions"


def _host_name(name: str | bytes) -> str:
    return name.decode("ascii", "replace") if isinstance(name, bytes) else name


class ConnectionPool:
    """Keep-alive connections to one ``http(s)://host:port`` base URL."""

    def __init__(
        self,
        base: str,
        ssl_context: ssl.SSLContext | bool,
        *,
        limit: int = 256,
        max_idle: float = MAX_IDLE,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self._max_idle = max_idle
        self._clock = clock
        parts = urlsplit(base)
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc.encode("latin-1")
        if parts.scheme == "https":
            self._ssl: ssl.SSLContext | None = (
                ssl_context
                if isinstance(ssl_context, ssl.SSLContext)
                else ssl.create_default_context()
            )
        else:
            self._ssl = None
        self._sessions = None if self._ssl is None else TlsSessions.of(self._ssl)
        self._idle: deque[_Connection] = deque()
        self._slots = asyncio.Semaphore(limit)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> Answer:
        """Send one request and read its whole answer (bound its time with
        ``asyncio.timeout``: a cancelled request closes its connection)."""
        request = self._encode(method, path, params, headers, body)
        async with self._slots:
            for _ in range(2):
                connection, reused = await self._connection()
                try:
                    answer = await connection.send(request)
                except _ServerClosed:
                    connection.close()
                    if reused and method in IDEMPOTENT:
                        continue  # sent again once, on a new connection
                    raise
                except BaseException:
                    connection.close()
                    raise
                connection.done()
                if not reused and self._sessions is not None and connection.transport:
                    self._sessions.remember(connection.transport, self._host)
                if connection.closed:  # "Connection: close": ours to close now
                    connection.close()
                else:
                    connection.idle_since = self._clock.monotonic()
                    self._idle.append(connection)
                return answer
        raise ConnectionError("unreachable")  # pragma: no cover

    async def _connection(self) -> tuple[_Connection, bool]:
        while self._idle:
            connection = self._idle.pop()  # the most recently used first
            if connection.closed:
                continue
            if self._clock.monotonic() - connection.idle_since > self._max_idle:
                connection.close()
                continue
            return connection, True
        _, connection = await asyncio.get_running_loop().create_connection(
            _Connection,
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._ssl is not None else None,
        )
        return connection, False

    def _encode(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> bytes:
        target = self._prefix + path
        if params:
            target += "?" + urlencode(params)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header.decode()}"]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        lines.append("Accept-Encoding: gzip")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
