"""The emulator's ARM port: sign-in (``/adfs``), ARM (``/subscriptions``), the cloud's
endpoint document (``/metadata/endpoints``, what upstream reads when ``resourceManagerEndpoint``
is set) and the test API (``/_emu``).

Middlewares, outermost first: the request log (:mod:`kccm.emulators.azure.log`), the error
mapping that answers an :class:`~kccm.emulators.azure.errors.ArmError` in ARM's body, fault
injection (:mod:`kccm.emulators.azure.faults`) and the bearer-token check on every ARM call.
"""

from __future__ import annotations

from aiohttp import web

from kccm.emulators.azure import adfs, admin, arm
from kccm.emulators.azure.errors import ArmError, arm_response
from kccm.emulators.azure.faults import fault_middleware
from kccm.emulators.azure.log import log_middleware
from kccm.emulators.azure.rest import WORLD, Handler, reply
from kccm.emulators.azure.world import World

__all__ = ["build_app", "endpoints_document"]

routes = web.RouteTableDef()


def endpoints_document(world: World) -> list[dict[str, object]]:
    """``GET /metadata/endpoints``: the cloud as Azure Stack describes itself."""
    return [
        {
            "name": "AzureStackCloud",
            "resourceManager": world.base_url + "/",
            "authentication": {
                "loginEndpoint": world.base_url + "/",
                "audiences": [world.base_url + "/"],
                "tenant": "adfs",
                "identityProvider": "ADFS",
            },
            "suffixes": {"storage": "local.azurestack.external"},
        }
    ]


@routes.get("/metadata/endpoints")
async def get_endpoints(request: web.Request) -> web.Response:
    return reply(endpoints_document(request.app[WORLD]))


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ArmError as exc:
        return arm_response(exc)
    except web.HTTPNotFound:
        return arm_response(
            ArmError(404, "NotFound", f"No HTTP resource was found that matches {request.path}.")
        )
    except web.HTTPMethodNotAllowed:
        return arm_response(
            ArmError(405, "MethodNotAllowed", f"The method {request.method} is not allowed.")
        )


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith("/subscriptions"):
        adfs.require_token(request)
    return await handler(request)


def build_app(world: World) -> web.Application:
    app = web.Application(
        middlewares=[log_middleware, error_middleware, fault_middleware, auth_middleware],
        client_max_size=16 * 1024 * 1024,
    )
    app[WORLD] = world
    app[admin.IMDS_LISTENERS] = []
    for table in (adfs.routes, admin.routes, routes, arm.routes):
        app.router.add_routes(table)

    async def stop_listeners(app: web.Application) -> None:
        for runner in app[admin.IMDS_LISTENERS]:
            await runner.cleanup()

    app.on_cleanup.append(stop_listeners)
    return app
