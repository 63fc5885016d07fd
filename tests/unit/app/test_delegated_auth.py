"""Delegated authn/authz decisions, against a stub that answers reviews like the apiserver."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import make_mocked_request
from cryptography import x509
from multidict import CIMultiDict, CIMultiDictProxy
from prometheus_client import CollectorRegistry

from kccm.runtime.delegated import (
    CACHE_LIMIT,
    ClientCertificates,
    DelegatedAuth,
    RequestHeaders,
)
from kccm.runtime.server import Server
from kccm.runtime.tls import ServingTLS
from kccm.testing.certs import CertificateAuthority, KeyPair
from kccm.util.clock import FakeClock

USERS = {"good": ("alice", ["devs"]), "admin": ("root", ["system:masters"])}
ALLOWED = {("alice", "/metrics")}


class ReviewStub:
    def __init__(self) -> None:
        self.reviews: list[str] = []

    async def create(self, resource: Any, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.reviews.append(obj["kind"])
        spec = obj["spec"]
        if obj["kind"] == "TokenReview":
            user = USERS.get(spec["token"])
            if user is None:
                return {**obj, "status": {"authenticated": False}}
            return {
                **obj,
                "status": {"authenticated": True, "user": {"username": user[0], "groups": user[1]}},
            }
        path = spec["nonResourceAttributes"]["path"]
        return {**obj, "status": {"allowed": (spec["user"], path) in ALLOWED}}


def _request(token: str | None, path: str = "/metrics") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return make_mocked_request("GET", path, headers=headers)


@dataclass
class _Bare:
    """What DelegatedAuth reads of a request (headers, method, path, transport), for tests
    that make thousands: make_mocked_request's mocks cost ~3 ms each."""

    headers: CIMultiDictProxy[str]
    path: str
    method: str = "GET"
    transport: None = None


def _bare(token: str | None, path: str = "/metrics") -> Any:
    headers = CIMultiDict({"Authorization": f"Bearer {token}"} if token else {})
    return _Bare(CIMultiDictProxy(headers), path)


@pytest.mark.parametrize(
    ("token", "status", "reviews"),
    [
        pytest.param(None, 403, ["SubjectAccessReview"], id="anonymous-is-judged-and-refused"),
        pytest.param("bogus", 401, ["TokenReview"], id="rejected-token-is-401"),
        pytest.param("good", 200, ["TokenReview", "SubjectAccessReview"], id="granted-user"),
        pytest.param("admin", 200, ["TokenReview"], id="system-masters-skips-the-review"),
    ],
)
async def test_decisions(token: str | None, status: int, reviews: list[str]) -> None:
    stub = ReviewStub()
    auth = DelegatedAuth(stub, clock=FakeClock())  # type: ignore[arg-type]
    decision = await auth(_request(token))
    assert decision.status == status
    assert stub.reviews == reviews


async def test_answers_are_cached_for_ten_seconds() -> None:
    stub, clock = ReviewStub(), FakeClock()
    auth = DelegatedAuth(stub, clock=clock)  # type: ignore[arg-type]
    for _ in range(3):
        assert (await auth(_request("good"))).allowed
    assert len(stub.reviews) == 2
    await clock.advance(11)
    await auth(_request("good"))
    assert len(stub.reviews) == 4


@pytest.mark.parametrize(
    ("ttl", "allowed_ttl", "denied_ttl", "token", "reviews_after_three"),
    [
        pytest.param(0.0, 10.0, 10.0, "good", 4, id="token-cache-off-reviews-each-token"),
        pytest.param(10.0, 0.0, 10.0, "good", 4, id="authorized-cache-off-reviews-each-access"),
        pytest.param(10.0, 10.0, 0.0, None, 3, id="unauthorized-cache-off-reviews-each-denial"),
        pytest.param(10.0, 10.0, 10.0, None, 1, id="denials-cached-by-default"),
    ],
)
async def test_cache_ttl_flags(
    ttl: float, allowed_ttl: float, denied_ttl: float, token: str | None, reviews_after_three: int
) -> None:
    stub = ReviewStub()
    auth = DelegatedAuth(
        stub,  # type: ignore[arg-type]
        clock=FakeClock(),
        ttl=ttl,
        allowed_ttl=allowed_ttl,
        denied_ttl=denied_ttl,
    )
    for _ in range(3):
        await auth(_request(token))
    assert len(stub.reviews) == reviews_after_three


# -- client certificates and request headers, over a real TLS connection -------------------------


class SpecStub(ReviewStub):
    def __init__(self) -> None:
        super().__init__()
        self.specs: list[dict[str, Any]] = []

    async def create(self, resource: Any, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.specs.append(dict(obj["spec"]))
        return await super().create(resource, obj)


@dataclass
class Pki:
    client_ca: CertificateAuthority
    proxy_ca: CertificateAuthority
    stranger_ca: CertificateAuthority
    tmp: Path

    def files(self, name: str, pair: KeyPair) -> tuple[Path, Path]:
        cert, key = self.tmp / f"{name}.crt", self.tmp / f"{name}.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        return cert, key


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(
        CertificateAuthority("client-ca"),
        CertificateAuthority("front-proxy-ca"),
        CertificateAuthority("stranger-ca"),
        tmp_path,
    )


@pytest.fixture
async def cert_server(pki: Pki) -> AsyncIterator[tuple[Server, SpecStub]]:
    stub = SpecStub()
    auth = DelegatedAuth(
        stub,  # type: ignore[arg-type]
        clock=FakeClock(),
        client_certificates=ClientCertificates((_cert(pki.client_ca),)),
        request_headers=RequestHeaders(cas=(_cert(pki.proxy_ca),), allowed_names=("front-proxy",)),
    )
    bundle = pki.client_ca.cert_pem + pki.proxy_ca.cert_pem
    server = Server(
        registry=CollectorRegistry(),
        bind_address="127.0.0.1",
        port=0,
        authorizer=auth,
        tls_options=ServingTLS(client_ca_pem=bundle),
    )
    await server.start()
    yield server, stub
    await server.stop()


def _cert(ca: CertificateAuthority) -> x509.Certificate:
    return x509.load_pem_x509_certificate(ca.cert_pem)


async def _get(
    server: Server, cert: tuple[Path, Path] | None, headers: dict[str, str] | None = None
) -> int:
    assert server.ca_pem is not None
    context = ssl.create_default_context(cadata=server.ca_pem.decode())
    if cert is not None:
        context.load_cert_chain(*cert)
    connector = aiohttp.TCPConnector(ssl=context)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(server.url + "/metrics", headers=headers or {}) as response,
    ):
        return response.status


PROXY_HEADERS = {
    "X-Remote-User": "alice",
    "X-Remote-Group": "devs",
    "X-Remote-Extra-Scopes": "read",
}


@pytest.mark.parametrize(
    ("who", "headers", "status", "reviewed"),
    [
        pytest.param(
            ("client", "alice", ("devs",)),
            {},
            200,
            ("alice", ["devs", "system:authenticated"]),
            id="client-cert-user-is-cn-groups-are-o",
        ),
        pytest.param(
            ("client", "root", ("system:masters",)), {}, 200, None, id="client-cert-masters"
        ),
        pytest.param(
            ("client", "bob", ()),
            PROXY_HEADERS,
            403,
            ("bob", ["system:authenticated"]),
            id="headers-from-a-non-proxy-cert-are-ignored",
        ),
        pytest.param(
            ("proxy", "front-proxy", ()),
            PROXY_HEADERS,
            200,
            ("alice", ["devs", "system:authenticated"]),
            id="proxy-cert-vouches-for-header-user",
        ),
        pytest.param(
            ("proxy", "sneaky-proxy", ()), PROXY_HEADERS, 401, None, id="proxy-cn-not-allowed-401"
        ),
        pytest.param(
            ("proxy", "front-proxy", ()),
            {},
            403,
            ("system:anonymous", ["system:unauthenticated"]),
            id="proxy-cert-without-user-header-is-anonymous",
        ),
        pytest.param(
            None,
            {},
            403,
            ("system:anonymous", ["system:unauthenticated"]),
            id="no-cert-is-anonymous",
        ),
    ],
)
async def test_certificate_authentication(
    pki: Pki,
    cert_server: tuple[Server, SpecStub],
    who: tuple[str, str, tuple[str, ...]] | None,
    headers: dict[str, str],
    status: int,
    reviewed: tuple[str, list[str]] | None,
) -> None:
    server, stub = cert_server
    files = None
    if who is not None:
        kind, user, groups = who
        ca = pki.client_ca if kind == "client" else pki.proxy_ca
        files = pki.files(user, ca.client(user, groups))
    assert await _get(server, files, headers) == status
    specs = [spec for spec in stub.specs if "nonResourceAttributes" in spec]
    if reviewed is None:
        assert specs == []
        return
    assert [(spec["user"], spec["groups"]) for spec in specs] == [reviewed]
    if reviewed[0] == "alice" and headers:
        assert specs[0]["extra"] == {"scopes": ["read"]}


async def test_a_certificate_from_an_unknown_ca_fails_the_handshake(
    pki: Pki, cert_server: tuple[Server, SpecStub]
) -> None:
    server, stub = cert_server
    files = pki.files("eve", pki.stranger_ca.client("eve"))
    with pytest.raises(aiohttp.ClientError):
        await _get(server, files)
    assert stub.specs == []


async def test_access_reviews_go_through_the_authorization_client() -> None:
    authn, authz = ReviewStub(), ReviewStub()
    auth = DelegatedAuth(authn, authz_client=authz, clock=FakeClock())  # type: ignore[arg-type]
    assert (await auth(_request("good"))).allowed
    assert authn.reviews == ["TokenReview"]
    assert authz.reviews == ["SubjectAccessReview"]


async def test_random_tokens_and_paths_cannot_grow_the_caches_without_bound() -> None:
    stub = ReviewStub()
    auth = DelegatedAuth(stub, clock=FakeClock())  # type: ignore[arg-type]
    for i in range(CACHE_LIMIT + 50):
        await auth(_bare(f"random-{i}"))
        await auth(_bare(None, path=f"/metrics/{i}"))
    assert len(auth._tokens) <= CACHE_LIMIT
    assert len(auth._access) <= CACHE_LIMIT
    before = len(stub.reviews)
    await auth(_bare(f"random-{CACHE_LIMIT + 49}"))  # the newest answers stay cached
    assert len(stub.reviews) == before


@pytest.mark.parametrize(
    ("headers", "status", "reviews"),
    [
        pytest.param(
            {"X-Kccm-Authorization": "Bearer good"},
            200,
            ["TokenReview", "SubjectAccessReview"],
            id="a-token-forwarded-through-the-pod-proxy-is-reviewed-like-any-other",
        ),
        pytest.param(
            {"X-Kccm-Authorization": "Bearer bogus"},
            401,
            ["TokenReview"],
            id="a-forwarded-bad-token-is-401",
        ),
        pytest.param(
            {"Authorization": "Bearer bogus", "X-Kccm-Authorization": "Bearer good"},
            401,
            ["TokenReview"],
            id="authorization-wins-over-the-forwarded-header",
        ),
    ],
)
async def test_forwarded_token_header(
    headers: dict[str, str], status: int, reviews: list[str]
) -> None:
    stub = ReviewStub()
    auth = DelegatedAuth(stub, clock=FakeClock())  # type: ignore[arg-type]
    decision = await auth(make_mocked_request("GET", "/metrics", headers=headers))
    assert decision.status == status
    assert stub.reviews == reviews
