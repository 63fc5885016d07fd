"""The emulator's aiohttp application: one port, every service under its own prefix.

Middlewares, outermost first: the request log (every call but ``/_emu``), fault injection
(:mod:`kccm.emulators.openstack.faults`), token checks (keystonemiddleware's 401 on every
service but the version documents), and the error mapping that answers an
:class:`~kccm.emulators.openstack.errors.EmuError` in the service's own body shape.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kccm.emulators.openstack import (
    admin,
    barbican,
    faults,
    keystone,
    neutron,
    neutron_l3,
    neutron_nets,
    nova,
    octavia,
    octavia_children,
)
from kccm.emulators.openstack.errors import EmuError, error_response
from kccm.emulators.openstack.rest import (
    OPEN_PATHS,
    WORLD,
    Handler,
    request_token,
    service_of,
)
from kccm.emulators.openstack.world import World

__all__ = ["build_app"]


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


def build_app(world: World) -> web.Application:
    """The application serving ``world`` (routes from every service module)."""
    app = web.Application(
        middlewares=[log_middleware, error_middleware, faults.fault_middleware, auth_middleware],
        client_max_size=16 * 1024 * 1024,
    )
    app[WORLD] = world
    modules = (
        admin,
        keystone,
        nova,
        neutron,
        neutron_l3,
        neutron_nets,
        octavia,
        octavia_children,
        barbican,
    )
    for module in modules:
        app.router.add_routes(module.routes)

    async def cancel_timers(app: web.Application) -> None:
        for handle in list(app[WORLD].timers.values()):
            handle.cancel()

    app.on_cleanup.append(cancel_timers)
    return app
