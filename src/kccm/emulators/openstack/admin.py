"""The emulator's own test API under ``/_emu/`` (no token; never logged, never faulted):

- ``GET /_emu/config``: ids and credentials of the default world; ``PATCH /_emu/config``
  sets ``lb_active_delay``, ``token_ttl``, ``max_routes``, ``octavia_version`` (``"2.11"``:
  the versions list stops there and listeners know no ``allowed_cidrs``) and
  ``disabled_extensions`` (Neutron aliases to hide, e.g. ``["extraroute-atomic"]``);
- ``POST /_emu/servers`` (name, flavor, networks, az, status, floating, metadata) makes a
  server with a port per network (``device_owner compute:nova``) and, when ``floating``, a
  floating IP on its first port; ``PUT /_emu/servers/{id}/status``; ``DELETE
  /_emu/servers/{id}`` (its ports and the floating IPs made for it go too);
- the request log, faults and token expiry as every emulator serves them
  (:mod:`kccm.emulators.control_routes`); ``POST /_emu/settle`` (pending Octavia changes finish
  now); ``GET /_emu/state`` (what a test may have left behind).
"""

from __future__ import annotations

import secrets
from typing import Any

from aiohttp import web

from kccm.emulators.control_routes import control_routes
from kccm.emulators.openstack import neutron_l3, nova, octavia
from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.faults import add_fault
from kccm.emulators.openstack.octavia_state import settle_now
from kccm.emulators.openstack.rest import WORLD, json_body, reply
from kccm.emulators.openstack.seed import DEFAULTS
from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = ["routes", "state"]

STATUSES = set(nova.POWER)


def config(world: World) -> Obj:
    public, private = world.network_named("public"), world.network_named("private")
    cred = next(iter(world.app_creds.values()))
    sg = next(s for s in world.security_groups.values() if s["name"] == "default")
    return {
        **DEFAULTS,
        "base_url": world.base_url,
        "auth_url": f"{world.base_url}/identity/v3",
        "project_id": world.project_id(),
        "app_cred_id": cred["id"],
        "trust_id": next(iter(world.trusts)),
        "public_network_id": public["id"],
        "public_subnet_id": public["subnets"][0],
        "private_network_id": private["id"],
        "private_subnet_id": private["subnets"][0],
        "private_subnet6_id": private["subnets"][1],
        "router_id": world.router_named("router1")["id"],
        "default_sg_id": sg["id"],
        "lb_active_delay": world.lb_active_delay,
        "token_ttl": world.token_ttl,
        "max_routes": world.max_routes,
        "octavia_version": f"2.{world.octavia_max_minor}",
        "octavia_flavor_id": next(iter(octavia.FLAVORS)),
        "octavia_availability_zone": octavia.AVAILABILITY_ZONES[0],
        "disabled_extensions": sorted(world.disabled_extensions),
    }


routes = control_routes(WORLD, config, add_fault, json_body)


@routes.patch("/_emu/config")
async def set_config(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    if "lb_active_delay" in body:
        world.lb_active_delay = float(body["lb_active_delay"])
    if "token_ttl" in body:
        world.token_ttl = float(body["token_ttl"])
    if "max_routes" in body:
        world.max_routes = int(body["max_routes"])
    if "octavia_version" in body:  # "2.11": serve an Octavia that stops there
        major, _, minor = str(body["octavia_version"]).partition(".")
        if major != "2" or not minor.isdigit() or not 0 <= int(minor) <= 30:
            raise EmuError(400, f"octavia_version must be 2.0 to 2.30: {body['octavia_version']}")
        world.octavia_max_minor = int(minor)
    if "disabled_extensions" in body:
        world.disabled_extensions = set(body["disabled_extensions"])
    return reply(config(world))


def add_server(world: World, body: Obj) -> Obj:
    status = str(body.get("status", "ACTIVE")).upper()
    if status not in STATUSES:
        raise EmuError(400, f"unknown server status {status!r}")
    flavor = world.flavor_named(str(body.get("flavor", "m1.small")))
    project_id = world.project_id()
    stamp = now_iso()
    server: Obj = {
        "id": new_id(),
        "name": str(body["name"]),
        "status": status,
        "tenant_id": project_id,
        "user_id": next(iter(world.users)),
        "metadata": dict(body.get("metadata") or {}),
        "hostId": secrets.token_hex(28),
        "image_id": "e6b0c1a4-4f2c-4a53-9c0c-2b1c1c1e0d01",
        "flavor_id": flavor["id"],
        "az": str(body.get("az", DEFAULTS["az"])),
        "created": stamp,
        "updated": stamp,
        "tags": [],
        "emu_fips": [],
    }
    sg = [s["id"] for s in world.security_groups.values() if s["name"] == "default"]
    ports = [
        world.new_port(
            world.network_named(str(net))["id"],
            device_id=server["id"],
            device_owner="compute:nova",
            tenant_id=project_id,
            security_groups=sg,
            status="ACTIVE" if status == "ACTIVE" else "DOWN",
        )
        for net in body.get("networks", ("private",))
    ]
    world.servers[server["id"]] = server
    if body.get("floating") and ports:
        fip = neutron_l3.create_floatingip(
            world,
            {"floating_network_id": world.network_named("public")["id"], "port_id": ports[0]["id"]},
        )
        server["emu_fips"].append(fip["id"])
    return nova.render_server(world, server)


@routes.post("/_emu/servers")
async def post_server(request: web.Request) -> web.Response:
    body = await json_body(request)
    if "name" not in body:
        raise EmuError(400, "name is required")
    return reply(add_server(request.app[WORLD], body), 201)


def _server(world: World, server_id: str) -> Obj:
    server = world.servers.get(server_id)
    if server is None:
        raise EmuError(404, f"Instance {server_id} could not be found.")
    return server


@routes.put("/_emu/servers/{id}/status")
async def put_status(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    server = _server(world, request.match_info["id"])
    status = str(body.get("status", "")).upper()
    if status not in STATUSES:
        raise EmuError(400, f"unknown server status {status!r}")
    server["status"], server["updated"] = status, now_iso()
    return reply(nova.render_server(world, server))


@routes.delete("/_emu/servers/{id}")
async def delete_server(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    server = _server(world, request.match_info["id"])
    for fip_id in server["emu_fips"]:
        world.floatingips.pop(fip_id, None)
    for port_id in [p["id"] for p in world.ports.values() if p["device_id"] == server["id"]]:
        port = world.ports.pop(port_id)
        for fip in world.floatingips.values():
            if fip["port_id"] == port["id"]:
                fip.update(port_id=None, fixed_ip_address=None, router_id=None, status="DOWN")
    del world.servers[server["id"]]
    return web.Response(status=204)


@routes.post("/_emu/settle")
async def settle(request: web.Request) -> web.Response:
    """Finish every pending Octavia change now (what the real API's helper does)."""
    return reply({"settled": settle_now(request.app[WORLD])})


def state(world: World) -> dict[str, list[Any]]:
    """What tests make and must remove: Octavia objects, floating IPs (but those made for
    servers), security groups but ``default`` and their rules, router routes, ports that are
    neither seeded nor a server's, allowed address pairs, servers, networks and subnets that
    were not seeded."""
    server_fips = {f for s in world.servers.values() for f in s["emu_fips"]}
    default_sgs = {s["id"] for s in world.security_groups.values() if s["name"] == "default"}
    return {
        "loadbalancers": sorted(world.loadbalancers),
        "listeners": sorted(world.listeners),
        "pools": sorted(world.pools),
        "members": sorted(world.members),
        "healthmonitors": sorted(world.healthmonitors),
        "secrets": sorted(world.secrets),
        "containers": sorted(world.containers),
        "floatingips": sorted(set(world.floatingips) - server_fips),
        "security_groups": sorted(set(world.security_groups) - default_sgs),
        "security_group_rules": sorted(
            r["id"] for r in world.sg_rules.values() if r["security_group_id"] not in default_sgs
        )
        + sorted(
            r["id"]
            for r in world.sg_rules.values()
            if r["security_group_id"] in default_sgs and not r["belongs_to_default_sg"]
        ),
        "routes": sorted(
            f"{r['name']}: {route['destination']} via {route['nexthop']}"
            for r in world.routers.values()
            for route in r["routes"]
        ),
        "ports": sorted(
            p["id"]
            for p in world.ports.values()
            if p["id"] not in world.baseline_ports and p["device_id"] not in world.servers
        ),
        "allowed_address_pairs": sorted(
            f"{p['id']}: {pair['ip_address']}"
            for p in world.ports.values()
            for pair in p["allowed_address_pairs"]
        ),
        "servers": sorted(world.servers),
        "networks": sorted((set(world.networks) | set(world.subnets)) - world.baseline_networks),
    }


@routes.get("/_emu/state")
async def get_state(request: web.Request) -> web.Response:
    return reply(state(request.app[WORLD]))
