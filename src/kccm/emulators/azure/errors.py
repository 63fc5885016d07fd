"""ARM's error answers: ``{"error": {"code", "message"[, "details"]}}`` with the status ARM
uses, in the texts ARM writes (as recorded against Azure in cloud-provider-azure v1.36.5's
``pkg/azclient/*/testdata/AZURECLOUD.yaml``).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

__all__ = [
    "ArmError",
    "arm_response",
    "child_not_found",
    "group_not_found",
    "invalid_reference",
    "not_found",
]


class ArmError(Exception):
    """An ARM error: raised by a handler, answered by the application's middleware."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        target: str = "",
    ) -> None:
        super().__init__(message)
        self.target = target
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        if self.details:
            error["details"] = self.details
        return {"error": error}


def arm_response(error: ArmError) -> web.Response:
    return web.Response(
        status=error.status,
        text=json.dumps(error.body()),
        content_type="application/json",
        headers=error.headers,
    )


def group_not_found(group: str) -> ArmError:
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{group}' could not be found.")


def not_found(type_: str, name: str, group: str) -> ArmError:
    """ARM's 404 for a top-level resource (``type_``: ``Microsoft.Network/loadBalancers``)."""
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{type_}/{name}' under resource group '{group}' was not found. "
        "For more details please go to https://aka.ms/ARMResourceNotFoundFix",
    )


def child_not_found(resource_id: str) -> ArmError:
    """The network resource provider's 404 for a child (a route, a subnet, a pool)."""
    return ArmError(404, "NotFound", f"Resource {resource_id} not found.")


def invalid_reference(target: str, source: str) -> ArmError:
    return ArmError(
        400,
        "InvalidResourceReference",
        f"Resource {target} referenced by resource {source} was not found. Please make sure "
        "that the referenced resource exists, and that both resources are in the same region.",
    )
