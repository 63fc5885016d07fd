"""Octavia v2: version discovery and load balancers, the fully populated create included
(octavia/api/root_controller.py, octavia/api/v2/controllers/load_balancer.py; gophercloud
openstack/loadbalancer/v2/{apiversions,loadbalancers}).

Served under ``/load-balancer/v2.0/lbaas``, ``/load-balancer/v2/lbaas`` and (as Octavia's
``BaseV2Controller`` does) without ``lbaas``. Listeners, pools, members and health monitors
are in :mod:`kccm.emulators.openstack.octavia_children`; objects, views and provisioning
states in :mod:`kccm.emulators.openstack.octavia_model`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.octavia_model import (
    LISTENER_POOL_PROTOCOLS,
    known_attributes,
    mandatory,
    new_healthmonitor,
    new_listener,
    new_member,
    new_pool,
    not_found,
    validation,
    view,
)
from kccm.emulators.openstack.octavia_state import lock, member_health, settle_later
from kccm.emulators.openstack.octavia_wsme import check_ip
from kccm.emulators.openstack.query import (
    CONTROL,
    TAG_KEYS,
    filter_items,
    page,
    project_fields,
    sort_items,
)
from kccm.emulators.openstack.rest import WORLD, json_body, reply, request_token
from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = [
    "AVAILABILITY_ZONES",
    "FLAVORS",
    "PROVIDERS",
    "check_protocols",
    "check_provider",
    "get_obj",
    "lb_route",
    "listing",
    "no_duplicate",
    "payload",
    "routes",
    "shown",
    "vip_of",
]

routes = web.RouteTableDef()
ROOTS = (
    "/load-balancer/v2.0/lbaas",
    "/load-balancer/v2/lbaas",
    "/load-balancer/v2.0",
    "/load-balancer/v2",
)
PROVIDERS = {
    "amphora": "The Octavia Amphora driver.",
    "octavia": "Deprecated alias of the Octavia Amphora driver.",
    "ovn": "Octavia OVN driver.",
}
AMPHORA_ALGORITHMS = ("ROUND_ROBIN", "SOURCE_IP", "LEAST_CONNECTIONS")
FLAVORS = {"4c9a5a8a-5a4e-4f5e-9b55-0d6c1a7f0a01": "small"}
AVAILABILITY_ZONES = ("nova",)
VERSIONS = [f"v2.{n}" for n in range(31)]
DATES = (
    "2016-12-11",
    "2018-04-20",
    "2018-07-31",
    "2018-12-18",
    "2018-12-19",
    "2019-01-21",
    "2019-01-25",
    "2018-01-25T12:00:00Z",  # v2.7 (octavia/api/root_controller.py, as the real API answers)
    "2019-02-12",
    "2019-03-04",
    "2019-03-05",
    "2019-06-24",
    "2019-09-11",
    "2019-09-13",
    "2019-11-10",
    "2020-03-10",
    "2020-03-15",
    "2020-04-29",
    "2020-04-29T01:00:00Z",  # v2.18
    "2020-05-12",
    "2020-08-02",
    "2020-09-03",
    "2020-09-04",
    "2020-09-07",
    "2020-10-15",
    "2021-10-02",
    "2022-08-29",
    "2023-05-05",
    "2023-11-08",
    "2024-10-15",
    "2025-02-26",
)
Route = Callable[[web.Request], Any]


def lb_route(method: str, path: str, table: web.RouteTableDef = routes) -> Callable[[Route], Route]:
    """Register a handler under every Octavia root."""

    def register(handler: Route) -> Route:
        for root in ROOTS:
            table.route(method, root + path)(handler)
        return handler

    return register


@routes.get("/load-balancer")
@routes.get("/load-balancer/")
async def versions(request: web.Request) -> web.Response:
    """The version list of Octavia 19 (root_controller.py), v2.30 ``CURRENT``; an older
    Octavia's when ``World.octavia_max_minor`` is set lower."""
    world = request.app[WORLD]
    base = f"{world.base_url}/load-balancer/"
    served = list(zip(VERSIONS, DATES, strict=True))[: world.octavia_max_minor + 1]
    found = [
        {
            "id": version,
            "status": "CURRENT" if version == served[-1][0] else "SUPPORTED",
            "updated": date if "T" in date else f"{date}T00:00:00Z",
            "links": [{"href": base + "v2", "rel": "self"}],
        }
        for version, date in served
    ]
    return reply({"versions": found})


@routes.get("/load-balancer/v2")
@routes.get("/load-balancer/v2/")
@routes.get("/load-balancer/v2.0")
@routes.get("/load-balancer/v2.0/")
async def v2(request: web.Request) -> web.Response:
    return reply("v2")


# -- helpers shared with octavia_children ---------------------------------------------------


def get_obj(world: World, kind: str, ident: str, status: int = 404) -> Obj:
    found: Obj | None = getattr(world, kind).get(ident)
    if found is None:
        raise not_found(kind, ident, status)
    return found


def listing(
    request: web.Request, kind: str, items: Iterable[Obj], special: dict[str, Any] | None = None
) -> web.Response:
    """A list answer sorted as Octavia sorts by default (``created_at``, then ``id``):
    filters on any attribute and tags, ``fields``, paging, and the ``<kind>_links`` Octavia
    always includes."""
    world = request.app[WORLD]
    ordered = sorted(items, key=lambda obj: (obj["created_at"], obj["id"]))  # DEFAULT_SORT_KEYS
    views = [view(world, kind, obj) for obj in ordered]
    _check_filters(kind, request.query.keys(), views, special or {})
    found = sort_items(filter_items(views, request.query, special), request.query)
    found, links = page(
        found,
        request.query,
        kind,
        world.base_url + request.path,
        always_links=True,
        max_limit=1000,  # octavia.conf [api_settings] pagination_max_limit
        octavia=True,
    )
    return reply({kind: project_fields(found, request.query), **links})


FILTER_EXTRAS = {"members": {"pool_id"}, "healthmonitors": {"pool_id"}}
"""Data-model attributes Octavia filters on that its views do not show."""


def _check_filters(
    kind: str, keys: Iterable[str], views: list[Obj], special: dict[str, Any]
) -> None:
    """Octavia's pagination helper refuses a filter on anything but the data model's
    attributes (``InvalidFilterArgument``, 400): e.g. ``listener_id`` on pools. Judged by the
    keys of the views at hand (none: nothing to judge by)."""
    known = set().union(*(v.keys() for v in views)) | set(special) | CONTROL | TAG_KEYS
    known |= FILTER_EXTRAS.get(kind, set())
    if views and any(key not in known for key in keys):
        raise EmuError(400, "One or more arguments are either duplicate or invalid")


def shown(request: web.Request, key: str, kind: str, obj: Obj, status: int = 200) -> web.Response:
    body = view(request.app[WORLD], kind, obj)
    return reply({key: project_fields([body], request.query)[0]}, status)


async def payload(request: web.Request, key: str) -> Obj:
    body = (await json_body(request)).get(key)
    if not isinstance(body, dict):
        raise mandatory(key)
    return body


def check_provider(
    provider: str,
    *,
    algorithm: str | None = None,
    protocol: str | None = None,
    monitor: str | None = None,
) -> None:
    """The amphora and OVN providers' refusals (octavia/api/drivers/amphora_driver/v2/
    driver.py ``AMPHORA_SUPPORTED_LB_ALGORITHMS``, ovn_octavia_provider/driver.py), as
    Octavia relays them: ``ProviderUnsupportedOptionError``, 501."""
    if provider in ("amphora", "octavia"):
        if algorithm is not None and algorithm not in AMPHORA_ALGORITHMS:
            raise EmuError(
                501,
                f"Provider '{provider}' does not support a requested option: Amphora provider "
                f"does not support {algorithm} algorithm.",
            )
        return
    if provider != "ovn":
        return
    problem = ""
    if algorithm is not None and algorithm != "SOURCE_IP_PORT":
        problem = f"OVN provider does not support {algorithm} algorithm"
    elif protocol is not None and protocol not in ("TCP", "UDP", "SCTP"):
        problem = f"OVN provider does not support {protocol} protocol"
    elif monitor is not None and monitor not in ("TCP", "UDP-CONNECT", "SCTP"):
        problem = (
            f"OVN provider does not support {monitor} health monitor type. Supported "
            "types: TCP, UDP-CONNECT, SCTP"
        )
    if problem:
        raise EmuError(501, f"Provider 'ovn' does not support a requested option: {problem}")


# -- VIP ---------------------------------------------------------------------------------


def vip_of(world: World, body: Obj) -> dict[str, Any]:
    """The VIP a create asks for (``_validate_vip_request_object``): by port, network
    (+subnet) or subnet; the address given or allocated."""
    port_id, net_id, subnet_id = (
        body.get(k) for k in ("vip_port_id", "vip_network_id", "vip_subnet_id")
    )
    if not (port_id or net_id or subnet_id):
        raise EmuError(
            400,
            "Validation failure: VIP must contain one of: vip_port_id, "
            "vip_network_id, vip_subnet_id.",
        )
    if port_id:
        port = world.ports.get(port_id)
        if port is None:
            raise EmuError(400, f"Port {port_id} not found.")
        fixed = port["fixed_ips"][0]
        return {
            "port_id": port_id,
            "network_id": port["network_id"],
            "owned": False,
            "subnet_id": fixed["subnet_id"],
            "address": fixed["ip_address"],
        }
    if subnet_id and subnet_id not in world.subnets:
        raise EmuError(400, f"Subnet {subnet_id} not found.")
    if net_id and net_id not in world.networks:
        raise EmuError(400, f"Network {net_id} not found.")
    net_id = net_id or world.subnets[str(subnet_id)]["network_id"]
    if not subnet_id:
        candidates = sorted(
            (
                s
                for s in world.networks[net_id]["subnets"]
                if _fits(world.subnets[s], body.get("vip_address"))
            ),
            key=lambda s: world.subnets[s]["ip_version"],
        )
        if not candidates:
            raise validation(
                f"Supplied network does not contain a subnet for VIP address "
                f"specified: {body.get('vip_address')}"
            )
        subnet_id = candidates[0]
    elif world.subnets[subnet_id]["network_id"] != net_id:
        raise validation(f"Subnet {subnet_id} is not on the specified network {net_id}.")
    return {
        "port_id": None,
        "network_id": net_id,
        "subnet_id": subnet_id,
        "owned": True,
        "address": body.get("vip_address"),
    }


def _fits(subnet: Obj, address: str | None) -> bool:
    if address is None:
        return True
    return ipaddress.ip_address(address) in ipaddress.ip_network(subnet["cidr"])


def _vip_port(world: World, lb: Obj, vip: dict[str, Any]) -> None:
    """Octavia's network driver ``allocate_vip``: a port ``octavia-lb-<id>`` owned by
    ``Octavia`` on the VIP subnet."""
    if not vip["owned"]:
        lb.update(vip_port_id=vip["port_id"], vip_address=vip["address"])
        return
    wanted: dict[str, str] = {"subnet_id": vip["subnet_id"]}
    if vip["address"]:
        wanted["ip_address"] = vip["address"]
    port = world.new_port(
        vip["network_id"],
        name=f"octavia-lb-{lb['id']}",
        device_owner="Octavia",
        device_id=f"lb-{lb['id']}",
        tenant_id=lb["project_id"],
        fixed_ips=[wanted],
    )
    lb.update(
        vip_port_id=port["id"], vip_address=port["fixed_ips"][0]["ip_address"], _vip_owned=True
    )


# -- the fully populated create ------------------------------------------------------------


def _graph_pools(listeners: list[Obj], pools: list[Obj]) -> None:
    """Move full default pools of listeners to the pool list (load_balancer.py
    ``_graph_create``) and check names and references."""
    required: set[str] = set()
    for spec in listeners:
        default = spec.get("default_pool")
        if not default:
            continue
        if not default.get("name"):
            raise validation("Pools must be named when creating a fully populated loadbalancer.")
        if len(default) > 1:
            pools.append(default)
        else:
            required.add(default["name"])
    names = [p.get("name") for p in pools]
    if len(set(names)) != len(names):
        raise validation("Pool names must be unique when creating a fully populated loadbalancer.")
    for name in sorted(required - set(names)):
        raise validation(f"Pool '{name}' was referenced but no full definition was found.")
    for spec in pools:
        for attr in ("protocol", "lb_algorithm"):
            if attr not in spec:
                raise validation(
                    f"Pool definition for '{spec.get('name')}' missing required attribute: {attr}"
                )


def graph(world: World, lb: Obj, body: Obj) -> list[tuple[str, Obj]]:
    """Every object of a fully populated create, validated, not yet stored."""
    listeners = [dict(li) for li in body.get("listeners") or []]
    pools = [dict(p) for p in body.get("pools") or []]
    newest = world.octavia_max_minor
    for spec in listeners:
        known_attributes(spec, "listener_single", max_minor=newest)
        if spec.get("default_pool"):
            known_attributes(spec["default_pool"], "pool_single")
    _graph_pools(listeners, pools)
    made: list[tuple[str, Obj]] = []
    by_name: dict[str, Obj] = {}
    for spec in pools:
        known_attributes(spec, "pool_single")
        for nested in spec.get("members") or []:
            known_attributes(nested, "member_single")
        if spec.get("healthmonitor"):
            known_attributes(spec["healthmonitor"], "healthmonitor_single")
        pool = new_pool(spec, lb)
        check_provider(lb["provider"], algorithm=pool["lb_algorithm"], protocol=pool["protocol"])
        by_name[spec["name"]] = pool
        made.append(("pools", pool))
        monitor = spec.get("healthmonitor")
        if monitor:
            hm = new_healthmonitor(monitor, pool)
            check_provider(lb["provider"], monitor=hm["type"])
            made.append(("healthmonitors", hm))
        for member_spec in spec.get("members") or []:
            # NO_MONITOR even with a monitor in the same request, as the real API answers
            # mostly: MembersController._graph_create reads the session's ORM pool, loaded
            # before the monitor was added (OFFLINE when that object was collected meanwhile).
            made.append(("members", new_member(member_spec, pool, monitored=False)))
    seen: set[tuple[str, int]] = set()
    for spec in listeners:
        default = spec.pop("default_pool", None)
        listener = new_listener(spec, lb)
        check_provider(lb["provider"], protocol=listener["protocol"])
        no_duplicate(seen, listener)
        if default:
            pool = by_name[default["name"]]
            check_protocols(listener["protocol"], pool["protocol"])
            listener["default_pool_id"] = pool["id"]
        made.append(("listeners", listener))
    return made


def check_protocols(listener_protocol: str, pool_protocol: str) -> None:
    if pool_protocol not in LISTENER_POOL_PROTOCOLS.get(listener_protocol, ()):
        raise validation(
            f"The pool protocol '{pool_protocol}' is invalid while the listener "
            f"protocol is '{listener_protocol}'."
        )


L4 = {
    "HTTP": "TCP",
    "HTTPS": "TCP",
    "TCP": "TCP",
    "TERMINATED_HTTPS": "TCP",
    "PROMETHEUS": "TCP",
    "UDP": "UDP",
    "SCTP": "SCTP",
}


def no_duplicate(seen: set[tuple[str, int]], listener: Obj) -> None:
    key = (L4[listener["protocol"]], listener["protocol_port"])
    if key in seen:
        raise EmuError(
            409,
            "Another Listener on this Load Balancer is already using protocol "
            f"{listener['protocol']} and protocol_port {listener['protocol_port']}",
        )
    seen.add(key)


def _new_lb(world: World, body: Obj, project_id: str) -> Obj:
    provider = body.get("provider") or "amphora"
    if provider not in PROVIDERS:
        raise EmuError(400, f"Provider '{provider}' is not enabled.")
    if body.get("flavor_id") and body["flavor_id"] not in FLAVORS:
        raise validation("Invalid flavor_id.")
    zone = body.get("availability_zone")
    if zone and zone not in AVAILABILITY_ZONES:
        raise validation("Invalid availability zone.")  # load_balancer.py
    return {
        "id": new_id(),
        "name": body.get("name") or "",
        "description": body.get("description") or "",
        "admin_state_up": body.get("admin_state_up", True),
        "project_id": body.get("project_id") or project_id,
        "provisioning_status": "PENDING_CREATE",
        "operating_status": "OFFLINE",
        "created_at": now_iso(zulu=False, micro=True),
        "updated_at": None,
        "vip_qos_policy_id": body.get("vip_qos_policy_id"),
        "vip_sg_ids": list(body.get("vip_sg_ids") or []),
        "vip_vnic_type": "normal",
        "additional_vips": [],
        "provider": provider,
        "flavor_id": body.get("flavor_id"),
        "availability_zone": zone,
        "tags": list(body.get("tags") or []),
    }


@lb_route("POST", "/loadbalancers")
async def create(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    body = await payload(request, "loadbalancer")
    known_attributes(body, "loadbalancer")
    check_ip(body.get("vip_address"), "vip_address")
    lb = _new_lb(world, body, request_token(request).project_id)
    vip = vip_of(world, body)
    lb.update(
        vip_network_id=vip["network_id"],
        vip_subnet_id=vip["subnet_id"],
        vip_address=vip["address"],
        vip_port_id=vip["port_id"],
    )
    _vip_port(world, lb, vip)
    try:
        made = graph(world, lb, body)
    except EmuError:
        if lb.get("_vip_owned"):  # the create's rollback deallocates the VIP
            world.ports.pop(lb["vip_port_id"], None)
        raise
    world.loadbalancers[lb["id"]] = lb
    for kind, obj in made:
        getattr(world, kind)[obj["id"]] = obj
    settle_later(world, lb["id"])
    return reply({"loadbalancer": view(world, "loadbalancers", lb, full=True)}, 201)


@lb_route("GET", "/loadbalancers")
async def list_lbs(request: web.Request) -> web.Response:
    return listing(request, "loadbalancers", request.app[WORLD].loadbalancers.values())


@lb_route("GET", "/loadbalancers/{id}")
async def show(request: web.Request) -> web.Response:
    lb = get_obj(request.app[WORLD], "loadbalancers", request.match_info["id"])
    return shown(request, "loadbalancer", "loadbalancers", lb)


LB_UPDATABLE = {"name", "description", "admin_state_up", "vip_qos_policy_id", "vip_sg_ids", "tags"}


@lb_route("PUT", "/loadbalancers/{id}")
async def update(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    lb = get_obj(world, "loadbalancers", request.match_info["id"])
    body = await payload(request, "loadbalancer")
    known_attributes(body, "loadbalancer", LB_UPDATABLE)
    lock(world, lb, resource_error=False)
    lb.update(
        {k: ("" if v is None and k in ("name", "description") else v) for k, v in body.items()}
    )
    return shown(request, "loadbalancer", "loadbalancers", lb)


@lb_route("DELETE", "/loadbalancers/{id}")
async def delete(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    lb = get_obj(world, "loadbalancers", request.match_info["id"])
    cascade = request.query.get("cascade", "false").lower() in ("1", "true", "yes", "on", "y")
    has_children = any(li["_lb"] == lb["id"] for li in world.listeners.values()) or any(
        p["_lb"] == lb["id"] for p in world.pools.values()
    )
    if has_children and not cascade:
        raise validation(f"Cannot delete Load Balancer {lb['id']} - it has children")
    lock(world, lb, resource_error=False, lb_status="PENDING_DELETE")
    return web.Response(status=204)


def _status_tree(world: World, lb: Obj) -> Obj:
    def brief(obj: Obj, *extra: str) -> Obj:
        keys = ("id", "name", "operating_status", "provisioning_status", *extra)
        return {k: obj[k] for k in keys}

    listeners = []
    for li in (x for x in world.listeners.values() if x["_lb"] == lb["id"]):
        pools = []
        pool = world.pools.get(li["default_pool_id"] or "")
        if pool is not None:
            entry = brief(pool)
            entry["members"] = [
                {
                    **brief(m, "address", "protocol_port"),
                    "operating_status": member_health(world, m),
                }
                for m in world.members.values()
                if m["_pool"] == pool["id"]
            ]
            for hm in (h for h in world.healthmonitors.values() if h["_pool"] == pool["id"]):
                entry["health_monitor"] = {**brief(hm), "type": hm["type"]}
            pools.append(entry)
        listeners.append({**brief(li), "pools": pools})
    return {"statuses": {"loadbalancer": {**brief(lb), "listeners": listeners}}}


@lb_route("GET", "/loadbalancers/{id}/status")
async def status(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    return reply(_status_tree(world, get_obj(world, "loadbalancers", request.match_info["id"])))


@lb_route("GET", "/loadbalancers/{id}/stats")
async def stats(request: web.Request) -> web.Response:
    get_obj(request.app[WORLD], "loadbalancers", request.match_info["id"])
    keys = ("bytes_in", "bytes_out", "active_connections", "total_connections", "request_errors")
    return reply({"stats": dict.fromkeys(keys, 0)})


@lb_route("GET", "/providers")
async def providers(request: web.Request) -> web.Response:
    return reply({"providers": [{"name": k, "description": v} for k, v in PROVIDERS.items()]})


@lb_route("GET", "/flavors")
async def flavors(request: web.Request) -> web.Response:
    found = [
        {"id": k, "name": v, "description": "", "enabled": True, "flavor_profile_id": k}
        for k, v in FLAVORS.items()
    ]
    return reply({"flavors": found, "flavors_links": []})


@lb_route("GET", "/availabilityzones")
async def zones(request: web.Request) -> web.Response:
    found = [
        {"name": z, "description": "", "enabled": True, "availability_zone_profile_id": "nova"}
        for z in AVAILABILITY_ZONES
    ]
    return reply({"availability_zones": found, "availability_zones_links": []})
