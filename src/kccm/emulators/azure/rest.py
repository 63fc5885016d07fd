"""What every module of the Azure emulator shares: the world's key on the application, JSON
bodies and replies, the ``api-version`` check and injected latency.

``api-version`` is required on every ARM call (``MissingApiVersionParameter``), and must be
one the resource provider serves (``NoRegisteredProviderFound``): the versions
cloud-provider-azure v1.36.5 sends (armcompute/v7: 2025-04-01, armnetwork/v9: 2025-05-01 and
2018-10-01 for scale-set NICs, armresources: 2021-04-01, and its Azure Stack versions), those
the Python SDKs send (azure-mgmt-compute 39: 2026-04-01, azure-mgmt-network 33: 2026-03-01),
and a few in between. A test may serve more (``set_config(extra_api_versions=...)``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.world import World

__all__ = [
    "API_VERSIONS",
    "WORLD",
    "Handler",
    "check_api_version",
    "json_body",
    "pause",
    "reply",
]

WORLD = web.AppKey("world", World)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

API_VERSIONS: dict[str, frozenset[str]] = {
    "microsoft.compute": frozenset(
        {
            "2017-12-01",
            "2019-03-01",
            "2019-07-01",
            "2020-06-01",
            "2022-03-01",
            "2022-08-01",
            "2023-03-01",
            "2023-07-01",
            "2023-09-01",
            "2024-03-01",
            "2024-07-01",
            "2024-11-01",
            "2025-04-01",
            "2026-04-01",
        }
    ),
    "microsoft.network": frozenset(
        {
            "2017-10-01",
            "2018-10-01",
            "2018-11-01",
            "2020-08-01",
            "2022-07-01",
            "2023-09-01",
            "2024-05-01",
            "2024-07-01",
            "2025-01-01",
            "2025-05-01",
            "2026-03-01",
        }
    ),
    "microsoft.resources": frozenset({"2021-04-01", "2022-09-01", "2024-03-01", "2024-11-01"}),
}


def check_api_version(request: web.Request, namespace: str, type_: str) -> str:
    """The call's ``api-version``, or ARM's 400 when it is missing or not served."""
    version = request.query.get("api-version", "")
    if not version:
        raise ArmError(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        )
    world = request.app[WORLD]
    served = API_VERSIONS.get(namespace.lower(), frozenset())
    if version in served or version in world.extra_api_versions:
        return version
    raise ArmError(
        400,
        "NoRegisteredProviderFound",
        f"No registered resource provider found for location '{world.location}' and API "
        f"version '{version}' for type '{type_}'. The supported api-versions are "
        f"'{', '.join(sorted(served, reverse=True))}'. The supported locations are "
        f"'{world.location}'.",
    )


def reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    if body is None:
        return web.Response(status=status, headers=headers)
    return web.Response(
        status=status,
        text=json.dumps(body),
        content_type="application/json",
        headers=headers,
    )


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object, or ARM's 400 for a malformed one."""
    raw = await request.read()
    try:
        found = json.loads(raw or b"{}")
    except ValueError as exc:
        message = f"The request content was invalid: {exc}"
        raise ArmError(400, "InvalidRequestContent", message) from exc
    if not isinstance(found, dict):
        raise ArmError(400, "InvalidRequestContent", "The request content must be an object.")
    return found


async def pause(seconds: float) -> None:
    """Injected latency (a real wait on the server's clock)."""
    if seconds > 0:
        await asyncio.sleep(seconds)
