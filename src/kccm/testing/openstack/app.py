"""The emulator's aiohttp application: one port, every service under its own prefix.

Middlewares, outermost first: the request log (every call but ``/_emu``), fault injection
(:mod:`kccm.testing.openstack.faults`), token checks (keystonemiddleware's 401 on every
service but the version documents), and the error mapping that answers an
:class:`~kccm.testing.openstack.errors.EmuError` in the service's own body shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kccm.testing.openstack.errors import EmuError, error_response
from kccm.testing.openstack.world import Token, World

__all__ = [
    "WORLD",
    "build_app",
    "json_body",
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
    "_emu": "admin",
}
# Unauthenticated paths (version documents), per service: the path below the prefix.
OPEN_PATHS = {
    "identity": None,  # Keystone checks its own credentials
    "compute": {"", "/", "/v2.1", "/v2.1/"},
    "network": {"", "/", "/v2.0", "/v2.0/"},
    "load-balancer": {"", "/", "/v2", "/v2/", "/v2.0", "/v2.0/"},
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


def _log_entry(world: World, request: web.Request, service: str) -> dict[str, Any]:
    world.seq += 1
    entry: dict[str, Any] = {
        "seq": world.seq,
        "method": request.method,
        "path": request.path,
        "query": request.query_string,
        "service": service,
        "status": 0,
    }
    world.requests.append(entry)
    return entry


@web.middleware
async def log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    world = request.app[WORLD]
    service, _ = service_of(request.path)
    if service == "admin":
        return await handler(request)
    entry = _log_entry(world, request, service)
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        entry["status"] = exc.status
        raise
    entry["status"] = response.status
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    service, _ = service_of(request.path)
    auth_uri = f"{request.app[WORLD].base_url}/identity"
    try:
        return await handler(request)
    except EmuError as exc:
        return error_response(service, exc, auth_uri=auth_uri)
    except web.HTTPNotFound:
        return error_response(service, EmuError(404, "The resource could not be found."))
    except web.HTTPMethodNotAllowed:
        return error_response(service, EmuError(405, "The method is not allowed."))


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    service, rest = service_of(request.path)
    open_paths = OPEN_PATHS.get(service)
    if open_paths is None or rest in open_paths:
        return await handler(request)
    request_token(request)
    return await handler(request)


def request_token(request: web.Request) -> Token:
    """The caller's token (checked by :func:`auth_middleware`)."""
    token = request.app[WORLD].valid_token(request.headers.get("X-Auth-Token"))
    if token is None:
        raise EmuError(401, "The request you have made requires authentication.")
    return token


def build_app(world: World) -> web.Application:
    """The application serving ``world`` (routes from every service module)."""
    from kccm.testing.openstack import (
        admin,
        faults,
        keystone,
        neutron,
        neutron_l3,
        neutron_nets,
        nova,
        octavia,
        octavia_children,
    )

    app = web.Application(
        middlewares=[log_middleware, error_middleware, faults.fault_middleware, auth_middleware],
        client_max_size=16 * 1024 * 1024,
    )
    app[WORLD] = world
    modules = (admin, keystone, nova, neutron, neutron_l3, neutron_nets, octavia, octavia_children)
    for module in modules:
        app.router.add_routes(module.routes)

    async def cancel_timers(app: web.Application) -> None:
        for handle in list(app[WORLD].timers.values()):
            handle.cancel()

    app.on_cleanup.append(cancel_timers)
    return app


async def pause(seconds: float) -> None:
    """Injected latency (a real wait on the server's clock)."""
    if seconds > 0:
        await asyncio.sleep(seconds)
