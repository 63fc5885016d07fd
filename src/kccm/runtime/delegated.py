"""Delegated authentication and authorization for the daemon's HTTPS endpoints.

As the apiserver's delegating authenticator/authorizer used by every control-plane
component, authenticators are tried in upstream's order:

1. request headers (``--requestheader-*``): a client certificate issued by a request-header
   CA (and, when ``allowed_names`` is set, with one of those common names) vouches for the
   user named in ``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-*``;
2. client certificates (``--client-ca-file``): user = common name, groups = organisations;
3. a bearer token, checked with a TokenReview;
4. otherwise the request is ``system:anonymous`` (group ``system:unauthenticated``).

A failed authenticator (a rejected token, a request-header certificate with a name that is
not allowed) answers 401. The user's access to the non-resource path is then checked with a
SubjectAccessReview; groups in ``always_allow_groups`` (``system:masters``) skip it. Review
answers are cached (``token_ttl``, ``allowed_ttl``, ``denied_ttl``: upstream's webhook cache
TTL flags; 0 disables a cache).

Client certificates are verified by the TLS layer against the union of both CA bundles; the
bundle that issued the leaf decides which authenticator applies (so a certificate must be
issued directly by a CA of the bundle, not through an intermediate).
"""

from __future__ import annotations

import logging
import ssl
import urllib.parse
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from kccm.kube.errors import KubeError
from kccm.kube.interface import KubeClient
from kccm.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from kccm.runtime.server import Decision
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "FORWARDED_TOKEN",
    "ClientCertificates",
    "DelegatedAuth",
    "RequestHeaders",
    "UserInfo",
]

_log = logging.getLogger(__name__)
ANONYMOUS = "system:anonymous"
AUTHENTICATED = "system:authenticated"
CACHE_TTL = 10.0
FORWARDED_TOKEN = "X-Kccm-Authorization"
"""A bearer token in this header counts as one in ``Authorization`` (which must then be
absent). The apiserver's pod proxy removes the caller's ``Authorization`` header before it
forwards a request, so ``kccm explain`` sends the user's token here: kccm checks it with a
TokenReview like any other and the user's own RBAC decides. Nothing else is trusted from it."""


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


_ANONYMOUS_USER = UserInfo(ANONYMOUS, ("system:unauthenticated",))


class _Refused(Exception):
    """An authenticator recognised the credentials and rejected them (401)."""


@dataclass(frozen=True)
class ClientCertificates:
    """``--client-ca-file``: certificates issued by one of ``cas`` authenticate their CN."""

    cas: tuple[x509.Certificate, ...] = ()


@dataclass(frozen=True)
class RequestHeaders:
    """``--requestheader-*``: an authenticating proxy's certificate vouches for the headers."""

    cas: tuple[x509.Certificate, ...] = ()
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


def _issued_by_any(leaf: x509.Certificate, cas: tuple[x509.Certificate, ...]) -> bool:
    for ca in cas:
        try:
            leaf.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _peer_certificate(request: web.Request) -> x509.Certificate | None:
    """The client's certificate, when the TLS layer verified one."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(ssl_object, ssl.SSLObject):
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der) if der else None


def _attributes(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(attribute.value) for attribute in name.get_attributes_for_oid(oid)]


def _header_values(request: web.Request, names: tuple[str, ...]) -> list[str]:
    return [value for name in names for value in request.headers.getall(name, []) if value]


def _extra(
    request: web.Request, prefixes: tuple[str, ...]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    found: dict[str, list[str]] = {}
    for header, value in request.headers.items():
        for prefix in prefixes:
            if header.lower().startswith(prefix.lower()) and len(header) > len(prefix):
                key = urllib.parse.unquote(header[len(prefix) :].lower())
                found.setdefault(key, []).append(value)
    return tuple((key, tuple(values)) for key, values in sorted(found.items()))


CACHE_LIMIT = 4096
"""Entries each review cache keeps at most: random bearer tokens or paths sent to the server
must not grow memory without bound."""

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def _remember(
    cache: dict[_K, tuple[float, _V]], key: _K, entry: tuple[float, _V], clock: Clock
) -> None:
    """Store ``entry``; a full cache first drops what expired, then its oldest entries."""
    if key not in cache and len(cache) >= CACHE_LIMIT:
        now = clock.monotonic()
        for stale in [k for k, (expires, _) in cache.items() if expires <= now]:
            del cache[stale]
        while len(cache) >= CACHE_LIMIT:
            del cache[next(iter(cache))]
    cache[key] = entry


@dataclass
class DelegatedAuth:
    """An :data:`kccm.runtime.server.Authorizer` backed by the API server."""

    client: KubeClient  # TokenReviews (and SubjectAccessReviews without ``authz_client``)
    authz_client: KubeClient | None = None
    always_allow_groups: tuple[str, ...] = ("system:masters",)
    clock: Clock = REAL_CLOCK
    ttl: float = CACHE_TTL  # TokenReview answers
    allowed_ttl: float = CACHE_TTL
    denied_ttl: float = CACHE_TTL
    client_certificates: ClientCertificates | None = None
    request_headers: RequestHeaders | None = None
    _tokens: dict[str, tuple[float, UserInfo | None]] = field(default_factory=dict)
    _access: dict[tuple[UserInfo, str, str], tuple[float, bool]] = field(default_factory=dict)

    async def __call__(self, request: web.Request) -> Decision:
        try:
            user = await self._authenticate(request)
            if user is None:
                return Decision.unauthorized()
            if await self._authorized(user, request.path, request.method.lower()):
                return Decision.allow()
        except _Refused as exc:
            return Decision.unauthorized(str(exc) or "Unauthorized")
        except KubeError as exc:
            _log.warning("delegated auth for %s failed: %s", request.path, exc)
            return Decision(False, 500, "authorization check failed")
        return Decision.forbidden(
            f'forbidden: User "{user.name}" cannot {request.method.lower()} path "{request.path}"'
        )

    async def _authenticate(self, request: web.Request) -> UserInfo | None:
        certificate = _peer_certificate(request)
        if certificate is not None:
            user = self._from_certificate(request, certificate)
            if user is not None:
                return user
        header = request.headers.get("Authorization") or request.headers.get(FORWARDED_TOKEN) or ""
        if not header.lower().startswith("bearer "):
            return _ANONYMOUS_USER
        token = header[7:].strip()
        cached = self._tokens.get(token)
        if cached is not None and cached[0] > self.clock.monotonic():
            return cached[1]
        user = await self._token_review(token)
        if self.ttl > 0:
            _remember(self._tokens, token, (self.clock.monotonic() + self.ttl, user), self.clock)
        return user

    def _from_certificate(
        self, request: web.Request, certificate: x509.Certificate
    ) -> UserInfo | None:
        headers, certs = self.request_headers, self.client_certificates
        if headers is not None and _issued_by_any(certificate, headers.cas):
            user = self._from_headers(request, certificate, headers)
            if user is not None:
                return user
        if certs is not None and _issued_by_any(certificate, certs.cas):
            names = _attributes(certificate.subject, NameOID.COMMON_NAME)
            if not names or not names[0]:
                raise _Refused("client certificate has no common name")
            groups = _attributes(certificate.subject, NameOID.ORGANIZATION_NAME)
            return UserInfo(names[0], (*groups, AUTHENTICATED))
        return None

    @staticmethod
    def _from_headers(
        request: web.Request, certificate: x509.Certificate, config: RequestHeaders
    ) -> UserInfo | None:
        common_names = _attributes(certificate.subject, NameOID.COMMON_NAME)
        if config.allowed_names and not set(common_names) & set(config.allowed_names):
            raise _Refused(
                f"request header client certificate {common_names[:1]} is not in "
                "--requestheader-allowed-names"
            )
        names = _header_values(request, config.username_headers)
        if not names:
            return None  # no user named: the next authenticator decides
        uids = _header_values(request, config.uid_headers)
        groups = _header_values(request, config.group_headers)
        return UserInfo(
            names[0],
            (*groups, AUTHENTICATED),
            uids[0] if uids else "",
            _extra(request, config.extra_headers_prefixes),
        )

    async def _token_review(self, token: str) -> UserInfo | None:
        review = await self.client.create(
            TOKEN_REVIEWS,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return UserInfo(
            str(user.get("username", "")), tuple(user.get("groups") or ()), str(user.get("uid", ""))
        )

    async def _authorized(self, user: UserInfo, path: str, verb: str) -> bool:
        if set(user.groups) & set(self.always_allow_groups):
            return True
        key = (user, path, verb)
        cached = self._access.get(key)
        if cached is not None and cached[0] > self.clock.monotonic():
            return cached[1]
        allowed = await self._access_review(user, path, verb)
        ttl = self.allowed_ttl if allowed else self.denied_ttl
        if ttl > 0:
            _remember(self._access, key, (self.clock.monotonic() + ttl, allowed), self.clock)
        return allowed

    async def _access_review(self, user: UserInfo, path: str, verb: str) -> bool:
        spec: dict[str, object] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {key: list(values) for key, values in user.extra}
        review = await (self.authz_client or self.client).create(
            SUBJECT_ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return bool((review.get("status") or {}).get("allowed"))
