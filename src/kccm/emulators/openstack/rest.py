"""What every service module of the emulator shares: the world's key on the application, the
request's service and token, its JSON body, the JSON reply and injected latency.

The service modules (``keystone``, ``nova``, ``neutron*``, ``octavia*``, ``admin``,
``faults``) import this module; :mod:`kccm.emulators.openstack.app` imports them all and
assembles the application, so no service module imports the application.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.world import Token, World

__all__ = [
    "OPEN_PATHS",
    "SERVICES",
    "WORLD",
    "Handler",
    "json_body",
    "pause",
    "reply",
    "request_token",
    "service_of",
]

WORLD = web.AppKey("world", World)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SERVICES = {
    "identity": "identity",
    "compute": "compute",
    "network": "network",
    "load-balancer": "load-balancer",
    "key-manager": "key-manager",
    "_emu": "admin",
}
# Unauthenticated paths (version documents), per service: the path below the prefix.
OPEN_PATHS = {
    "identity": None,  # Keystone checks its own credentials
    "compute": {"", "/", "/v2.1", "/v2.1/"},
    "network": {"", "/", "/v2.0", "/v2.0/"},
    "load-balancer": {"", "/", "/v2", "/v2/", "/v2.0", "/v2.0/"},
    "key-manager": {"", "/", "/v1", "/v1/"},
}


def service_of(path: str) -> tuple[str, str]:
    """``(service, rest of the path)`` for a request path."""
    head, _, rest = path.lstrip("/").partition("/")
    return SERVICES.get(head, "unknown"), "/" + rest if rest or path.endswith("/") else ""


def reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    if body is None:
        return web.Response(status=status, headers=headers)
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )


async def json_body(request: web.Request, service: str = "") -> dict[str, Any]:
    """The request's JSON object, or the service's 400 for a malformed one."""
    raw = await request.read()
    try:
        found = json.loads(raw or b"{}")
    except ValueError as exc:
        raise EmuError(400, f"Malformed request body: {exc}") from exc
    if not isinstance(found, dict):
        raise EmuError(400, "Malformed request body: not a JSON object")
    return found


def request_token(request: web.Request) -> Token:
    """The caller's token (checked by the application's auth middleware)."""
    token = request.app[WORLD].valid_token(request.headers.get("X-Auth-Token"))
    if token is None:
        raise EmuError(401, "The request you have made requires authentication.")
    return token


async def pause(seconds: float) -> None:
    """Injected latency (a real wait on the server's clock)."""
    if seconds > 0:
        await asyncio.sleep(seconds)
