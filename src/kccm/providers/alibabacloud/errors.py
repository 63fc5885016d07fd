"""Alibaba Cloud's error answers as typed exceptions.

An RPC API (ECS, VPC, SLB) answers an error with an HTTP status and
``{"RequestId", "Code", "Message", ...}``. :func:`api_error` maps them:

- a throttling code (``Throttling``, ``Throttling.User``, ``Throttling.Api``, ...,
  ``ServiceUnavailable``) or HTTP 429 -> :class:`AlibabaThrottled`, a
  :class:`~kccm.cloudprovider.Throttled`: the call gate pauses that method group and
  ``kccm explain`` says ``throttled`` (upstream retries throttled calls up to
  ``--max-throttling-retry-times`` in a row, ``util.IsThrottlingError`` looking for
  ``Throttling`` in the text, ``pkg/provider/alibaba/util/helper.go``);
- a quota code (``QuotaExceed*``, ``*.QuotaExceed*``, ``*LimitExceed*``) ->
  :class:`AlibabaQuotaExceeded` (``quota-exceeded``);
- a permission or credential code (``Forbidden*``, ``NoPermission``, ``InvalidAccessKeyId*``,
  ``SignatureDoesNotMatch``, ``InvalidSecurityToken*``, ...) or HTTP 401/403 ->
  :class:`AlibabaPermissionDenied` (``permission-denied``);
- anything else -> :class:`AlibabaError` (``cloud-api-error``), carrying ``code``, ``status``
  and the request ID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError, PermissionDenied, QuotaExceeded, Throttled

__all__ = [
    "AlibabaError",
    "AlibabaPermissionDenied",
    "AlibabaQuotaExceeded",
    "AlibabaThrottled",
    "api_error",
    "is_throttling_code",
]

_QUOTA = re.compile(r"quota.?exceed|limitexceed|exceed.*quota", re.IGNORECASE)
_PERMISSION_PREFIXES = (
    "Forbidden",
    "NoPermission",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidSecurityToken",
    "IncompleteSignature",
    "InvalidAccessKeySecret",
    "UnauthorizedOperation",
)


class AlibabaError(CloudProviderError):
    """An Alibaba Cloud call failed: ``status`` (0: no answer), ``code`` and ``request_id``."""

    def __init__(
        self, message: str, *, status: int = 0, code: str = "", request_id: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.request_id = request_id


class AlibabaThrottled(AlibabaError, Throttled):
    """Flow control refused the call: the call gate pauses the group."""

    def __init__(self, message: str, *, status: int = 0, code: str = "", request_id: str = ""):
        AlibabaError.__init__(self, message, status=status, code=code, request_id=request_id)
        self.retry_after = None


class AlibabaQuotaExceeded(AlibabaError, QuotaExceeded):
    """An account quota refused the call."""


class AlibabaPermissionDenied(AlibabaError, PermissionDenied):
    """The credential may not make the call, or was refused."""


def is_throttling_code(code: str) -> bool:
    """``Throttling`` and its sub-codes, and ``ServiceUnavailable``."""
    return code.startswith("Throttling") or code == "ServiceUnavailable"


def api_error(status: int, body: Any, what: str) -> AlibabaError:
    """The exception for an error answer; ``what`` names the call (``ecs:DescribeInstances``)."""
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = str(fields.get("Code") or "")
    message = str(fields.get("Message") or "")
    request_id = str(fields.get("RequestId") or "")
    detail = f"{code}: {message}" if code else (message or "no details")
    line = f"{what}: HTTP {status}: {detail}"
    if request_id:
        line += f" (RequestId {request_id})"
    kind, prefix = _kind(status, code)
    return kind(f"{prefix}{line}", status=status, code=code, request_id=request_id)


def _kind(status: int, code: str) -> tuple[type[AlibabaError], str]:
    if is_throttling_code(code) or status == 429:
        return AlibabaThrottled, "Alibaba Cloud flow control: "
    if _QUOTA.search(code):
        return AlibabaQuotaExceeded, "Alibaba Cloud quota: "
    if code.startswith(_PERMISSION_PREFIXES) or status in (401, 403):
        return AlibabaPermissionDenied, "Alibaba Cloud permission denied: "
    return AlibabaError, ""
