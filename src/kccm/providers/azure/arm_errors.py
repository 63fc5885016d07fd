"""ARM's error answers as typed exceptions.

ARM answers an error with a status and ``{"error": {"code": ..., "message": ...}}``
(azure-rest-api-specs, ``common-types/resource-management/v5/types.json`` ``ErrorResponse``).
:func:`arm_error` maps them:

- ``404`` -> :class:`ARMNotFound` (the resource, or its resource group, does not exist);
- ``412`` -> :class:`ARMPreconditionFailed` (the ``If-Match`` ETag is stale);
- ``429`` -> :class:`ARMThrottled`, a :class:`~kccm.cloudprovider.Throttled` carrying
  ``Retry-After``: the call gate pauses that group of provider calls;
- a quota code (``QuotaExceeded``, ``*LimitReached``, ``*LimitExceeded``, ``*CountLimit*``)
  -> :class:`ARMQuotaExceeded`;
- ``401``/``403`` -> :class:`ARMPermissionDenied` (``AuthorizationFailed``: the identity lacks
  a role assignment; ``InvalidAuthenticationToken``: the token was refused);
- ``409`` -> :class:`ARMConflict` (``AnotherOperationInProgress``,
  ``InUseSubnetCannotBeDeleted``...);
- anything else -> :class:`ARMError`. ``status`` is 0 when no answer came (transport error).

Every exception carries ``code`` (ARM's error code, ``""`` if none) and ``status``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError, PermissionDenied, QuotaExceeded, Throttled

__all__ = [
    "ARMConflict",
    "ARMError",
    "ARMNotFound",
    "ARMOperationFailed",
    "ARMPermissionDenied",
    "ARMPreconditionFailed",
    "ARMQuotaExceeded",
    "ARMThrottled",
    "arm_error",
    "error_body",
]

_QUOTA_CODE = re.compile(r"quota|limitreached|limitexceeded|countlimit", re.IGNORECASE)


class ARMError(CloudProviderError):
    """An ARM call failed: ``status`` (0: no answer), ARM's ``code`` and message."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class ARMNotFound(ARMError):
    """``404``: the resource does not exist."""


class ARMPreconditionFailed(ARMError):
    """``412``: the resource changed since it was read (its ETag no longer matches)."""


class ARMConflict(ARMError):
    """``409``: ARM refuses the change in the resource's present state."""


class ARMOperationFailed(ARMError):
    """A long-running operation ended ``Failed`` or ``Canceled``."""


class ARMQuotaExceeded(ARMError, QuotaExceeded):
    """A subscription quota or a service limit refused the request."""


class ARMPermissionDenied(ARMError, PermissionDenied):
    """``401``/``403``: the identity kccm signs in as may not make this call."""


class ARMThrottled(ARMError, Throttled):
    """``429`` (or ARM's remaining-requests counter at 0): pause, ``retry_after`` seconds when
    ARM said so."""

    def __init__(
        self, message: str, *, retry_after: float | None, status: int = 429, code: str = ""
    ) -> None:
        ARMError.__init__(self, message, status=status, code=code)
        self.retry_after = retry_after


def error_body(body: Any) -> tuple[str, str]:
    """``(code, message)`` of an ARM error body (``{"error": {...}}``, or the bare object)."""
    if not isinstance(body, Mapping):
        return "", ""
    inner = body.get("error") if isinstance(body.get("error"), Mapping) else body
    assert isinstance(inner, Mapping)
    return str(inner.get("code") or ""), str(inner.get("message") or "")


def arm_error(
    status: int, body: Any, what: str, *, retry_after: float | None = None, text: str = ""
) -> ARMError:
    """The exception for an error answer (see the module doc); ``what`` names the call."""
    code, message = error_body(body)
    detail = f"{code}: {message}" if code else (message or text.strip()[:300] or "no details")
    line = f"{what}: HTTP {status}: {detail}"
    if status == 404:
        return ARMNotFound(line, status=status, code=code)
    if status == 412:
        return ARMPreconditionFailed(line, status=status, code=code)
    if status == 429:
        return ARMThrottled(f"ARM throttled {line}", retry_after=retry_after, code=code)
    if code and _QUOTA_CODE.search(code):
        return ARMQuotaExceeded(f"ARM quota: {line}", status=status, code=code)
    if status in (401, 403):
        return ARMPermissionDenied(f"ARM permission denied: {line}", status=status, code=code)
    if status == 409:
        return ARMConflict(line, status=status, code=code)
    return ARMError(line, status=status, code=code)
