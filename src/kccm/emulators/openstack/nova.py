"""Nova's compute API v2.1, the parts a cloud provider reads (nova/api/openstack/compute/
servers.py, views/servers.py, flavors.py, views/flavors.py, attach_interfaces.py;
gophercloud openstack/compute/v2/servers, flavors, attachinterfaces).

Servers are records of their own; ``addresses`` are rendered per request from the Neutron
ports whose ``device_id`` is the server and the floating IPs on them (keyed by network name,
fixed before floating, ``OS-EXT-IPS:type`` and ``OS-EXT-IPS-MAC:mac_addr``). The ``flavor``
is ``{"id", "links"}`` below microversion 2.47 and the embedded flavor with
``original_name`` from it on. List filters: ``name`` is a regular expression searched in the
name, ``status`` exact, ``limit``/``marker`` with ``servers_links``; newest first.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.query import page
from kccm.emulators.openstack.rest import WORLD, reply
from kccm.emulators.openstack.world import Obj, World

__all__ = ["MAX_MICROVERSION", "microversion", "render_server", "routes"]

routes = web.RouteTableDef()
PREFIX = "/compute/v2.1"
MAX_MICROVERSION = (2, 96)
MAX_LIMIT = 1000  # nova.conf [api] max_limit
POWER = {  # status -> (OS-EXT-STS:vm_state, OS-EXT-STS:power_state); nova/compute/power_state.py
    "ACTIVE": ("active", 1),
    "SHUTOFF": ("stopped", 4),
    "PAUSED": ("paused", 3),
    "SUSPENDED": ("suspended", 7),
    "SHELVED_OFFLOADED": ("shelved_offloaded", 4),
    "ERROR": ("error", 0),
    "BUILD": ("building", 0),
    "SOFT_DELETED": ("soft-delete", 4),
}


def microversion(request: web.Request) -> tuple[int, int]:
    """The asked microversion (``OpenStack-API-Version: compute 2.x`` or the legacy
    ``X-OpenStack-Nova-API-Version``); 2.1 when absent, the maximum for ``latest``."""
    text = request.headers.get("OpenStack-API-Version", "")
    parts = text.split()
    value = parts[1] if len(parts) == 2 and parts[0] == "compute" else ""
    value = value or request.headers.get("X-OpenStack-Nova-API-Version", "")
    if not value:
        return (2, 1)
    if value == "latest":
        return MAX_MICROVERSION
    try:
        major, minor = (int(p) for p in value.split("."))
    except ValueError as exc:
        raise EmuError(400, f"Invalid API version request: {value}") from exc
    if (major, minor) > MAX_MICROVERSION or (major, minor) < (2, 1):
        raise EmuError(
            406,
            f"Version {value} is not supported by the API. Minimum is 2.1 "
            f"and maximum is {MAX_MICROVERSION[0]}.{MAX_MICROVERSION[1]}.",
        )
    return (major, minor)


def _answer(request: web.Request, body: Any, status: int = 200) -> web.Response:
    major, minor = microversion(request)
    headers = {
        "OpenStack-API-Version": f"compute {major}.{minor}",
        "X-OpenStack-Nova-API-Version": f"{major}.{minor}",
        "Vary": "OpenStack-API-Version, X-OpenStack-Nova-API-Version",
    }
    return reply(body, status, headers)


def _link(world: World, kind: str, ident: str) -> list[Obj]:
    return [
        {"rel": "self", "href": f"{world.base_url}{PREFIX}/{kind}/{ident}"},
        {"rel": "bookmark", "href": f"{world.base_url}/compute/{kind}/{ident}"},
    ]


Wiring = tuple[dict[str, list[Obj]], dict[tuple[str, str], list[Obj]]]


def wiring(world: World) -> Wiring:
    """Ports by device and floating IPs by (port, fixed IP), built once per request (a
    listing of a thousand servers would otherwise scan every port per server)."""
    ports: dict[str, list[Obj]] = {}
    for port in world.ports.values():
        ports.setdefault(port["device_id"], []).append(port)
    fips: dict[tuple[str, str], list[Obj]] = {}
    for fip in world.floatingips.values():
        if fip["port_id"]:
            fips.setdefault((fip["port_id"], fip["fixed_ip_address"]), []).append(fip)
    return ports, fips


def addresses(world: World, server_id: str, wired: Wiring | None = None) -> dict[str, list[Obj]]:
    """``addresses`` as Nova's network info cache has them: per network name, each fixed IP
    followed by the floating IPs on it."""
    ports, fips = wired or wiring(world)
    result: dict[str, list[Obj]] = {}
    for port in ports.get(server_id, ()):
        name = world.networks[port["network_id"]]["name"]
        entries = result.setdefault(name, [])
        for fixed in port["fixed_ips"]:
            entries.append(_address(fixed["ip_address"], "fixed", port["mac_address"]))
            for fip in fips.get((port["id"], fixed["ip_address"]), ()):
                entries.append(
                    _address(fip["floating_ip_address"], "floating", port["mac_address"])
                )
    return result


def _address(addr: str, kind: str, mac: str) -> Obj:
    return {
        "version": ipaddress.ip_address(addr).version,
        "addr": addr,
        "OS-EXT-IPS:type": kind,
        "OS-EXT-IPS-MAC:mac_addr": mac,
    }


def _flavor_ref(world: World, server: Obj, version: tuple[int, int]) -> Obj:
    flavor = world.flavors[server["flavor_id"]]
    if version < (2, 47):
        return {"id": flavor["id"], "links": _link(world, "flavors", flavor["id"])[1:]}
    return {
        "vcpus": flavor["vcpus"],
        "ram": flavor["ram"],
        "disk": flavor["disk"],
        "ephemeral": flavor["OS-FLV-EXT-DATA:ephemeral"],
        "swap": 0,
        "original_name": flavor["name"],
        "extra_specs": dict(flavor["extra_specs"]),
    }


def render_server(
    world: World, server: Obj, version: tuple[int, int] = (2, 1), wired: Wiring | None = None
) -> Obj:
    """A server as ``GET /servers/{id}`` answers it at ``version``."""
    vm_state, power = POWER.get(server["status"], ("active", 1))
    body: Obj = {
        "id": server["id"],
        "name": server["name"],
        "status": server["status"],
        "tenant_id": server["tenant_id"],
        "user_id": server["user_id"],
        "metadata": dict(server["metadata"]),
        "hostId": server["hostId"],
        "image": {
            "id": server["image_id"],
            "links": _link(world, "images", server["image_id"])[1:],
        },
        "flavor": _flavor_ref(world, server, version),
        "created": server["created"],
        "updated": server["updated"],
        "addresses": addresses(world, server["id"], wired),
        "accessIPv4": "",
        "accessIPv6": "",
        "links": _link(world, "servers", server["id"]),
        "OS-DCF:diskConfig": "MANUAL",
        "progress": 0,
        "OS-EXT-AZ:availability_zone": server["az"],
        "config_drive": "",
        "key_name": None,
        "OS-SRV-USG:launched_at": server["created"].rstrip("Z") + ".000000",
        "OS-SRV-USG:terminated_at": None,
        "OS-EXT-STS:task_state": None,
        "OS-EXT-STS:vm_state": vm_state,
        "OS-EXT-STS:power_state": power,
        "os-extended-volumes:volumes_attached": [],
        "security_groups": [{"name": "default"}],
    }
    if version >= (2, 26):
        body["tags"] = list(server.get("tags", []))
    return body


def _server(world: World, server_id: str) -> Obj:
    server = world.servers.get(server_id)
    if server is None:
        raise EmuError(404, f"Instance {server_id} could not be found.")
    return server


def _matches(world: World, server: Obj, query: Any, wired: Wiring) -> bool:
    name = query.get("name")
    if name is not None:
        try:
            if not re.search(name, server["name"]):
                return False
        except re.error as exc:
            raise EmuError(400, f"Invalid regular expression {name!r}: {exc}") from exc
    status = query.get("status")
    if status is not None and server["status"] != status.upper():
        return False
    flavor = query.get("flavor")
    if flavor is not None and server["flavor_id"] != flavor:
        return False
    address = query.get("ip")
    if address is not None:
        found = addresses(world, server["id"], wired)
        fixed = [a["addr"] for net in found.values() for a in net]
        if not any(re.search(address, a) for a in fixed):
            return False
    return True


def _listing(request: web.Request) -> tuple[list[Obj], dict[str, Any]]:
    world = request.app[WORLD]
    wired = wiring(world)
    found = [
        s for s in reversed(world.servers.values()) if _matches(world, s, request.query, wired)
    ]
    return page(
        found, request.query, "servers", f"{world.base_url}{request.path}", max_limit=MAX_LIMIT
    )


@routes.get(PREFIX + "/servers/detail")
async def list_detail(request: web.Request) -> web.Response:
    world, version = request.app[WORLD], microversion(request)
    servers, links = _listing(request)
    wired = wiring(world)
    body = {"servers": [render_server(world, s, version, wired) for s in servers], **links}
    return _answer(request, body)


@routes.get(PREFIX + "/servers")
async def list_brief(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    servers, links = _listing(request)
    brief = [
        {"id": s["id"], "name": s["name"], "links": _link(world, "servers", s["id"])}
        for s in servers
    ]
    return _answer(request, {"servers": brief, **links})


@routes.get(PREFIX + "/servers/{id}")
async def show(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    server = _server(world, request.match_info["id"])
    return _answer(request, {"server": render_server(world, server, microversion(request))})


@routes.get(PREFIX + "/servers/{id}/os-interface")
async def interfaces(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    server = _server(world, request.match_info["id"])
    attachments = [
        {
            "port_state": port["status"],
            "fixed_ips": [dict(ip) for ip in port["fixed_ips"]],
            "port_id": port["id"],
            "net_id": port["network_id"],
            "mac_addr": port["mac_address"],
        }
        for port in world.ports.values()
        if port["device_id"] == server["id"]
    ]
    return _answer(request, {"interfaceAttachments": attachments})


def _flavor_view(world: World, flavor: Obj, version: tuple[int, int]) -> Obj:
    body = {k: v for k, v in flavor.items() if k not in ("description", "extra_specs")}
    body["links"] = _link(world, "flavors", flavor["id"])
    if version >= (2, 55):
        body["description"] = flavor["description"]
    if version >= (2, 61):
        body["extra_specs"] = dict(flavor["extra_specs"])
    if version >= (2, 75):
        body["swap"] = 0
    return body


@routes.get(PREFIX + "/flavors/detail")
async def flavors_detail(request: web.Request) -> web.Response:
    world, version = request.app[WORLD], microversion(request)
    flavors = [_flavor_view(world, f, version) for f in world.flavors.values()]
    return _answer(request, {"flavors": flavors})


@routes.get(PREFIX + "/flavors")
async def flavors_brief(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    brief = [
        {"id": f["id"], "name": f["name"], "links": _link(world, "flavors", f["id"])}
        for f in world.flavors.values()
    ]
    return _answer(request, {"flavors": brief})


@routes.get(PREFIX + "/flavors/{id}")
async def flavor_show(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    flavor = world.flavors.get(request.match_info["id"])
    if flavor is None:
        raise EmuError(404, f"Flavor {request.match_info['id']} could not be found.")
    return _answer(request, {"flavor": _flavor_view(world, flavor, microversion(request))})


def _v21(world: World) -> Obj:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": f"{MAX_MICROVERSION[0]}.{MAX_MICROVERSION[1]}",
        "min_version": "2.1",
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": f"{world.base_url}{PREFIX}/"}],
        "media-types": [
            {
                "base": "application/json",
                "type": "application/vnd.openstack.compute+json;version=2.1",
            }
        ],
    }


@routes.get(PREFIX)
@routes.get(PREFIX + "/")
async def version_doc(request: web.Request) -> web.Response:
    return reply({"version": _v21(request.app[WORLD])})


@routes.get("/compute")
@routes.get("/compute/")
async def versions_doc(request: web.Request) -> web.Response:
    return reply({"versions": [_v21(request.app[WORLD])]})
