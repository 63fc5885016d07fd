"""Octavia listeners, pools, members (the batch update included) and health monitors
(octavia/api/v2/controllers/{listener,pool,member,health_monitor}.py; gophercloud
openstack/loadbalancer/v2/{listeners,pools,monitors}).

Every change first checks what Octavia checks, in its order: the parent objects exist, the
request is valid, the pool is not pending (members, monitors: ``Pool <id> is immutable``),
the balancer is ``ACTIVE`` (``Load Balancer <id> is immutable``), then duplicates; only then
are the objects set pending (:func:`~kccm.testing.openstack.octavia_model.lock`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from kccm.testing.openstack import octavia
from kccm.testing.openstack.app import WORLD, json_body, reply
from kccm.testing.openstack.errors import EmuError
from kccm.testing.openstack.octavia import (
    Route,
    check_protocols,
    check_provider,
    get_obj,
    listing,
    no_duplicate,
    payload,
    shown,
)
from kccm.testing.openstack.octavia_model import (
    POST_ATTRS,
    check_cidrs,
    children,
    known_attributes,
    mandatory,
    new_healthmonitor,
    new_listener,
    new_member,
    new_pool,
    not_found,
    validation,
)
from kccm.testing.openstack.octavia_state import check_mutable, lock
from kccm.testing.openstack.octavia_wsme import LISTENER_BOUNDS, check_bounds
from kccm.testing.openstack.world import Obj, World

__all__ = ["routes"]

routes = web.RouteTableDef()


def lb_route(method: str, path: str) -> Callable[[Route], Route]:
    return octavia.lb_route(method, path, routes)


def _by_lb(item: Obj, wanted: list[str]) -> bool:
    return any(lb["id"] in wanted for lb in item.get("loadbalancers") or ())


LB_FILTER = {"loadbalancer_id": _by_lb}
LISTENER_UPDATABLE = {
    "name",
    "description",
    "admin_state_up",
    "connection_limit",
    "default_tls_container_ref",
    "sni_container_refs",
    "default_pool_id",
    "insert_headers",
    "timeout_client_data",
    "timeout_member_connect",
    "timeout_member_data",
    "timeout_tcp_inspect",
    "tags",
    "client_ca_tls_container_ref",
    "client_authentication",
    "client_crl_container_ref",
    "allowed_cidrs",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
    "hsts_max_age",
    "hsts_include_subdomains",
    "hsts_preload",
}
LISTENER_DEFAULTS = {
    "connection_limit": -1,
    "timeout_client_data": 50000,
    "timeout_member_connect": 5000,
    "timeout_member_data": 50000,
    "timeout_tcp_inspect": 0,
    "client_authentication": "NONE",
    "hsts_include_subdomains": False,
    "hsts_preload": False,
}
POOL_UPDATABLE = {
    "name",
    "description",
    "admin_state_up",
    "lb_algorithm",
    "session_persistence",
    "tags",
    "tls_container_ref",
    "ca_tls_container_ref",
    "crl_container_ref",
    "tls_enabled",
    "tls_ciphers",
    "tls_versions",
    "alpn_protocols",
}
MEMBER_UPDATABLE = {
    "name",
    "admin_state_up",
    "weight",
    "backup",
    "monitor_address",
    "monitor_port",
    "tags",
}
MEMBER_BATCH_DEFAULTS = {
    "admin_state_up": True,
    "weight": 1,
    "backup": False,
    "monitor_address": None,
}
HM_UPDATABLE = {
    "name",
    "admin_state_up",
    "delay",
    "timeout",
    "max_retries",
    "max_retries_down",
    "http_method",
    "url_path",
    "expected_codes",
    "tags",
    "http_version",
    "domain_name",
}


def _unknown(world: World, body: Obj, allowed: set[str], kind: str) -> None:
    known_attributes(body, kind, allowed, max_minor=world.octavia_max_minor)


def _members_pool(world: World, pool_id: str) -> Obj:
    """The pool of a ``/pools/{pool_id}/members`` path. Octavia finds it in
    ``PoolsController._lookup``, outside WSME, so an unknown pool's NotFound is rendered by
    pecan: ``{"code": 404, "description": ..., "title": "Bad Request"}``, no faultstring."""
    pool = world.pools.get(pool_id)
    if pool is None:
        message = f"Pool {pool_id} not found."
        body = {"code": 404, "description": message, "title": "Bad Request"}
        raise EmuError(404, message, body=body)
    return pool


def _lb_of(world: World, lb_id: Any) -> Obj:
    if not lb_id:
        raise mandatory("loadbalancer_id")
    return get_obj(world, "loadbalancers", str(lb_id))


def _pool_listeners(world: World, pool: Obj) -> list[Obj]:
    return [li for li in world.listeners.values() if li["default_pool_id"] == pool["id"]]


def _cleared(body: Obj, defaults: dict[str, Any]) -> Obj:
    """``_set_default_on_none``: a null resets a value to its default."""
    return {
        k: (
            defaults[k]
            if v is None and k in defaults
            else ""
            if v is None and k in ("name", "description")
            else v
        )
        for k, v in body.items()
    }


# -- listeners ---------------------------------------------------------------------------


def _default_pool(world: World, lb: Obj, pool_id: Any, protocol: str) -> None:
    if pool_id is None:
        return
    pool = world.pools.get(str(pool_id))
    if pool is None or pool["_lb"] != lb["id"]:
        raise not_found("pools", str(pool_id))
    check_protocols(protocol, pool["protocol"])


@lb_route("POST", "/listeners")
async def listener_create(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    body = await payload(request, "listener")
    _unknown(world, body, POST_ATTRS["listener"], "listener")
    lb = _lb_of(world, body.get("loadbalancer_id"))
    spec = {k: v for k, v in body.items() if k not in ("loadbalancer_id", "project_id")}
    listener = new_listener(spec, lb)
    check_provider(lb["provider"], protocol=listener["protocol"])
    _default_pool(world, lb, listener["default_pool_id"], listener["protocol"])
    check_mutable(lb)
    seen: set[tuple[str, int]] = set()
    for other in children(world, "listeners", "_lb", lb["id"]):
        no_duplicate(seen, other)
    no_duplicate(seen, listener)
    lock(world, lb)
    world.listeners[listener["id"]] = listener
    return shown(request, "listener", "listeners", listener, 201)


@lb_route("GET", "/listeners")
async def listener_list(request: web.Request) -> web.Response:
    return listing(request, "listeners", request.app[WORLD].listeners.values(), LB_FILTER)


@lb_route("GET", "/listeners/{id}")
async def listener_show(request: web.Request) -> web.Response:
    listener = get_obj(request.app[WORLD], "listeners", request.match_info["id"])
    return shown(request, "listener", "listeners", listener)


@lb_route("PUT", "/listeners/{id}")
async def listener_update(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    listener = get_obj(world, "listeners", request.match_info["id"])
    body = _cleared(await payload(request, "listener"), LISTENER_DEFAULTS)
    _unknown(world, body, LISTENER_UPDATABLE, "listener")
    check_bounds(body, LISTENER_BOUNDS)
    lb = world.loadbalancers[listener["_lb"]]
    if "default_pool_id" in body:
        _default_pool(world, lb, body["default_pool_id"], listener["protocol"])
    if "allowed_cidrs" in body:
        body["allowed_cidrs"] = check_cidrs(body["allowed_cidrs"], lb)
    lock(world, lb, touched=[(listener, "PENDING_UPDATE")])
    listener.update(body)
    return shown(request, "listener", "listeners", listener)


@lb_route("DELETE", "/listeners/{id}")
async def listener_delete(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    listener = get_obj(world, "listeners", request.match_info["id"])
    lock(world, world.loadbalancers[listener["_lb"]], touched=[(listener, "PENDING_DELETE")])
    return web.Response(status=204)


# -- pools -------------------------------------------------------------------------------


def _pool_parent(world: World, body: Obj) -> tuple[Obj, Obj | None]:
    listener = None
    if body.get("listener_id"):
        listener = get_obj(world, "listeners", str(body["listener_id"]))
        return world.loadbalancers[listener["_lb"]], listener
    if body.get("loadbalancer_id"):
        return _lb_of(world, body["loadbalancer_id"]), None
    raise validation("Must provide at least one of: loadbalancer_id, listener_id")


def _pool_children(pool: Obj, body: Obj, provider: str) -> list[tuple[str, Obj]]:
    made: list[tuple[str, Obj]] = []
    for nested in body.get("members") or []:
        known_attributes(nested, "member_single")
    if body.get("healthmonitor"):
        known_attributes(body["healthmonitor"], "healthmonitor_single")
    if body.get("healthmonitor"):
        hm = new_healthmonitor(body["healthmonitor"], pool)
        check_provider(provider, monitor=hm["type"])
        made.append(("healthmonitors", hm))
    made += [
        ("members", new_member(m, pool, monitored=bool(body.get("healthmonitor"))))
        for m in body.get("members") or []
    ]
    return made


@lb_route("POST", "/pools")
async def pool_create(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    body = await payload(request, "pool")
    _unknown(world, body, POST_ATTRS["pool"], "pool")
    lb, listener = _pool_parent(world, body)
    if listener is not None:
        check_protocols(listener["protocol"], str(body.get("protocol")))
    spec = {k: v for k, v in body.items() if k not in ("loadbalancer_id", "listener_id")}
    pool = new_pool(spec, lb)
    check_provider(lb["provider"], algorithm=pool["lb_algorithm"], protocol=pool["protocol"])
    made = _pool_children(pool, body, lb["provider"])
    if listener is not None and listener["default_pool_id"]:
        raise EmuError(409, "This listener already has a default pool")
    touched = [(listener, "PENDING_UPDATE")] if listener is not None else []
    lock(world, lb, touched=touched)
    world.pools[pool["id"]] = pool
    if listener is not None:
        listener["default_pool_id"] = pool["id"]
    for kind, obj in made:
        getattr(world, kind)[obj["id"]] = obj
    return shown(request, "pool", "pools", pool, 201)


@lb_route("GET", "/pools")
async def pool_list(request: web.Request) -> web.Response:
    return listing(request, "pools", request.app[WORLD].pools.values(), LB_FILTER)


@lb_route("GET", "/pools/{id}")
async def pool_show(request: web.Request) -> web.Response:
    pool = get_obj(request.app[WORLD], "pools", request.match_info["id"])
    return shown(request, "pool", "pools", pool)


@lb_route("PUT", "/pools/{id}")
async def pool_update(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = get_obj(world, "pools", request.match_info["id"])
    body = _cleared(await payload(request, "pool"), {})
    _unknown(world, body, POOL_UPDATABLE, "pool")
    lb = world.loadbalancers[pool["_lb"]]
    if "lb_algorithm" in body:
        check_provider(lb["provider"], algorithm=body["lb_algorithm"])
    touched = [(li, "PENDING_UPDATE") for li in _pool_listeners(world, pool)]
    lock(world, lb, touched=[*touched, (pool, "PENDING_UPDATE")])
    pool.update(body)
    return shown(request, "pool", "pools", pool)


@lb_route("DELETE", "/pools/{id}")
async def pool_delete(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = get_obj(world, "pools", request.match_info["id"])
    touched = [(li, "PENDING_UPDATE") for li in _pool_listeners(world, pool)]
    lock(world, world.loadbalancers[pool["_lb"]], touched=[*touched, (pool, "PENDING_DELETE")])
    return web.Response(status=204)


# -- members -----------------------------------------------------------------------------


def _member_lock(world: World, pool: Obj, extra: list[tuple[Obj, str]]) -> None:
    lb = world.loadbalancers[pool["_lb"]]
    check_mutable(lb, pool=pool)
    touched = [(li, "PENDING_UPDATE") for li in _pool_listeners(world, pool)]
    lock(world, lb, touched=[*touched, (pool, "PENDING_UPDATE"), *extra])


def _member(world: World, pool: Obj, member_id: str) -> Obj:
    member = world.members.get(member_id)
    if member is None or member["_pool"] != pool["id"]:
        raise not_found("members", member_id)
    return member


def _monitored(world: World, pool: Obj) -> bool:
    return bool(children(world, "healthmonitors", "_pool", pool["id"]))


def _duplicate_member(world: World, pool: Obj, member: Obj) -> None:
    for other in children(world, "members", "_pool", pool["id"]):
        if (other["address"], other["protocol_port"]) == (
            member["address"],
            member["protocol_port"],
        ):
            raise EmuError(
                409,
                "Another member on this pool is already using ip "
                f"{member['address']} on protocol_port {member['protocol_port']}",
            )


@lb_route("GET", "/pools/{pool_id}/members")
async def member_list(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    return listing(request, "members", children(world, "members", "_pool", pool["id"]))


@lb_route("GET", "/pools/{pool_id}/members/{id}")
async def member_show(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    return shown(request, "member", "members", _member(world, pool, request.match_info["id"]))


@lb_route("POST", "/pools/{pool_id}/members")
async def member_create(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    body = await payload(request, "member")
    _unknown(world, body, POST_ATTRS["member"], "member")
    if body.get("subnet_id") and body["subnet_id"] not in world.subnets:
        raise EmuError(404, f"Subnet {body['subnet_id']} not found.")
    member = new_member(body, pool, monitored=_monitored(world, pool))
    check_mutable(world.loadbalancers[pool["_lb"]], pool=pool)
    _duplicate_member(world, pool, member)
    _member_lock(world, pool, [])
    world.members[member["id"]] = member
    return shown(request, "member", "members", member, 201)


@lb_route("PUT", "/pools/{pool_id}/members/{id}")
async def member_update(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    member = _member(world, pool, request.match_info["id"])
    body = _cleared(await payload(request, "member"), MEMBER_BATCH_DEFAULTS)
    _unknown(world, body, MEMBER_UPDATABLE, "member")
    _member_lock(world, pool, [(member, "PENDING_UPDATE")])
    member.update(body)
    return shown(request, "member", "members", member)


@lb_route("DELETE", "/pools/{pool_id}/members/{id}")
async def member_delete(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    member = _member(world, pool, request.match_info["id"])
    _member_lock(world, pool, [(member, "PENDING_DELETE")])
    return web.Response(status=204)


def _batch_plan(
    world: World, pool: Obj, wanted: list[Obj]
) -> tuple[list[Obj], list[tuple[Obj, Obj]], list[Obj]]:
    """``(new, updated, deleted)`` as ``MemberBatchController.put`` sorts them: by
    ``(address, protocol_port)``; every member named again counts as updated."""
    old = {
        (m["address"], m["protocol_port"]): m
        for m in children(world, "members", "_pool", pool["id"])
    }
    new: list[Obj] = []
    updated: list[tuple[Obj, Obj]] = []
    seen: set[tuple[str, Any]] = set()
    for spec in wanted:
        known_attributes(spec, "members", POST_ATTRS["member"])
        if spec.get("address") is None:
            raise mandatory("address")
        key = (str(spec["address"]), spec.get("protocol_port"))
        if key not in old:
            new.append(spec)
            continue
        if key in seen:
            raise validation("Member must be updated only once in the same request.")
        seen.add(key)
        updated.append((old[key], spec))
    keys = {(str(s["address"]), s.get("protocol_port")) for s in wanted}
    deleted = [m for k, m in old.items() if k not in keys]
    return new, updated, deleted


@lb_route("PUT", "/pools/{pool_id}/members")
async def member_batch(request: web.Request) -> web.Response:
    """The batch update: 202 without a body; a no-op (nothing old, nothing asked) changes
    nothing, but the status check before it still answers 409 on a pending balancer."""
    world = request.app[WORLD]
    pool = _members_pool(world, request.match_info["pool_id"])
    wanted = await _batch_body(request)
    additive = request.query.get("additive_only", "false").lower() in ("1", "true", "yes")
    check_mutable(world.loadbalancers[pool["_lb"]], pool=pool)
    new, updated, deleted = _batch_plan(world, pool, wanted)
    if not (new or updated or deleted):
        return web.Response(status=202)
    monitored = _monitored(world, pool)
    made: list[Obj] = []
    for spec in new:
        if spec.get("subnet_id") and spec["subnet_id"] not in world.subnets:
            raise EmuError(404, f"Subnet {spec['subnet_id']} not found.")
        member = new_member(spec, pool, monitored=monitored)
        if any(
            (m["address"], m["protocol_port"]) == (member["address"], member["protocol_port"])
            for m in made
        ):
            raise EmuError(
                409,
                "Another member on this pool is already using ip "
                f"{member['address']} on protocol_port {member['protocol_port']}",
            )
        made.append(member)
    gone = [] if additive else [(m, "PENDING_DELETE") for m in deleted]
    _member_lock(world, pool, [*((m, "PENDING_UPDATE") for m, _ in updated), *gone])
    for member, spec in updated:
        changes = {**MEMBER_BATCH_DEFAULTS, **spec}
        member.update({k: v for k, v in changes.items() if k in MEMBER_UPDATABLE})
    for member in made:
        world.members[member["id"]] = member
    return web.Response(status=202)


async def _batch_body(request: web.Request) -> list[Obj]:
    members = (await json_body(request)).get("members")
    if not isinstance(members, list):
        raise mandatory("members")
    return [dict(m) for m in members]


# -- health monitors ------------------------------------------------------------------------


UDP_MONITORS = ("UDP-CONNECT", "SCTP", "TCP", "HTTP")


@lb_route("POST", "/healthmonitors")
async def hm_create(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    body = await payload(request, "healthmonitor")
    _unknown(world, body, POST_ATTRS["healthmonitor"], "healthmonitor")
    if not body.get("pool_id"):
        raise mandatory("pool_id")
    pool = get_obj(world, "pools", str(body["pool_id"]))
    hm = new_healthmonitor(body, pool)
    lb = world.loadbalancers[pool["_lb"]]
    check_provider(lb["provider"], monitor=hm["type"])
    if pool["protocol"] in ("UDP", "SCTP") and hm["type"] not in UDP_MONITORS:
        raise validation(
            f"The associated pool protocol is {pool['protocol']}, so only a "
            f"{'/'.join(UDP_MONITORS)} health monitor is supported."
        )
    check_mutable(lb, pool=pool)
    if _monitored(world, pool):
        raise EmuError(409, "This pool already has a health monitor")
    _member_lock(world, pool, [])
    world.healthmonitors[hm["id"]] = hm
    return shown(request, "healthmonitor", "healthmonitors", hm, 201)


@lb_route("GET", "/healthmonitors")
async def hm_list(request: web.Request) -> web.Response:
    return listing(request, "healthmonitors", request.app[WORLD].healthmonitors.values())


@lb_route("GET", "/healthmonitors/{id}")
async def hm_show(request: web.Request) -> web.Response:
    hm = get_obj(request.app[WORLD], "healthmonitors", request.match_info["id"])
    return shown(request, "healthmonitor", "healthmonitors", hm)


@lb_route("PUT", "/healthmonitors/{id}")
async def hm_update(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    hm = get_obj(world, "healthmonitors", request.match_info["id"])
    body = _cleared(await payload(request, "healthmonitor"), {"max_retries_down": 3})
    _unknown(world, body, HM_UPDATABLE, "healthmonitor")
    _member_lock(world, world.pools[hm["_pool"]], [(hm, "PENDING_UPDATE")])
    hm.update(body)
    return shown(request, "healthmonitor", "healthmonitors", hm)


@lb_route("DELETE", "/healthmonitors/{id}")
async def hm_delete(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    hm = get_obj(world, "healthmonitors", request.match_info["id"])
    _member_lock(world, world.pools[hm["_pool"]], [(hm, "PENDING_DELETE")])
    return web.Response(status=204)


@lb_route("GET", "/l7policies")
async def l7policies(request: web.Request) -> web.Response:
    """No L7 policies are emulated: the list is always empty."""
    return reply({"l7policies": [], "l7policies_links": []})
