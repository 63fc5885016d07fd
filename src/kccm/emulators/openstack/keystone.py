"""Keystone v3 as clients use it (keystone/api/auth.py, keystone/auth/plugins/*.py,
keystone/models/token_model.py; gophercloud openstack/identity/v3/tokens): ``POST
/v3/auth/tokens`` with the ``password`` (user by id, or name + domain) or
``application_credential`` (id, or name + user) or ``token`` method, a project scope by id
or name + domain or a trust scope (``OS-TRUST:trust``, keystone/api/trusts.py), the token
in ``X-Subject-Token``, the body with user, project, roles and the catalog;
``GET``/``HEAD``/``DELETE /v3/auth/tokens`` to validate and revoke; the version documents.
Every failure to authenticate is Keystone's generic 401 (it hides which part was wrong
unless ``insecure_debug``).
"""

from __future__ import annotations

import secrets

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.rest import WORLD, json_body, reply
from kccm.emulators.openstack.seed import DEFAULTS
from kccm.emulators.openstack.world import Obj, Token, World, iso_at

__all__ = ["catalog", "routes"]

routes = web.RouteTableDef()
UNAUTHORIZED = "The request you have made requires authentication."
CATALOG = (
    ("identity", "keystone", "/identity/v3"),
    ("compute", "nova", "/compute/v2.1"),
    ("network", "neutron", "/network"),
    ("load-balancer", "octavia", "/load-balancer"),
    ("key-manager", "barbican", "/key-manager"),
)
ROLES = (("member", "9fe2ff9ee4384b1894a90878d3e92bab"), ("reader", "a4a5d3f3d1ab4c2d8b1c0e0b"))


def _unauthorized() -> EmuError:
    return EmuError(401, UNAUTHORIZED)


def catalog(world: World) -> list[Obj]:
    """One entry per service; public, internal and admin endpoints share the URL."""
    entries = []
    for service_type, name, path in CATALOG:
        endpoints = [
            {
                "id": f"{name}-{interface}",
                "interface": interface,
                "region_id": DEFAULTS["region"],
                "region": DEFAULTS["region"],
                "url": world.base_url + path,
            }
            for interface in ("public", "internal", "admin")
        ]
        entries.append(
            {"id": f"{name}-svc", "type": service_type, "name": name, "endpoints": endpoints}
        )
    return entries


def _domain(world: World, ref: Obj | None) -> Obj:
    ref = ref or {}
    for domain in world.domains.values():
        if domain["id"] == ref.get("id") or domain["name"] == ref.get("name"):
            return domain
    raise _unauthorized()


def _user(world: World, ref: Obj) -> Obj:
    for user in world.users.values():
        if user["id"] == ref.get("id"):
            return user
        if (
            "name" in ref
            and user["name"] == ref["name"]
            and _domain(world, ref.get("domain"))["id"] == user["domain_id"]
        ):
            return user
    raise _unauthorized()


def _password(world: World, method: Obj) -> Obj:
    user = _user(world, method.get("user") or {})
    if (method.get("user") or {}).get("password") != user["password"]:
        raise _unauthorized()
    return user


def _app_credential(world: World, method: Obj) -> tuple[Obj, Obj]:
    for cred in world.app_creds.values():
        if method.get("id") == cred["id"] or (
            "id" not in method
            and method.get("name") == cred["name"]
            and _user(world, method.get("user") or {})["id"] == cred["user_id"]
        ):
            if method.get("secret") != cred["secret"]:
                break
            return world.users[cred["user_id"]], cred
    raise _unauthorized()


def _project(world: World, scope: Obj | None) -> str | None:
    if not scope:
        return None
    ref = scope.get("project")
    if not ref:
        raise EmuError(400, "Only project scope is emulated.")
    for project in world.projects.values():
        if project["id"] == ref.get("id") or (
            project["name"] == ref.get("name")
            and _domain(world, ref.get("domain"))["id"] == project["domain_id"]
        ):
            return str(project["id"])
    raise _unauthorized()


def _trust(world: World, ref: Obj, trustee: Obj) -> Obj:
    """A trust scope (keystone/auth/core.py ``_lookup_trust``): the trust must exist and
    name the authenticated user as trustee."""
    trust = world.trusts.get(str(ref.get("id")))
    if trust is None or trust["trustee_user_id"] != trustee["id"]:
        raise _unauthorized()
    return trust


def _authenticate(world: World, auth: Obj) -> Token:
    identity = auth.get("identity") or {}
    methods = list(identity.get("methods") or [])
    if not methods:
        raise EmuError(400, "Invalid input for field 'identity': 'methods' is a required property")
    method = methods[0]
    if method == "password":
        user = _password(world, identity.get("password") or {})
        trust_ref = (auth.get("scope") or {}).get("OS-TRUST:trust")
        if trust_ref is not None:
            trust = _trust(world, trust_ref, user)
            return world.issue_token(user["id"], trust["project_id"], methods, trust_id=trust["id"])
        project = _project(world, auth.get("scope"))
        return world.issue_token(user["id"], project or "", methods)
    if method == "application_credential":
        if auth.get("scope"):
            raise EmuError(401, UNAUTHORIZED)
        user, cred = _app_credential(world, identity.get("application_credential") or {})
        return world.issue_token(
            user["id"], cred["project_id"], methods, application_credential_id=cred["id"]
        )
    if method == "token":
        old = world.valid_token((identity.get("token") or {}).get("id"))
        if old is None:
            raise _unauthorized()
        project = _project(world, auth.get("scope")) or old.project_id
        return world.issue_token(old.user_id, project, methods)
    raise _unauthorized()


def token_body(world: World, token: Token) -> Obj:
    user = world.users[token.user_id]
    domain = world.domains[user["domain_id"]]
    body: Obj = {
        "methods": token.methods,
        "user": {
            "id": user["id"],
            "name": user["name"],
            "domain": {"id": domain["id"], "name": domain["name"]},
            "password_expires_at": None,
        },
        "audit_ids": [secrets.token_urlsafe(16)],
        "expires_at": iso_at(token.expires),
        "issued_at": iso_at(token.issued),
    }
    if token.project_id:
        project = world.projects[token.project_id]
        pdomain = world.domains[project["domain_id"]]
        body["project"] = {
            "id": project["id"],
            "name": project["name"],
            "domain": {"id": pdomain["id"], "name": pdomain["name"]},
        }
        body["is_domain"] = False
        body["roles"] = [{"id": rid, "name": name} for name, rid in ROLES]
        body["catalog"] = catalog(world)
    if token.trust_id:
        trust = world.trusts[token.trust_id]
        body["OS-TRUST:trust"] = {
            "id": trust["id"],
            "impersonation": False,
            "trustee_user": {"id": trust["trustee_user_id"]},
            "trustor_user": {"id": trust["trustor_user_id"]},
        }
    if token.application_credential_id:
        cred = world.app_creds[token.application_credential_id]
        body["application_credential"] = {
            "id": cred["id"],
            "name": cred["name"],
            "restricted": True,
        }
    return {"token": body}


@routes.post("/identity/v3/auth/tokens")
async def issue(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    payload = await json_body(request)
    token = _authenticate(world, payload.get("auth") or {})
    return reply(token_body(world, token), 201, {"X-Subject-Token": token.id})


def _subject(request: web.Request) -> Token:
    world = request.app[WORLD]
    if world.valid_token(request.headers.get("X-Auth-Token")) is None:
        raise _unauthorized()
    subject = request.headers.get("X-Subject-Token", "")
    token = world.valid_token(subject)
    if token is None:
        raise EmuError(404, f"Could not find token: {subject}.")
    return token


@routes.get("/identity/v3/auth/tokens")
async def validate(request: web.Request) -> web.Response:
    token = _subject(request)
    return reply(token_body(request.app[WORLD], token), 200, {"X-Subject-Token": token.id})


@routes.delete("/identity/v3/auth/tokens")
async def revoke(request: web.Request) -> web.Response:
    token = _subject(request)
    request.app[WORLD].tokens.pop(token.id, None)
    return web.Response(status=204)


def _v3(world: World) -> Obj:
    return {
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"{world.base_url}/identity/v3/"}],
        "media-types": [
            {"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}
        ],
    }


@routes.get("/identity/v3")
@routes.get("/identity/v3/")
async def version(request: web.Request) -> web.Response:
    return reply({"version": _v3(request.app[WORLD])})


@routes.get("/identity")
@routes.get("/identity/")
async def versions(request: web.Request) -> web.Response:
    return reply({"versions": {"values": [_v3(request.app[WORLD])]}}, 300)
