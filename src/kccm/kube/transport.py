"""The HTTP transport under :class:`~kccm.kube.client.KubeApiClient`: pooled keep-alive
connections with the kubeconfig's TLS and credentials. Unary requests go through kccm's own
lean HTTP/1.1 client (:mod:`kccm.kube.http11`); watches, long-lived streams, through aiohttp.

Why: a profile of 1,000 Node initialisations showed about half of kccm's CPU in lightkube's
pure-Python httpx stack; aiohttp (C parser, one pool) cut the CPU per request by more than
half; for the small unary requests that node initialisation and load balancer syncs are made
of, aiohttp's own per-request machinery was then most of the cost, and the lean client halves
it again (docs/measurements.md has the figures). lightkube still resolves the configuration
(kubeconfig, in-cluster, exec plugins) and builds the TLS context.

Credentials, as client-go applies them: a static bearer token; a token file, re-read when the
server answers 401 (rotated service-account tokens); an exec plugin, run again on 401; basic
auth; client certificates in the TLS context.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from lightkube.config.client_adapter import async_check_output, verify_cluster
from lightkube.config.models import User, UserExec

from kccm.kube.config import ClusterConfig
from kccm.kube.errors import KubeError, TransportError
from kccm.kube.http11 import ConnectionPool

__all__ = ["Credentials", "HttpResponse", "Transport", "credentials_for"]

_FIXED_IN = ((3, 12, 8), (3, 13, 1))
_NEEDS_CLEANUP_CLOSED = (
    sys.version_info < _FIXED_IN[0] or (3, 13) <= sys.version_info < _FIXED_IN[1]
)
"""aiohttp's own test (``connector.NEEDS_CLEANUP_CLOSED``) for the CPython TLS-close leak."""

_EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A fully read answer: status, headers that matter, body bytes."""

    status: int
    reason: str
    body: bytes
    retry_after: str | None = None


class Credentials:
    """The ``Authorization`` header for a request. After a 401, ``refresh(used)`` is told the
    header that failed and says whether a retry may help (client-go's ``maybeRefreshCreds``):
    true at once when another request already moved on to a newer token, else after reading
    the token file again / running the exec plugin again."""

    async def header(self) -> str | None:
        return None

    async def refresh(self, used: str | None) -> bool:
        return False


class _Static(Credentials):
    def __init__(self, value: str) -> None:
        self._value = value

    async def header(self) -> str | None:
        return self._value


class _TokenFile(Credentials):
    def __init__(self, path: str) -> None:
        self._path = path
        self._value: str | None = None

    def _read(self) -> str:
        try:
            return f"Bearer {Path(self._path).read_text().strip()}"
        except OSError as exc:
            raise KubeError(f"cannot read the bearer token file {self._path}: {exc}") from exc

    async def header(self) -> str | None:
        if self._value is None:
            self._value = self._read()
        return self._value

    async def refresh(self, used: str | None) -> bool:
        if self._value != used:
            return True
        self._value = self._read()
        return self._value != used


class _ExecPlugin(Credentials):
    def __init__(self, spec: UserExec) -> None:
        if spec.apiVersion not in _EXEC_API_VERSIONS:
            raise KubeError(f"exec credential plugin apiVersion {spec.apiVersion!r} not supported")
        self._spec = spec
        self._value: str | None = None
        self._lock = asyncio.Lock()

    async def _run(self) -> str:
        env = dict(os.environ)
        env.update((item.name, item.value) for item in self._spec.env or ())
        command = [self._spec.command, *(self._spec.args or ())]
        try:
            output = await async_check_output(command, env=env)
            token = json.loads(output)["status"]["token"]
        except Exception as exc:
            raise KubeError(f"exec credential plugin {command[0]!r} failed: {exc}") from exc
        return f"Bearer {token}"

    async def header(self) -> str | None:
        async with self._lock:
            if self._value is None:
                self._value = await self._run()
            return self._value

    async def refresh(self, used: str | None) -> bool:
        async with self._lock:
            if self._value == used:  # one plugin run for a burst of 401s
                self._value = await self._run()
            return self._value != used


def credentials_for(user: User | None) -> Credentials:
    """The credentials a kubeconfig user entry describes (client certificates live in TLS)."""
    if user is None:
        return Credentials()
    if user.token_file is not None:
        return _TokenFile(user.token_file)
    if user.token is not None:
        return _Static(f"Bearer {user.token}")
    if user.exec is not None:
        return _ExecPlugin(user.exec)
    if user.username and user.password:
        pair = f"{user.username}:{user.password}".encode()
        return _Static(f"Basic {base64.b64encode(pair).decode()}")
    if user.auth_provider:
        raise KubeError("kubeconfig auth-provider plugins are not supported; use exec")
    return Credentials()


def _ssl_context(config: ClusterConfig) -> ssl.SSLContext | bool:
    single = config.single
    if not str(single.cluster.server).startswith("https"):
        return False
    user = single.user or User()
    try:
        return verify_cluster(single.cluster, user, single.abs_file, trust_env=False)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise KubeError(f"TLS settings of {config.source}: {exc}") from exc


class Transport:
    """One connection pool to one API server; created lazily on the running loop."""

    def __init__(self, config: ClusterConfig, *, timeout: float, user_agent: str) -> None:
        self._base = str(config.single.cluster.server).rstrip("/")
        self._ssl = _ssl_context(config)
        self._credentials = credentials_for(config.single.user)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._stream_timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout
        )
        self._headers = {"User-Agent": user_agent, "Accept": "application/json"}
        self._session: aiohttp.ClientSession | None = None  # watches
        self._connections: ConnectionPool | None = None  # every other request
        self._connections_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                ssl=self._ssl,
                limit=256,
                keepalive_timeout=90,
                # Pythons without the asyncio fix leak TLS transports whose shutdown the peer
                # never completes; aiohttp aborts them when asked (and warns when asked on a
                # Python that has the fix, so ask only where it is needed).
                enable_cleanup_closed=_NEEDS_CLEANUP_CLOSED,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                auto_decompress=True,
                skip_auto_headers=("Content-Type",),
                trust_env=False,
            )
        return self._session

    @staticmethod
    def _headers_for(auth: str | None, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if auth:
            headers["Authorization"] = auth
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """Send and read the whole answer; a 401 is retried once with fresh credentials."""
        auth = await self._credentials.header()
        response = await self._once(method, path, params, content, content_type, auth, headers)
        if response.status == 401 and await self._credentials.refresh(auth):
            auth = await self._credentials.header()
            response = await self._once(method, path, params, content, content_type, auth, headers)
        return response

    async def authorization(self) -> str | None:
        """The ``Authorization`` header value the credentials give now (None: none, e.g. a
        client certificate)."""
        return await self._credentials.header()

    async def _once(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        content_type: str | None,
        auth: str | None,
        extra: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        headers = {**self._headers, **self._headers_for(auth, content_type), **(extra or {})}
        try:
            async with asyncio.timeout(self._timeout.total):
                answer = await self._pool().request(
                    method, path, params=params, headers=headers, body=content
                )
        except (TimeoutError, OSError) as exc:
            raise TransportError(f"{method} {path}: {_describe(exc)}") from exc
        return HttpResponse(
            answer.status, answer.reason, answer.body, answer.headers.get("retry-after")
        )

    def _pool(self) -> ConnectionPool:
        """The pool of the running loop (a client outliving its loop starts a new pool)."""
        loop = asyncio.get_running_loop()
        if self._connections is None or self._connections_loop is not loop:
            self._connections = ConnectionPool(self._base, self._ssl)
            self._connections_loop = loop
        return self._connections

    async def _open(self, method: str, path: str, **kwargs: Any) -> aiohttp.ClientResponse:
        """Send a request and wait for the answer's head. Cancellation cannot strand a
        half-open connection: the request finishes aside and its connection is closed
        (a TLS connection dropped mid-handshake would otherwise leak its socket)."""
        sending = asyncio.ensure_future(self._http().request(method, self._base + path, **kwargs))
        try:
            return await asyncio.shield(sending)
        except asyncio.CancelledError:
            sending.add_done_callback(_close_abandoned)
            raise

    async def stream_lines(
        self, path: str, params: Mapping[str, str], *, read_timeout: float | None = None
    ) -> AsyncIterator[bytes | HttpResponse]:
        """GET a streaming path: yields an :class:`HttpResponse` (and stops) when the answer
        is a failure, else each non-empty line of the body as it arrives. A 401 is retried
        once with fresh credentials (a watch must survive token rotation). ``read_timeout``
        ends a stream that stays silent that long (a peer gone without a FIN)."""
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self._stream_timeout.connect,
            sock_connect=self._stream_timeout.sock_connect,
            sock_read=read_timeout,
        )
        auth = await self._credentials.header()
        for attempt in range(2):
            try:
                response = await self._open(
                    "GET",
                    path,
                    params=params,
                    headers=self._headers_for(auth, None),
                    timeout=timeout,
                )
                try:
                    if response.status < 400:
                        async for line in _lines(response.content):
                            yield line
                        return
                    failure = _answer(response, await response.read())
                finally:
                    response.release()  # back to the pool at EOF, else the connection closes
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise TransportError(f"watch {path} broke: {_describe(exc)}") from exc
            if failure.status == 401 and attempt == 0 and await self._credentials.refresh(auth):
                auth = await self._credentials.header()
                continue
            yield failure
            return

    async def close(self) -> None:
        if self._connections is not None:
            self._connections.close()
            self._connections = None
        if self._session is not None:
            await self._session.close()
            self._session = None


def _answer(response: aiohttp.ClientResponse, body: bytes) -> HttpResponse:
    return HttpResponse(
        response.status, response.reason or "", body, response.headers.get("Retry-After")
    )


def _close_abandoned(sending: asyncio.Future[aiohttp.ClientResponse]) -> None:
    if not sending.cancelled() and sending.exception() is None:
        sending.result().close()


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a chunked body into lines of any length (watch events can exceed any fixed
    line limit: a large ConfigMap is one line)."""
    pending = bytearray()
    async for chunk in content.iter_any():
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            if end > start:
                yield bytes(pending[start:end])
            start = end + 1
        del pending[:start]
    if pending.strip():
        yield bytes(pending)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
