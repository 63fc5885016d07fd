"""kccm's own API error hierarchy. The client library's exception is chained as ``__cause__``.

Mapping follows apimachinery's ``k8s.io/apimachinery/pkg/api/errors``: the HTTP code decides
the class, and for 409 the Status reason separates AlreadyExists from Conflict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "KubeError",
    "MethodNotAllowed",
    "NotFound",
    "ServerTimeout",
    "StatusCause",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "error_from_status",
]


class KubeError(Exception):
    """Anything that went wrong talking to the API server."""


class TransportError(KubeError):
    """The request did not get an HTTP answer (connection refused, reset, TLS, timeout)."""


@dataclass(frozen=True, slots=True)
class StatusCause:
    """One field-level cause from a Status' details (``Invalid`` carries these)."""

    field: str
    reason: str
    message: str


class ApiError(KubeError):
    """The API server answered with a failure Status."""

    code: int = 0

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        causes: tuple[StatusCause, ...] = (),
        retry_after: float | None = None,
        status: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.reason = reason
        self.causes = causes
        self.retry_after = retry_after
        self.status: Mapping[str, Any] = status or {}

    def __str__(self) -> str:
        return f"{self.message} ({self.code} {self.reason})" if self.reason else self.message


class BadRequest(ApiError):
    code = 400


class Unauthorized(ApiError):
    code = 401


class Forbidden(ApiError):
    code = 403


class NotFound(ApiError):
    code = 404


class MethodNotAllowed(ApiError):
    code = 405


class Conflict(ApiError):
    """409: a write lost an optimistic-concurrency race or a precondition did not hold."""

    code = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: create of a name that is taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old (compacted); relist."""

    code = 410


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` names the fields."""

    code = 422


class TooManyRequests(ApiError):
    """429: throttled; ``retry_after`` seconds when the server said so."""

    code = 429


class InternalError(ApiError):
    code = 500


class ServerTimeout(ApiError):
    """504 / reason Timeout or ServerTimeout: the server gave up; safe to retry."""

    code = 504


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    504: ServerTimeout,
}
_BY_REASON: dict[str, type[ApiError]] = {
    "AlreadyExists": AlreadyExists,
    "Expired": Gone,
    "Gone": Gone,
    "Timeout": ServerTimeout,
    "ServerTimeout": ServerTimeout,
}


def _causes(details: Mapping[str, Any]) -> tuple[StatusCause, ...]:
    return tuple(
        StatusCause(
            field=str(c.get("field", "")),
            reason=str(c.get("reason", "")),
            message=str(c.get("message", "")),
        )
        for c in details.get("causes") or ()
    )


def error_from_status(
    status: Mapping[str, Any], *, http_code: int = 0, retry_after: float | None = None
) -> ApiError:
    """Build the matching ApiError from a metav1.Status body (or the HTTP code alone)."""
    code = int(status.get("code") or http_code or 0)
    reason = str(status.get("reason") or "")
    details = status.get("details") or {}
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
    if retry_after is None and details.get("retryAfterSeconds"):
        retry_after = float(details["retryAfterSeconds"])
    message = str(status.get("message") or f"the server answered HTTP {code}")
    return cls(
        message,
        code=code,
        reason=reason,
        causes=_causes(details),
        retry_after=retry_after,
        status=status,
    )
