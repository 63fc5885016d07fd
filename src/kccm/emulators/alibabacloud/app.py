"""The Alibaba Cloud emulator's aiohttp application: ``/_emu`` (test API), ``/latest/...``
(metadata service) and every other path the RPC APIs (SDKs post to ``/`` or elsewhere)."""

from __future__ import annotations

from aiohttp import web

from kccm.emulators.alibabacloud import (  # noqa: F401  (they register their actions)
    ecs,
    nlb,
    nlb_groups,
    nlb_listeners,
    nlb_tags,
    slb,
    slb_listeners,
    slb_vgroups,
    vpc,
)
from kccm.emulators.alibabacloud.admin import WORLD, admin_routes
from kccm.emulators.alibabacloud.metadata import metadata_routes
from kccm.emulators.alibabacloud.rpc import handle_rpc
from kccm.emulators.alibabacloud.world import World

__all__ = ["build_app"]


def build_app(world: World) -> web.Application:
    app = web.Application()
    app[WORLD] = world
    app.add_routes(admin_routes())
    app.add_routes(metadata_routes(world))

    async def rpc(request: web.Request) -> web.Response:
        return await handle_rpc(world, request)

    app.router.add_route("GET", "/{tail:.*}", rpc)
    app.router.add_route("POST", "/{tail:.*}", rpc)
    return app
