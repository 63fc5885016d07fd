"""The health and metrics server: a real aiohttp server on 127.0.0.1, port 0, over HTTPS."""

from __future__ import annotations

import asyncio
import errno
import ssl
import threading
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry

from kccm.runtime.healthz import HealthCheck
from kccm.runtime.selfsigned import generate_self_signed
from kccm.runtime.server import Decision, Server
from kccm.runtime.tls import NamedCertKey, ServingTLS
from kccm.runtime.workqueue import WorkQueue
from kccm.testing.certs import CertificateAuthority
from kccm.util.clock import REAL_CLOCK

StartServer = Callable[..., Awaitable[Server]]


def passing() -> None:
    return None


def failing() -> None:
    raise RuntimeError("cloud unreachable")


async def failing_async() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("lease overdue")


def returns_false() -> bool:
    return False


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    servers: list[Server] = []

    async def start(**options: object) -> Server:
        options.setdefault("registry", CollectorRegistry())
        options.setdefault("port", 0)
        server = Server(bind_address="127.0.0.1", **options)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@dataclass
class Reply:
    status: int
    body: str
    headers: dict[str, str]


def client_context(server: Server, cafile: Path | None) -> ssl.SSLContext | bool:
    if not server.tls:
        return False
    if cafile is not None:
        return ssl.create_default_context(cafile=cafile)
    assert server.ca_pem is not None
    return ssl.create_default_context(cadata=server.ca_pem.decode())


async def fetch(server: Server, path: str, *, cafile: Path | None = None, **kw: object) -> Reply:
    connector = aiohttp.TCPConnector(ssl=client_context(server, cafile))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(server.url + path, **kw) as response,  # type: ignore[arg-type]
    ):
        return Reply(response.status, await response.text(), dict(response.headers))


CHECKS: dict[str, HealthCheck] = {
    "ok": passing,
    "boom": failing,
    "async-boom": failing_async,
    "false": returns_false,
}

HEALTH_CASES = [
    pytest.param([], "/healthz", 200, "ok", id="no-checks-ok"),
    pytest.param([], "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n", id="ping"),
    pytest.param(["ok"], "/healthz?verbose", 200, "[+]ok ok\nhealthz check passed\n", id="verbose"),
    pytest.param(
        ["ok", "boom"],
        "/healthz",
        500,
        "[+]ok ok\n[-]boom failed: reason withheld\nhealthz check failed\n",
        id="one-failing-check-fails-the-aggregate",
    ),
    pytest.param(
        ["async-boom", "false"],
        "/readyz?verbose",
        500,
        "[-]async-boom failed: reason withheld\n[-]false failed: reason withheld\n"
        "readyz check failed\n",
        id="async-and-false-checks-fail",
    ),
    pytest.param(["ok", "boom"], "/livez?exclude=boom", 200, "ok", id="excluded-check-skipped"),
    pytest.param(
        ["ok"],
        "/healthz?verbose&exclude=nope&exclude=other",
        200,
        '[+]ok ok\nwarn: some health checks cannot be excluded: no matches for "nope","other"\n'
        "healthz check passed\n",
        id="unknown-exclude-warns",
    ),
    pytest.param(["ok", "boom"], "/healthz/ok", 200, "ok", id="single-check-ok"),
    pytest.param(
        ["ok", "boom"],
        "/healthz/boom",
        500,
        "internal server error: cloud unreachable\n",
        id="single-check-fails-with-reason",
    ),
    pytest.param(["ok"], "/healthz/missing", 404, None, id="unknown-single-check-404"),
    pytest.param([], "/healthz/ping", 200, "ok", id="single-ping"),
]


@pytest.mark.parametrize(("checks", "path", "status", "body"), HEALTH_CASES)
async def test_health_endpoints(
    start_server: StartServer, checks: list[str], path: str, status: int, body: str | None
) -> None:
    server = await start_server()
    for name in checks:
        server.add_check(name, CHECKS[name])
    reply = await fetch(server, path)
    assert reply.status == status
    if body is not None:
        assert reply.body == body
        assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"


async def test_checks_can_be_limited_to_one_endpoint(start_server: StartServer) -> None:
    server = await start_server()
    server.add_check("cache-synced", failing, endpoints=["readyz"])
    assert (await fetch(server, "/readyz")).status == 500
    assert (await fetch(server, "/livez")).status == 200
    assert (await fetch(server, "/healthz/cache-synced")).status == 404


def fetch_blocking(server: Server, path: str) -> int:
    """GET ``path`` from a thread of the caller's, without the caller's loop."""
    context = client_context(server, None)
    assert isinstance(context, ssl.SSLContext)
    with urllib.request.urlopen(server.url + path, context=context, timeout=30) as response:
        return int(response.status)


async def test_health_and_metrics_answer_while_the_starting_loop_is_blocked(
    start_server: StartServer,
) -> None:
    server = await start_server()
    server.add_check("lease", passing)
    answers: list[object] = []
    answered = threading.Event()

    def probe() -> None:
        try:
            answers.extend(fetch_blocking(server, path) for path in ("/healthz", "/metrics"))
        except Exception as exc:  # shown by the assertion below, not lost in the thread
            answers.append(exc)
        answered.set()

    threading.Thread(target=probe, daemon=True).start()
    # Block the loop that started the server, as a long callback of the daemon would: the
    # answers come from the server's own thread meanwhile.
    assert answered.wait(20), "no answer while the daemon's loop was busy"
    assert answers == [200, 200]


async def test_async_checks_and_added_handlers_run_on_the_starting_loop(
    start_server: StartServer,
) -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    async def check() -> None:
        seen.append(asyncio.get_running_loop())

    async def handler(request: web.Request) -> web.Response:
        seen.append(asyncio.get_running_loop())
        return web.Response(text=request.match_info["name"])

    server = Server(registry=CollectorRegistry(), bind_address="127.0.0.1", port=0)
    server.add_get("/explain/{name}", handler)
    server.add_check("async", check)
    await server.start()
    try:
        assert (await fetch(server, "/healthz/async")).status == 200
        assert (await fetch(server, "/explain/web")).body == "web"
    finally:
        await server.stop()
    assert seen == [asyncio.get_running_loop()] * 2


async def test_closers_run_on_the_serving_thread_when_the_server_stops() -> None:
    closed_on: list[int] = []

    async def close() -> None:
        closed_on.append(threading.get_ident())

    server = Server(registry=CollectorRegistry(), bind_address="127.0.0.1", port=0)
    server.close_on_stop(close)
    await server.start()
    assert closed_on == []
    await server.stop()
    assert len(closed_on) == 1
    assert closed_on[0] != threading.get_ident()


async def test_duplicate_check_name_is_refused(start_server: StartServer) -> None:
    server = await start_server()
    server.add_check("a", passing)
    with pytest.raises(ValueError, match="already registered"):
        server.add_check("a", passing)


async def test_metrics_expose_the_registry_with_workqueue_series(
    start_server: StartServer,
) -> None:
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue("service", registry=registry)
    queue.add("ns/a")
    server = await start_server(registry=registry)
    reply = await fetch(server, "/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert 'workqueue_depth{name="service"} 1.0' in reply.body
    assert 'workqueue_adds_total{name="service"} 1.0' in reply.body
    assert 'workqueue_longest_running_processor_seconds{name="service"} 0.0' in reply.body


async def test_metrics_openmetrics_on_request(start_server: StartServer) -> None:
    server = await start_server()
    reply = await fetch(server, "/metrics", headers={"Accept": "application/openmetrics-text"})
    assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
    assert reply.body.endswith("# EOF\n")


def bearer_authorizer() -> Callable[[web.Request], Awaitable[Decision]]:
    async def authorize(request: web.Request) -> Decision:
        token = request.headers.get("Authorization", "")
        if not token:
            return Decision.unauthorized()
        if token != "Bearer prometheus":
            return Decision.forbidden('forbidden: User "bob" cannot get path "/metrics"')
        return Decision.allow()

    return authorize


@pytest.mark.parametrize(
    ("path", "token", "status"),
    [
        pytest.param("/metrics", None, 401, id="no-credentials-401"),
        pytest.param("/metrics", "Bearer bob", 403, id="not-allowed-403"),
        pytest.param("/metrics", "Bearer prometheus", 200, id="allowed-200"),
        pytest.param("/healthz", None, 200, id="health-always-allowed"),
    ],
)
async def test_metrics_authorizer(
    start_server: StartServer, path: str, token: str | None, status: int
) -> None:
    server = await start_server(authorizer=bearer_authorizer())
    headers = {"Authorization": token} if token else {}
    reply = await fetch(server, path, headers=headers)
    assert reply.status == status
    if status in (401, 403):
        assert '"kind": "Status"' in reply.body
        assert f'"code": {status}' in reply.body


async def test_generated_certificate_names_localhost_and_loopback(
    start_server: StartServer,
) -> None:
    server = await start_server()
    assert server.port > 0
    assert server.ca_pem is not None
    leaf = await _served_leaf(server)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert leaf.subject.rfc4514_string().startswith("CN=localhost@")


async def _served_leaf(server: Server) -> x509.Certificate:
    assert server.ca_pem is not None
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=context)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


async def test_untrusted_client_is_rejected(start_server: StartServer) -> None:
    server = await start_server()
    connector = aiohttp.TCPConnector(ssl=ssl.create_default_context())
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(server.url + "/healthz")


async def test_cert_dir_pair_is_written_then_reused(
    start_server: StartServer, tmp_path: Path
) -> None:
    first = await start_server(cert_dir=tmp_path)
    crt = tmp_path / "cloud-controller-manager.crt"
    key = tmp_path / "cloud-controller-manager.key"
    written = crt.read_bytes()
    assert key.stat().st_mode & 0o777 == 0o600
    assert (await fetch(first, "/healthz", cafile=crt)).status == 200
    second = await start_server(cert_dir=tmp_path)
    assert crt.read_bytes() == written
    assert (await fetch(second, "/healthz", cafile=crt)).status == 200


async def test_given_certificate_files_are_served(
    start_server: StartServer, tmp_path: Path
) -> None:
    pair = generate_self_signed("127.0.0.1", now=REAL_CLOCK.now())
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    (tmp_path / "ca.crt").write_bytes(pair.ca_pem)
    server = await start_server(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key")
    assert server.ca_pem is None
    assert (await fetch(server, "/healthz", cafile=tmp_path / "ca.crt")).body == "ok"


async def test_plain_http_when_tls_is_off(start_server: StartServer) -> None:
    server = await start_server(tls=False)
    assert server.url.startswith("http://127.0.0.1:")
    assert (await fetch(server, "/livez")).body == "ok"


# -- --authorization-always-allow-paths ----------------------------------------------------------

DEFAULT_ALLOW = ("/healthz", "/readyz", "/livez")


@pytest.mark.parametrize(
    ("allow", "path", "status"),
    [
        pytest.param(DEFAULT_ALLOW, "/healthz", 200, id="default-health-open"),
        pytest.param(DEFAULT_ALLOW, "/readyz/ping", 200, id="default-covers-per-check-paths"),
        pytest.param(DEFAULT_ALLOW, "/metrics", 401, id="default-metrics-needs-credentials"),
        pytest.param(
            (*DEFAULT_ALLOW, "/metrics"), "/metrics", 200, id="listed-metrics-open-anonymously"
        ),
        pytest.param(("/metrics",), "/healthz", 401, id="unlisted-health-needs-credentials"),
        pytest.param(("/live*",), "/livez", 200, id="trailing-star-is-a-prefix"),
        pytest.param(("/live*",), "/readyz", 401, id="prefix-does-not-match-others"),
        pytest.param((), "/livez", 401, id="empty-list-protects-everything"),
    ],
)
async def test_always_allow_paths_skip_authentication_and_authorization(
    start_server: StartServer, allow: tuple[str, ...], path: str, status: int
) -> None:
    server = await start_server(authorizer=bearer_authorizer(), always_allow_paths=allow)
    assert (await fetch(server, path)).status == status


def test_listen_address_names_the_bound_address() -> None:
    server = Server(registry=CollectorRegistry(), bind_address="0.0.0.0", port=0)
    server._port = 10258
    assert server.listen_address == "0.0.0.0:10258"
    server.bind_address = "::"
    assert server.listen_address == "[::]:10258"


# -- TLS options ---------------------------------------------------------------------------------


def _client(server: Server, *, maximum: ssl.TLSVersion, ciphers: str = "") -> ssl.SSLContext:
    assert server.ca_pem is not None
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    context.maximum_version = maximum
    if ciphers:
        context.set_ciphers(ciphers)
    return context


async def _handshake(server: Server, context: ssl.SSLContext) -> tuple[str, str] | None:
    """(protocol, cipher) negotiated, or None when the server refused the handshake."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=context)
    except (ssl.SSLError, ConnectionResetError):
        return None
    cipher = writer.get_extra_info("ssl_object").cipher()
    writer.close()
    await writer.wait_closed()
    return cipher[1], cipher[0]


async def test_tls_min_version_refuses_older_clients(start_server: StartServer) -> None:
    server = await start_server(tls_options=ServingTLS(min_version="VersionTLS13"))
    assert await _handshake(server, _client(server, maximum=ssl.TLSVersion.TLSv1_2)) is None
    negotiated = await _handshake(server, _client(server, maximum=ssl.TLSVersion.TLSv1_3))
    assert negotiated is not None
    assert negotiated[0] == "TLSv1.3"


async def test_tls_cipher_suites_limit_what_tls12_clients_get(start_server: StartServer) -> None:
    server = await start_server(
        tls_options=ServingTLS(cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",))
    )
    tls12 = ssl.TLSVersion.TLSv1_2
    refused = _client(server, maximum=tls12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
    assert await _handshake(server, refused) is None
    accepted = _client(server, maximum=tls12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384")
    assert await _handshake(server, accepted) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")


async def test_permit_port_sharing_lets_two_servers_bind_one_port(
    start_server: StartServer,
) -> None:
    first = await start_server(reuse_port=True)
    second = await start_server(port=first.port, reuse_port=True)
    assert second.port == first.port


async def test_a_taken_port_fails_with_address_in_use(start_server: StartServer) -> None:
    first = await start_server()
    with pytest.raises(OSError, match="in use") as info:
        await start_server(port=first.port)
    assert info.value.errno == errno.EADDRINUSE


async def _served_to(server: Server, server_name: str) -> x509.Certificate:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # only look at it
    _, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=context, server_hostname=server_name
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


def _cn(certificate: x509.Certificate) -> str:
    return str(certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


@pytest.mark.parametrize(
    ("server_name", "served"),
    [
        pytest.param("metrics.example", "metrics.example", id="exact-name-from-the-flag"),
        pytest.param("a.apps.example", "wild", id="wildcard-matches-one-label"),
        pytest.param("a.b.apps.example", "localhost", id="wildcard-not-two-labels"),
        pytest.param("san.example", "san.example", id="names-from-the-certificate-sans"),
        pytest.param("other.example", "localhost", id="no-match-gets-the-default"),
    ],
)
async def test_sni_pairs_are_chosen_by_server_name(
    start_server: StartServer, tmp_path: Path, server_name: str, served: str
) -> None:
    ca = CertificateAuthority()
    pairs = []
    for name, hosts, names in (
        ("metrics", ("metrics.example",), ("METRICS.example",)),
        ("wild", ("wild",), ("*.apps.example",)),
        ("san", ("san.example", "alt.example"), ()),
    ):
        pair = ca.serving(hosts)
        (tmp_path / f"{name}.crt").write_bytes(pair.cert_pem)
        (tmp_path / f"{name}.key").write_bytes(pair.key_pem)
        entry = f"{tmp_path / name}.crt,{tmp_path / name}.key"
        pairs.append(NamedCertKey.parse(entry + (":" + ",".join(names) if names else "")))
    server = await start_server(tls_options=ServingTLS(sni=tuple(pairs)))
    assert _cn(await _served_to(server, server_name)).split("@")[0] == served
