"""The daemon's HTTP(S) server: health endpoints and Prometheus metrics, on aiohttp.web.

Served paths:

* ``/healthz``, ``/readyz``, ``/livez`` — aggregate checks in the apiserver format (see
  :mod:`kccm.runtime.healthz`), and ``/<endpoint>/<check>`` for one check. Upstream's
  cloud-controller-manager serves only the exact ``/healthz``; kccm also serves the
  per-check paths and ``/readyz`` / ``/livez`` (issue 4), with the same checks by default.
* ``/metrics`` — the exposition of our own ``CollectorRegistry`` (text format, or OpenMetrics
  when the client asks for it).

TLS follows the apiserver's secure serving: given certificate and key files are used; else a
pair is reused from or written to ``cert_dir``; else a self-signed pair is generated in memory
at start (:mod:`kccm.runtime.selfsigned`); :class:`~kccm.runtime.tls.ServingTLS` adds the
minimum version, cipher suites and client CAs. Every path goes through the optional async
``authorizer`` (TokenReview / SubjectAccessReview delegation) except ``always_allow_paths``
(``--authorization-always-allow-paths``): an entry is an exact path, or a prefix when it ends
in ``*``; an allowed health endpoint (``/healthz``) also covers its per-check paths
(``/healthz/<check>``), which upstream does not serve.

The server runs on a loop of its own in a thread (:class:`kccm.util.loop.LoopThread`), so the
endpoints answer in milliseconds however busy the daemon's main loop is (issue 28: at 10,000
Nodes + 3,000 Services the main loop kept a request waiting 200-600 ms). What belongs to the
main loop is reached from there with :func:`kccm.util.loop.on_loop`: ``async`` health checks and
the handlers given to :meth:`Server.add_get` run on the loop that called :meth:`Server.start`.
Plain health checks, the authorizer and the Prometheus collectors run on the serving thread:
they must be thread-safe (reads of plain state), and an authorizer's API clients must be used
there only (the daemon gives :class:`kccm.runtime.delegated.DelegatedAuth` clients of its own,
closed on that thread by :meth:`Server.close_on_stop`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from kccm.runtime.healthz import HealthCheck, HealthChecks, HealthResponse
from kccm.runtime.selfsigned import (
    generate_self_signed,
    load_or_generate,
    server_ssl_context,
)
from kccm.runtime.tls import ServingTLS, apply_serving_tls
from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.loop import LoopThread, on_loop

__all__ = ["ENDPOINTS", "Authorizer", "Decision", "Handler", "Server"]

ENDPOINTS = ("healthz", "readyz", "livez")
DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")

_log = logging.getLogger(__name__)

_TEXT_HEADERS = {"Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Decision:
    """An authorizer's verdict: allowed, or refused with 401 (who are you?) or 403 (no)."""

    allowed: bool
    status: int = 200
    reason: str = ""

    @classmethod
    def allow(cls) -> Decision:
        return cls(True)

    @classmethod
    def unauthorized(cls, reason: str = "Unauthorized") -> Decision:
        return cls(False, 401, reason)

    @classmethod
    def forbidden(cls, reason: str = "forbidden") -> Decision:
        return cls(False, 403, reason)


Authorizer = Callable[[web.Request], Awaitable[Decision]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """Health and metrics over HTTPS (or plain HTTP with ``tls=False``).

    ``port=0`` binds a free port; :attr:`port` reports the real one once started.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        bind_address: str = "0.0.0.0",
        port: int = 10258,
        tls: bool = True,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        cert_dir: Path | None = None,
        pair_name: str = "cloud-controller-manager",
        authorizer: Authorizer | None = None,
        always_allow_paths: Iterable[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
        tls_options: ServingTLS | None = None,
        reuse_port: bool = False,
        reuse_address: bool = False,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.registry = registry
        self.bind_address = bind_address
        self.requested_port = port
        self.tls = tls
        self.cert_file, self.key_file = cert_file, key_file
        self.cert_dir, self.pair_name = cert_dir, pair_name
        self.authorizer = authorizer
        self.always_allow_paths = tuple(always_allow_paths)
        self.tls_options = tls_options or ServingTLS()
        self.reuse_port, self.reuse_address = reuse_port, reuse_address
        self.checks = {endpoint: HealthChecks(endpoint) for endpoint in ENDPOINTS}
        self.ca_pem: bytes | None = None
        self._clock = clock
        self._runner: web.AppRunner | None = None
        self._thread: LoopThread | None = None
        self._home: asyncio.AbstractEventLoop | None = None
        self._port: int | None = None
        self._routes: list[tuple[str, Handler]] = []
        self._closers: list[Callable[[], Awaitable[object]]] = []

    def add_check(
        self, name: str, check: HealthCheck, *, endpoints: Iterable[str] = ENDPOINTS
    ) -> None:
        """Serve ``check`` under ``name`` on each of ``endpoints``."""
        for endpoint in endpoints:
            self.checks[endpoint].add(name, check)

    def add_get(self, path: str, handler: Handler) -> None:
        """Serve GET ``path`` (an aiohttp route pattern) with ``handler``, under the same
        authorization as every path; call before :meth:`start` (``kccm explain`` uses it).
        ``handler`` runs on the loop that started the server and gets the serving thread's
        request: it may read its path, ``match_info``, query and headers, not its body or
        transport, and must return a plain ``web.Response`` (not prepare a stream)."""
        self._routes.append((path, handler))

    def close_on_stop(self, *closers: Callable[[], Awaitable[object]]) -> None:
        """Await each of ``closers`` on the serving thread when the server stops (what the
        authorizer used there: its API clients)."""
        self._closers.extend(closers)

    def remove_check(self, name: str) -> None:
        for checks in self.checks.values():
            checks.remove(name)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        host = "localhost" if _unspecified(self.bind_address) else self.bind_address
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{self.port}"

    @property
    def listen_address(self) -> str:
        """Where the socket listens, as bound (``0.0.0.0:10258`` means every interface)."""
        host = self.bind_address or "0.0.0.0"
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{self.port}"

    def always_allowed(self, path: str) -> bool:
        """``--authorization-always-allow-paths``: exact entries, or prefixes ending in ``*``."""
        for entry in self.always_allow_paths:
            if entry.endswith("*"):
                if path.startswith(entry[:-1]):
                    return True
            elif path == entry or (entry.lstrip("/") in ENDPOINTS and path.startswith(entry + "/")):
                return True
        return False

    def application(self) -> web.Application:
        """The aiohttp application (routes and the authorization middleware)."""
        app = web.Application(middlewares=[self._authorize])
        for endpoint in ENDPOINTS:
            app.router.add_get(f"/{endpoint}", self._aggregate_handler(endpoint))
            app.router.add_get(f"/{endpoint}/{{check}}", self._single_handler(endpoint))
        app.router.add_get("/metrics", self._metrics)
        for path, handler in self._routes:
            app.router.add_get(path, self._on_home(handler))
        return app

    async def start(self) -> None:
        """Bind and serve from a thread of its own; the TLS material is loaded or generated
        here. The running loop becomes the one ``async`` checks and added handlers run on."""
        context = self._ssl_context() if self.tls else None
        self._home = asyncio.get_running_loop()
        for checks in self.checks.values():
            checks.home = self._home
        thread = LoopThread("kccm-serving")
        try:
            await thread.run(self._start_site(context))
        except BaseException:
            await thread.stop()
            raise
        self._thread = thread

    async def _start_site(self, context: ssl.SSLContext | None) -> None:
        runner = web.AppRunner(self.application(), access_log=None)
        await runner.setup()
        site = web.TCPSite(
            runner,
            self.bind_address,
            self.requested_port,
            ssl_context=context,
            reuse_port=self.reuse_port or None,
            reuse_address=self.reuse_address or None,
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop serving, run the closers and end the thread, each even if one before failed."""
        thread = self._thread
        if thread is None:
            return
        try:
            if self._runner is not None:
                await thread.run(self._runner.cleanup())
                self._runner = None
        finally:
            try:
                await thread.run(self._close_on_thread())
            finally:
                await thread.stop()
                self._thread = None

    async def _close_on_thread(self) -> None:
        for close in self._closers:
            try:
                await close()
            except Exception:
                _log.exception("closing %r after the server stopped failed", close)

    def _on_home(self, handler: Handler) -> Handler:
        """``handler`` run on the loop that started the server."""

        async def handle(request: web.Request) -> web.StreamResponse:
            return await on_loop(self._home, handler(request))

        return handle

    def _ssl_context(self) -> ssl.SSLContext:
        context = self._certificate_context()
        apply_serving_tls(context, self.tls_options)
        return context

    def _certificate_context(self) -> ssl.SSLContext:
        if self.cert_file is not None and self.key_file is not None:
            return server_ssl_context(cert_file=self.cert_file, key_file=self.key_file)
        host, alt_ips = self._certificate_names()
        if self.cert_dir is not None:
            cert_file, key_file = load_or_generate(
                self.cert_dir, self.pair_name, host, alt_ips=alt_ips, now=self._clock.now()
            )
            return server_ssl_context(cert_file=cert_file, key_file=key_file)
        pair = generate_self_signed(host, alt_ips=alt_ips, now=self._clock.now())
        self.ca_pem = pair.ca_pem
        return server_ssl_context(pair=pair)

    def _certificate_names(self) -> tuple[str, tuple[str, ...]]:
        """Upstream names ``localhost`` and 127.0.0.1, plus a specific bind address."""
        alt_ips: tuple[str, ...] = ("127.0.0.1",)
        if not _unspecified(self.bind_address) and self.bind_address != "127.0.0.1":
            alt_ips += (self.bind_address,)
        return "localhost", alt_ips

    @web.middleware
    async def _authorize(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.authorizer is None or self.always_allowed(request.path):
            return await handler(request)
        decision = await self.authorizer(request)
        if decision.allowed:
            return await handler(request)
        return _status_response(decision)

    def _aggregate_handler(self, endpoint: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            result = await self.checks[endpoint].check_all(
                verbose="verbose" in request.query, exclude=request.query.getall("exclude", [])
            )
            return _text(result)

        return handle

    def _single_handler(self, endpoint: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            name = request.match_info["check"]
            if name not in self.checks[endpoint]:
                raise web.HTTPNotFound()
            return _text(await self.checks[endpoint].check_one(name))

        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encoder(self.registry), headers={"Content-Type": content_type})


def _text(result: HealthResponse) -> web.Response:
    return web.Response(status=result.status, text=result.body, headers=_TEXT_HEADERS)


def _status_response(decision: Decision) -> web.Response:
    """A ``meta/v1 Status`` body, as the apiserver's authn/authz filters answer."""
    reason = "Unauthorized" if decision.status == 401 else "Forbidden"
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": decision.reason,
        "reason": reason,
        "details": {},
        "code": decision.status,
    }
    return web.Response(
        status=decision.status,
        text=json.dumps(status),
        headers={"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"},
    )


def _unspecified(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return address == ""
