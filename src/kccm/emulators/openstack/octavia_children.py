"""Octavia listeners, pools, members (the batch update included) and health monitors
(octavia/api/v2/controllers/{listener,pool,member,health_monitor}.py; gophercloud
openstack/loadbalancer/v2/{listeners,pools,monitors}).

Every change first checks what Octavia checks, in its order: the parent objects exist, the
request is valid, the pool is not pending (members, monitors: ``Pool <id> is immutable``),
the balancer is ``ACTIVE`` (``Load Balancer <id> is immutable``), then duplicates; only then
are the objects set pending (:func:`~kccm.emulators.openstack.octavia_model.lock`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kccm.emulators.openstack import octavia
from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.octavia import (
    Route,
    check_protocols,
    check_provider,
    get_obj,
    listing,
    no_duplicate,
    payload,
    shown,
)
from kccm.emulators.openstack.octavia_model import (
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
from kccm.emulators.openstack.octavia_state import check_mutable, lock
from kccm.emulators.openstack.octavia_wsme import LISTENER_BOUNDS, MEMBER_BOUNDS, check_bounds
from kccm.emulators.openstack.rest import WORLD, json_body, reply
from kccm.emulators.openstack.world import Obj, World

__all__ = ["routes"]

routes = web.RouteTableDef()


def lb_route(method: str, path: str) -> Callable[[Route], Route]:
    return octavia.lb_route(method, path, routes)


def read_routes(kind: str, key: str, special: dict[str, Any] | None = None) -> None:
    """``GET /<kind>`` (:func:`~kccm.emulators.openstack.octavia.listing`, with the ``special``
    filters) and ``GET /<kind>/{id}`` (one object as ``{key: ...}``)."""

    async def list_all(request: web.Request) -> web.Response:
        return listing(request, kind, getattr(request.app[WORLD], kind).values(), special)

    async def show_one(request: web.Request) -> web.Response:
        obj = get_obj(request.app[WORLD], kind, request.match_info["id"])
        return shown(request, key, kind, obj)

    lb_route("GET", f"/{kind}")(list_all)
    lb_route("GET", f"/{kind}/{{id}}")(show_one)


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


def _listener_checks(world: World, listener: Obj, body: Obj) -> None:
    check_bounds(body, LISTENER_BOUNDS)
    lb = world.loadbalancers[listener["_lb"]]
    if "default_pool_id" in body:
        _default_pool(world, lb, body["default_pool_id"], listener["protocol"])
    if "allowed_cidrs" in body:
        body["allowed_cidrs"] = check_cidrs(body["allowed_cidrs"], lb)


def _listener_lock(world: World, listener: Obj, status: str) -> None:
    lock(world, world.loadbalancers[listener["_lb"]], touched=[(listener, status)])


read_routes("listeners", "listener", LB_FILTER)


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


def _pool_checks(world: World, pool: Obj, body: Obj) -> None:
    if "lb_algorithm" in body:
        check_provider(world.loadbalancers[pool["_lb"]]["provider"], algorithm=body["lb_algorithm"])


def _pool_lock(world: World, pool: Obj, status: str, extra: Sequence[tuple[Obj, str]] = ()) -> None:
    """The balancer locked, the pool ``status``, its listeners (and ``extra``) pending."""
    touched = [(li, "PENDING_UPDATE") for li in _pool_listeners(world, pool)]
    lock(world, world.loadbalancers[pool["_lb"]], touched=[*touched, (pool, status), *extra])


read_routes("pools", "pool", LB_FILTER)


# -- members -----------------------------------------------------------------------------


def _member_lock(world: World, pool: Obj, extra: list[tuple[Obj, str]]) -> None:
    check_mutable(world.loadbalancers[pool["_lb"]], pool=pool)
    _pool_lock(world, pool, "PENDING_UPDATE", extra)


def _pool_child_lock(world: World, child: Obj, status: str) -> None:
    """A member or health monitor set ``status``: :func:`_member_lock` of its pool."""
    _member_lock(world, world.pools[child["_pool"]], [(child, status)])


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


def _member_of_path(world: World, match: Mapping[str, str]) -> Obj:
    return _member(world, _members_pool(world, match["pool_id"]), match["id"])


@lb_route("GET", "/pools/{pool_id}/members/{id}")
async def member_show(request: web.Request) -> web.Response:
    member = _member_of_path(request.app[WORLD], request.match_info)
    return shown(request, "member", "members", member)


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


read_routes("healthmonitors", "healthmonitor")


# -- updates and deletions: one shape for every kind ----------------------------------------


def _member_checks(world: World, member: Obj, body: Obj) -> None:
    check_bounds(body, MEMBER_BOUNDS)


def _no_checks(world: World, obj: Obj, body: Obj) -> None:
    pass


@dataclass(frozen=True)
class Writable:
    """``PUT`` and ``DELETE`` of one kind (``listeners``: the object is a ``listener``), at
    ``/<kind>/{id}`` unless ``path`` and ``find`` (the object a path's match info names, or
    its NotFound) say otherwise. An update is ``_cleared`` with ``defaults``, takes only
    ``updatable`` attributes and passes the kind's ``checks``; then ``set_pending`` gives the
    object its new provisioning status and locks the balancer as Octavia does."""

    kind: str
    updatable: set[str]
    defaults: dict[str, Any]
    set_pending: Callable[[World, Obj, str], None]
    checks: Callable[[World, Obj, Obj], None] = _no_checks
    path: str = ""
    find: Callable[[World, Mapping[str, str]], Obj] | None = None

    def register(self) -> None:
        path = self.path or f"/{self.kind}/{{id}}"
        lb_route("PUT", path)(self.update)
        lb_route("DELETE", path)(self.delete)

    def _found(self, request: web.Request) -> Obj:
        world, match = request.app[WORLD], request.match_info
        return self.find(world, match) if self.find else get_obj(world, self.kind, match["id"])

    async def update(self, request: web.Request) -> web.Response:
        world, key, obj = request.app[WORLD], self.kind[:-1], self._found(request)
        body = _cleared(await payload(request, key), self.defaults)
        _unknown(world, body, self.updatable, key)
        self.checks(world, obj, body)
        self.set_pending(world, obj, "PENDING_UPDATE")
        obj.update(body)
        return shown(request, key, self.kind, obj)

    async def delete(self, request: web.Request) -> web.Response:
        self.set_pending(request.app[WORLD], self._found(request), "PENDING_DELETE")
        return web.Response(status=204)


for writable in (
    Writable("listeners", LISTENER_UPDATABLE, LISTENER_DEFAULTS, _listener_lock, _listener_checks),
    Writable("pools", POOL_UPDATABLE, {}, _pool_lock, _pool_checks),
    Writable(
        "members",
        MEMBER_UPDATABLE,
        MEMBER_BATCH_DEFAULTS,
        _pool_child_lock,
        _member_checks,
        path="/pools/{pool_id}/members/{id}",
        find=_member_of_path,
    ),
    Writable("healthmonitors", HM_UPDATABLE, {"max_retries_down": 3}, _pool_child_lock),
):
    writable.register()


@lb_route("GET", "/l7policies")
async def l7policies(request: web.Request) -> web.Response:
    """No L7 policies are emulated: the list is always empty."""
    return reply({"l7policies": [], "l7policies_links": []})
