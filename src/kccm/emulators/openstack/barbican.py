"""Barbican (the key manager, API v1): the secrets and containers a TLS-terminated balancer
names in ``default_tls_container_ref`` (barbican/api/controllers/secrets.py,
containers.py and versions.py).

Served under ``/key-manager`` (the catalog's ``key-manager`` entry, without a version, as
Barbican registers itself; gophercloud's ``NewKeyManagerV1`` appends ``v1/``):

- ``GET /`` (``300``, the versions document) and ``GET /v1`` (the ``v1`` version);
- ``POST /v1/secrets`` (``201 {"secret_ref"}``; the payload is kept, not encrypted),
  ``GET /v1/secrets`` (``{"secrets", "total"}``, ``limit``/``offset``),
  ``GET /v1/secrets/{id}`` (the metadata), ``GET /v1/secrets/{id}/payload``,
  ``DELETE /v1/secrets/{id}``;
- ``POST /v1/containers`` (``201 {"container_ref"}``; every ``secret_ref`` must exist),
  ``GET /v1/containers``, ``GET /v1/containers/{id}``, ``DELETE /v1/containers/{id}``.

Errors are Barbican's (pecan's ``abort``): ``{"code", "title", "description"}``. A secret or
container of another project is not found, as Barbican's default policy hides it.
"""

from __future__ import annotations

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.rest import WORLD, json_body, reply, request_token
from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = ["routes"]

routes = web.RouteTableDef()
PREFIX = "/key-manager"
SECRET_TYPES = {"symmetric", "public", "private", "passphrase", "certificate", "opaque"}
CONTAINER_TYPES = {"generic", "rsa", "certificate"}
MEDIA = [{"base": "application/json", "type": "application/vnd.openstack.key-manager-v1+json"}]


def _version(world: World) -> Obj:
    href = f"{world.base_url}{PREFIX}/v1/"
    return {
        "id": "v1",
        "status": "stable",
        "updated": "2015-04-28T00:00:00Z",
        "links": [{"rel": "self", "href": href}],
        "media-types": MEDIA,
    }


@routes.get(PREFIX)
@routes.get(PREFIX + "/")
async def versions(request: web.Request) -> web.Response:
    return reply({"versions": {"values": [_version(request.app[WORLD])]}}, status=300)


@routes.get(PREFIX + "/v1")
@routes.get(PREFIX + "/v1/")
async def version(request: web.Request) -> web.Response:
    return reply({"version": _version(request.app[WORLD])})


def _ref(world: World, kind: str, item_id: str) -> str:
    return f"{world.base_url}{PREFIX}/v1/{kind}/{item_id}"


def _owned(items: dict[str, Obj], item_id: str, project: str | None, what: str) -> Obj:
    found = items.get(item_id)
    if found is None or found["emu_project"] != project:
        raise EmuError(404, f"{what} not found.")
    return found


def _public(item: Obj) -> Obj:
    return {k: v for k, v in item.items() if not k.startswith("emu_")}


def _page(request: web.Request, key: str, items: list[Obj]) -> web.Response:
    offset = int(request.query.get("offset", "0") or 0)
    limit = int(request.query.get("limit", "10") or 10)
    chosen = items[offset : offset + limit]
    body: Obj = {key: [_public(i) for i in chosen], "total": len(items)}
    base = f"{request.app[WORLD].base_url}{request.path}"
    if offset + limit < len(items):
        body["next"] = f"{base}?limit={limit}&offset={offset + limit}"
    if offset > 0:
        body["previous"] = f"{base}?limit={limit}&offset={max(0, offset - limit)}"
    return reply(body)


def _mine(items: dict[str, Obj], project: str | None) -> list[Obj]:
    return sorted(
        (i for i in items.values() if i["emu_project"] == project), key=lambda i: i["created"]
    )


# -- secrets ----------------------------------------------------------------------------------


@routes.post(PREFIX + "/v1/secrets")
async def create_secret(request: web.Request) -> web.Response:
    world, token = request.app[WORLD], request_token(request)
    body = await json_body(request)
    kind = str(body.get("secret_type") or "opaque")
    if kind not in SECRET_TYPES:
        raise EmuError(400, f"Invalid secret_type {kind!r}.")
    if "payload" in body and not body.get("payload_content_type"):
        raise EmuError(400, "If 'payload' specified, must be non empty")
    secret_id, stamp = new_id(), now_iso(zulu=False)
    world.secrets[secret_id] = {
        "status": "ACTIVE",
        "created": stamp,
        "updated": stamp,
        "expiration": body.get("expiration"),
        "algorithm": body.get("algorithm"),
        "bit_length": body.get("bit_length"),
        "mode": body.get("mode"),
        "name": body.get("name"),
        "secret_ref": _ref(world, "secrets", secret_id),
        "secret_type": kind,
        "creator_id": token.user_id,
        "consumers": [],
        "emu_project": token.project_id,
        "emu_payload": body.get("payload"),
    }
    if "payload" in body:  # Barbican lists content types only for a secret with a payload
        world.secrets[secret_id]["content_types"] = {"default": body["payload_content_type"]}
    return reply({"secret_ref": world.secrets[secret_id]["secret_ref"]}, status=201)


@routes.get(PREFIX + "/v1/secrets")
async def list_secrets(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    return _page(request, "secrets", _mine(world.secrets, request_token(request).project_id))


@routes.get(PREFIX + "/v1/secrets/{id}")
async def get_secret(request: web.Request) -> web.Response:
    world, project = request.app[WORLD], request_token(request).project_id
    return reply(_public(_owned(world.secrets, request.match_info["id"], project, "Secret")))


@routes.get(PREFIX + "/v1/secrets/{id}/payload")
async def get_payload(request: web.Request) -> web.Response:
    world, project = request.app[WORLD], request_token(request).project_id
    secret = _owned(world.secrets, request.match_info["id"], project, "Secret")
    if secret["emu_payload"] is None:
        raise EmuError(404, "Not Found. Sorry but your secret has no payload.")
    content_type = secret["content_types"]["default"]
    return web.Response(text=str(secret["emu_payload"]), content_type=content_type)


@routes.delete(PREFIX + "/v1/secrets/{id}")
async def delete_secret(request: web.Request) -> web.Response:
    world, project = request.app[WORLD], request_token(request).project_id
    secret = _owned(world.secrets, request.match_info["id"], project, "Secret")
    del world.secrets[secret["secret_ref"].rsplit("/", 1)[-1]]
    return web.Response(status=204)


# -- containers -------------------------------------------------------------------------------


def _secret_refs(world: World, body: Obj, project: str | None) -> list[Obj]:
    refs = []
    for item in body.get("secret_refs") or ():
        ref = str((item or {}).get("secret_ref") or "")
        _owned(world.secrets, ref.rstrip("/").rsplit("/", 1)[-1], project, "Secret")
        refs.append({"name": item.get("name"), "secret_ref": ref})
    return refs


@routes.post(PREFIX + "/v1/containers")
async def create_container(request: web.Request) -> web.Response:
    world, token = request.app[WORLD], request_token(request)
    body = await json_body(request)
    kind = str(body.get("type") or "")
    if kind not in CONTAINER_TYPES:
        raise EmuError(400, f"Invalid container type {kind!r}.")
    container_id, stamp = new_id(), now_iso(zulu=False)
    world.containers[container_id] = {
        "status": "ACTIVE",
        "created": stamp,
        "updated": stamp,
        "name": body.get("name"),
        "type": kind,
        "container_ref": _ref(world, "containers", container_id),
        "secret_refs": _secret_refs(world, body, token.project_id),
        "creator_id": token.user_id,
        "consumers": [],
        "emu_project": token.project_id,
    }
    return reply({"container_ref": world.containers[container_id]["container_ref"]}, status=201)


@routes.get(PREFIX + "/v1/containers")
async def list_containers(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    project = request_token(request).project_id
    return _page(request, "containers", _mine(world.containers, project))


@routes.get(PREFIX + "/v1/containers/{id}")
async def get_container(request: web.Request) -> web.Response:
    world, project = request.app[WORLD], request_token(request).project_id
    found = _owned(world.containers, request.match_info["id"], project, "Container")
    return reply(_public(found))


@routes.delete(PREFIX + "/v1/containers/{id}")
async def delete_container(request: web.Request) -> web.Response:
    world, project = request.app[WORLD], request_token(request).project_id
    found = _owned(world.containers, request.match_info["id"], project, "Container")
    del world.containers[found["container_ref"].rsplit("/", 1)[-1]]
    return web.Response(status=204)
