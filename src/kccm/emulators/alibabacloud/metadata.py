"""The ECS instance metadata service, as upstream's ``base/metadata.go`` and kccm's provider
read it: ``PUT /latest/api/token`` (IMDSv2: ``X-aliyun-ecs-metadata-token-ttl-seconds``, 1 to
21600) gives a token that ``X-aliyun-ecs-metadata-token`` carries; a request carrying an unknown
or expired token is refused (401); one without a token is answered (IMDSv1). The instance
answered for is :attr:`World.metadata_instance`; the RAM role's credentials are a temporary
access key the RPC side accepts (with its ``SecurityToken``)."""

from __future__ import annotations

import datetime
import json
import secrets

from aiohttp import web

from kccm.emulators.alibabacloud.world import World

__all__ = ["metadata_routes"]

TOKEN_TTL = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN = "X-aliyun-ecs-metadata-token"


def _text(body: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/plain")


def _item(world: World, item: str) -> str | None:
    instance = world.instances.get(world.metadata_instance)
    if item == "region-id":
        return world.region
    if instance is None:
        return None
    if item == "ram/security-credentials/":
        return world.role
    if item == f"ram/security-credentials/{world.role}":
        key, secret = f"STS.{secrets.token_hex(8)}", secrets.token_hex(16)
        world.keys[key] = secret
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
        return json.dumps(
            {
                "AccessKeyId": key,
                "AccessKeySecret": secret,
                "SecurityToken": secrets.token_hex(24),
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "Code": "Success",
            }
        )
    values = {
        "instance-id": instance.id,
        "zone-id": instance.zone,
        "vpc-id": instance.vpc,
        "vswitch-id": instance.vswitch,
        "private-ipv4": instance.private_ip,
        "instance/instance-type": instance.instance_type,
        "hostname": instance.id,
    }
    return values.get(item)


def metadata_routes(world: World) -> web.RouteTableDef:
    routes = web.RouteTableDef()

    @routes.put("/latest/api/token")
    async def token(request: web.Request) -> web.Response:
        ttl = request.headers.get(TOKEN_TTL, "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return _text(f"{TOKEN_TTL} must be 1 to 21600", 400)
        made = secrets.token_urlsafe(24)
        world.tokens.add(made)
        world.log({"service": "metadata", "method": "PUT", "path": "api/token", "status": 200})
        return _text(made)

    @routes.get("/latest/meta-data/{item:.*}")
    async def meta(request: web.Request) -> web.Response:
        item = request.match_info["item"]
        given = request.headers.get(TOKEN)
        status = 200
        value = _item(world, item) if given is None or given in world.tokens else None
        if given is not None and given not in world.tokens:
            status = 401
        elif value is None:
            status = 404
        world.log({"service": "metadata", "method": "GET", "path": item, "status": status})
        return _text(value if status == 200 and value is not None else "", status)

    return routes
