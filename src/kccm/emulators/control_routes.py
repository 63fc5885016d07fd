"""The part of the ``/_emu/`` test API every aiohttp emulator serves alike (the server side of
:class:`kccm.emulators.control.EmulatorControl`): the request log, faults and token expiry.

- ``GET /_emu/config``: the world's ids, names, credentials and settings (the cloud's
  ``config``);
- ``GET /_emu/requests?since=N``: the logged calls after sequence number ``N``;
- ``GET /_emu/seq``: the sequence number of the last logged call (0 before any);
- ``GET|POST|DELETE /_emu/faults``: the faults not yet met, a new one (the cloud's
  ``add_fault`` reads it), none;
- ``POST /_emu/expire-tokens``: every token issued so far expires now.

Each cloud's ``admin`` module starts its route table with :func:`control_routes` and adds its
own: seeding, changing its settings, settling and its state.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from aiohttp import web

__all__ = ["ControlledWorld", "control_routes"]


class ControlledWorld(Protocol):
    """What the shared routes read of a cloud's world."""

    requests: list[dict[str, Any]]
    seq: int

    @property
    def faults(self) -> list[Any]:
        """The faults not yet met (dataclasses)."""
        ...

    def expire_tokens(self) -> int: ...


WorldT = TypeVar("WorldT", bound=ControlledWorld)


def _reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


def control_routes(
    world_key: web.AppKey[WorldT],
    config: Callable[[WorldT], dict[str, Any]],
    add_fault: Callable[[WorldT, dict[str, Any]], Any],
    json_body: Callable[[web.Request], Awaitable[dict[str, Any]]],
) -> web.RouteTableDef:
    """A route table with the shared routes on the world under ``world_key``: its
    ``config`` as the cloud renders it; a fault read with the cloud's ``json_body`` (its
    error for a malformed body) and made by its ``add_fault`` (a dataclass)."""
    routes = web.RouteTableDef()

    @routes.get("/_emu/config")
    async def get_config(request: web.Request) -> web.Response:
        return _reply(config(request.app[world_key]))

    @routes.get("/_emu/requests")
    async def get_requests(request: web.Request) -> web.Response:
        since = int(request.query.get("since", "0"))
        return _reply([entry for entry in request.app[world_key].requests if entry["seq"] > since])

    @routes.get("/_emu/seq")
    async def get_seq(request: web.Request) -> web.Response:
        return _reply({"seq": request.app[world_key].seq})

    @routes.get("/_emu/faults")
    async def get_faults(request: web.Request) -> web.Response:
        return _reply([dataclasses.asdict(f) for f in request.app[world_key].faults])

    @routes.post("/_emu/faults")
    async def post_fault(request: web.Request) -> web.Response:
        fault = add_fault(request.app[world_key], await json_body(request))
        return _reply(dataclasses.asdict(fault), 201)

    @routes.delete("/_emu/faults")
    async def clear_faults(request: web.Request) -> web.Response:
        request.app[world_key].faults.clear()
        return web.Response(status=204)

    @routes.post("/_emu/expire-tokens")
    async def expire_tokens(request: web.Request) -> web.Response:
        return _reply({"expired": request.app[world_key].expire_tokens()})

    return routes
