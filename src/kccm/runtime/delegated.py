"""Delegated authentication and authorization for the daemon's HTTPS endpoints.

As the apiserver's delegating authenticator/authorizer used by every control-plane
component: a bearer token is checked with a TokenReview, the user's access to the
non-resource path with a SubjectAccessReview. A request without credentials is
``system:anonymous`` (group ``system:unauthenticated``), which the authorizer then judges;
a token the apiserver rejects is 401; groups in ``always_allow_groups`` (``system:masters``)
skip the review. Answers are cached for 10 s (upstream's webhook cache TTLs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from aiohttp import web

from kccm.kube.errors import KubeError
from kccm.kube.interface import KubeClient
from kccm.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from kccm.runtime.server import Decision
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["DelegatedAuth", "UserInfo"]

_log = logging.getLogger(__name__)
ANONYMOUS = "system:anonymous"
CACHE_TTL = 10.0


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


_ANONYMOUS_USER = UserInfo(ANONYMOUS, ("system:unauthenticated",))


@dataclass
class DelegatedAuth:
    """An :data:`kccm.runtime.server.Authorizer` backed by the API server."""

    client: KubeClient
    always_allow_groups: tuple[str, ...] = ("system:masters",)
    clock: Clock = REAL_CLOCK
    ttl: float = CACHE_TTL
    _tokens: dict[str, tuple[float, UserInfo | None]] = field(default_factory=dict)
    _access: dict[tuple[UserInfo, str, str], tuple[float, bool]] = field(default_factory=dict)

    async def __call__(self, request: web.Request) -> Decision:
        try:
            user = await self._authenticate(request)
            if user is None:
                return Decision.unauthorized()
            if await self._authorized(user, request.path, request.method.lower()):
                return Decision.allow()
        except KubeError as exc:
            _log.warning("delegated auth for %s failed: %s", request.path, exc)
            return Decision(False, 500, "authorization check failed")
        return Decision.forbidden(
            f'forbidden: User "{user.name}" cannot {request.method.lower()} path "{request.path}"'
        )

    async def _authenticate(self, request: web.Request) -> UserInfo | None:
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("bearer "):
            return _ANONYMOUS_USER
        token = header[7:].strip()
        cached = self._tokens.get(token)
        if cached is not None and cached[0] > self.clock.monotonic():
            return cached[1]
        user = await self._token_review(token)
        self._tokens[token] = (self.clock.monotonic() + self.ttl, user)
        return user

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
        self._access[key] = (self.clock.monotonic() + self.ttl, allowed)
        return allowed

    async def _access_review(self, user: UserInfo, path: str, verb: str) -> bool:
        spec: dict[str, object] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        review = await self.client.create(
            SUBJECT_ACCESS_REVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
        )
        return bool((review.get("status") or {}).get("allowed"))
