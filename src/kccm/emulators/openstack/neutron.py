"""Neutron v2.0: networks, subnets, ports, extensions, tags and the version documents
(neutron/api/v2/base.py ``Controller``, neutron/db/db_base_plugin_v2.py, neutron_lib
api/definitions; gophercloud openstack/networking/v2/{networks,subnets,ports},
openstack/networking/v2/extensions/attributestags).

Every resource kind shares one list/show/update/delete path (:data:`KINDS`): filters on any
attribute, ``fields``, ``limit``/``marker``, tags; 404 bodies are ``NeutronError`` with the
neutron-lib exception's class name and text. Floating IPs, routers and security groups are in
:mod:`kccm.emulators.openstack.neutron_l3`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.query import Matcher, filter_items, page, project_fields
from kccm.emulators.openstack.rest import WORLD, json_body, reply
from kccm.emulators.openstack.world import Obj, World

__all__ = ["EXTENSIONS", "KINDS", "Kind", "get", "render", "routes"]

routes = web.RouteTableDef()
PREFIX = "/network/v2.0"


@dataclass(frozen=True)
class Kind:
    """A Neutron resource kind: URL collection, world attribute, body key, 404 text."""

    collection: str
    attr: str
    singular: str
    not_found_kind: str
    not_found: str  # format with {id}
    updatable: frozenset[str] = frozenset()

    def store(self, world: World) -> dict[str, Obj]:
        found: dict[str, Obj] = getattr(world, self.attr)
        return found


KINDS = {
    kind.collection: kind
    for kind in (
        Kind(
            "networks",
            "networks",
            "network",
            "NetworkNotFound",
            "Network {id} could not be found.",
            frozenset({"name", "description", "admin_state_up", "mtu"}),
        ),
        Kind(
            "subnets",
            "subnets",
            "subnet",
            "SubnetNotFound",
            "Subnet {id} could not be found.",
            frozenset(
                {
                    "name",
                    "description",
                    "dns_nameservers",
                    "host_routes",
                    "gateway_ip",
                    "enable_dhcp",
                    "allocation_pools",
                }
            ),
        ),
        Kind(
            "ports",
            "ports",
            "port",
            "PortNotFound",
            "Port {id} could not be found.",
            frozenset(
                {
                    "name",
                    "description",
                    "admin_state_up",
                    "device_id",
                    "device_owner",
                    "allowed_address_pairs",
                    "security_groups",
                    "port_security_enabled",
                    "fixed_ips",
                    "binding:host_id",
                }
            ),
        ),
        Kind(
            "floatingips",
            "floatingips",
            "floatingip",
            "FloatingIPNotFound",
            "Floating IP {id} could not be found",
            frozenset({"port_id", "fixed_ip_address", "description"}),
        ),
        Kind(
            "routers",
            "routers",
            "router",
            "RouterNotFound",
            "Router {id} could not be found",
            frozenset({"name", "description", "admin_state_up", "routes", "external_gateway_info"}),
        ),
        Kind(
            "security-groups",
            "security_groups",
            "security_group",
            "SecurityGroupNotFound",
            "Security group {id} does not exist",
            frozenset({"name", "description"}),
        ),
        Kind(
            "security-group-rules",
            "sg_rules",
            "security_group_rule",
            "SecurityGroupRuleNotFound",
            "Security group rule {id} does not exist",
            frozenset({"description"}),
        ),
    )
}

EXTENSIONS = (
    ("agent", "agent", "The agent management extension."),
    ("allowed-address-pairs", "Allowed Address Pairs", "Provides allowed address pairs"),
    ("binding", "Port Binding", "Expose port bindings of a virtual port to external application"),
    (
        "external-net",
        "Neutron external network",
        "Adds external network attribute to network resource.",
    ),
    ("extraroute", "Neutron Extra Route", "Extra routes configuration for L3 router"),
    (
        "extraroute-atomic",
        "Atomically add/remove extra routes",
        "Edit extra routes of a router on server side by atomically adding/removing extra routes",
    ),
    (
        "ext-gw-mode",
        "Neutron L3 Configurable external gateway mode",
        "Extension of the router abstraction for specifying whether SNAT should occur on the "
        "external gateway",
    ),
    (
        "fip-port-details",
        "Floating IP Port Details Extension",
        "Add port_details attribute to Floating IP resource",
    ),
    ("port-security", "Port Security", "Provides port security"),
    (
        "router",
        "Neutron L3 Router",
        "Router abstraction for basic L3 forwarding between L2 Neutron networks and access to "
        "external networks via a NAT gateway.",
    ),
    ("security-group", "security-group", "The security groups extension."),
    (
        "standard-attr-description",
        "standard-attr-description",
        "Extension to add descriptions to standard attributes",
    ),
    (
        "standard-attr-revisions",
        "Resource revision numbers",
        "This extension will display the revision number of neutron resources.",
    ),
    (
        "standard-attr-tag",
        "Tag support for resources with standard attribute: subnet, trunk, "
        "network_segment_range, router, network, policy, subnetpool, port, security_group, "
        "floatingip",
        "Enables to set tag on resources with standard attribute.",
    ),
    (
        "standard-attr-timestamp",
        "Resource timestamps",
        "Adds created_at and updated_at fields to all Neutron resources that have Neutron "
        "standard attributes.",
    ),
    ("subnet_allocation", "Subnet Allocation", "Enables allocation of subnets from a subnet pool"),
)


def get(world: World, kind: Kind, ident: str) -> Obj:
    found = kind.store(world).get(ident)
    if found is None:
        raise EmuError(404, kind.not_found.format(id=ident), kind=kind.not_found_kind)
    return found


def _kind(request: web.Request) -> Kind:
    kind = KINDS.get(request.match_info["kind"])
    if kind is None:
        raise EmuError(404, "The resource could not be found.", kind="HTTPNotFound")
    return kind


def _fixed_ips_matcher(port: Obj, wanted: list[str]) -> bool:
    """``fixed_ips=ip_address=X`` / ``subnet_id=Y`` / ``ip_address_substr=Z``: one fixed IP
    meets every constraint given (neutron/db/db_base_plugin_common.py)."""
    asked: dict[str, set[str]] = {}
    for text in wanted:
        key, _, value = text.partition("=")
        asked.setdefault(key, set()).add(value)
    for fixed in port["fixed_ips"]:
        if "ip_address" in asked and fixed["ip_address"] not in asked["ip_address"]:
            continue
        if "subnet_id" in asked and fixed["subnet_id"] not in asked["subnet_id"]:
            continue
        substr = asked.get("ip_address_substr", set())
        if substr and not any(s in fixed["ip_address"] for s in substr):
            continue
        return True
    return False


SPECIAL: dict[str, dict[str, Matcher]] = {"ports": {"fixed_ips": _fixed_ips_matcher}}
Hook = Callable[[World, Obj, Obj], None]
UPDATE_HOOKS: dict[str, Hook] = {}
CREATE_HOOKS: dict[str, Callable[[World, Obj], Obj]] = {}
DELETE_HOOKS: dict[str, Callable[[World, Obj], None]] = {}
RENDER_HOOKS: dict[str, Callable[[World, Obj], Obj]] = {}


def render(world: World, kind: Kind, item: Obj) -> Obj:
    hook = RENDER_HOOKS.get(kind.collection)
    return hook(world, item) if hook is not None else item


@routes.get(PREFIX + "/extensions")
async def extensions(request: web.Request) -> web.Response:
    hidden = request.app[WORLD].disabled_extensions
    found = [
        {
            "alias": alias,
            "name": name,
            "description": text,
            "updated": "2013-01-01T10:00:00-00:00",
            "links": [],
        }
        for alias, name, text in EXTENSIONS
        if alias not in hidden
    ]
    return reply({"extensions": found})


@routes.get(PREFIX + "/extensions/{alias}")
async def extension(request: web.Request) -> web.Response:
    alias = request.match_info["alias"]
    for found_alias, name, text in EXTENSIONS:
        if found_alias == alias and alias not in request.app[WORLD].disabled_extensions:
            return reply(
                {
                    "extension": {
                        "alias": alias,
                        "name": name,
                        "description": text,
                        "updated": "2013-01-01T10:00:00-00:00",
                        "links": [],
                    }
                }
            )
    raise EmuError(404, f"Extension with alias {alias} does not exist", kind="HTTPNotFound")


def _versions(world: World) -> Obj:
    return {
        "versions": [
            {
                "id": "v2.0",
                "status": "CURRENT",
                "links": [{"href": f"{world.base_url}/network/v2.0/", "rel": "self"}],
            }
        ]
    }


@routes.get("/network")
@routes.get("/network/")
async def versions(request: web.Request) -> web.Response:
    return reply(_versions(request.app[WORLD]))


@routes.get(PREFIX)
@routes.get(PREFIX + "/")
async def resources(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    found = [
        {
            "name": kind.singular,
            "collection": kind.collection.replace("-", "_"),
            "links": [{"href": f"{world.base_url}{PREFIX}/{kind.collection}", "rel": "self"}],
        }
        for kind in KINDS.values()
    ]
    return reply({"resources": found})


@routes.get(PREFIX + "/{kind}")
async def list_items(request: web.Request) -> web.Response:
    world, kind = request.app[WORLD], _kind(request)
    found = [render(world, kind, item) for item in kind.store(world).values()]
    items = filter_items(found, request.query, SPECIAL.get(kind.collection))
    items, links = page(items, request.query, kind.collection, world.base_url + request.path)
    return reply({kind.collection.replace("-", "_"): project_fields(items, request.query), **links})


@routes.get(PREFIX + "/{kind}/{id}")
async def show(request: web.Request) -> web.Response:
    world, kind = request.app[WORLD], _kind(request)
    item = render(world, kind, get(world, kind, request.match_info["id"]))
    return reply({kind.singular: project_fields([item], request.query)[0]})


@routes.post(PREFIX + "/{kind}")
async def create(request: web.Request) -> web.Response:
    world, kind = request.app[WORLD], _kind(request)
    body = (await json_body(request)).get(kind.singular)
    if not isinstance(body, dict):
        raise EmuError(400, f"Resource body required for {kind.singular}", kind="BadRequest")
    hook = CREATE_HOOKS.get(kind.collection)
    if hook is None:
        raise EmuError(405, "The method is not allowed.", kind="HTTPMethodNotAllowed")
    return reply({kind.singular: render(world, kind, hook(world, body))}, 201)


@routes.put(PREFIX + "/{kind}/{id}")
async def update(request: web.Request) -> web.Response:
    world, kind = request.app[WORLD], _kind(request)
    item = get(world, kind, request.match_info["id"])
    body = (await json_body(request)).get(kind.singular)
    if not isinstance(body, dict):
        raise EmuError(400, f"Resource body required for {kind.singular}", kind="BadRequest")
    bad = sorted(set(body) - kind.updatable)
    if bad:
        raise EmuError(400, f"Cannot update read-only attribute {bad[0]}", kind="HTTPBadRequest")
    hook = UPDATE_HOOKS.get(kind.collection)
    if hook is not None:
        hook(world, item, body)
    else:
        item.update(body)
    world.touch(item)
    return reply({kind.singular: render(world, kind, item)})


@routes.delete(PREFIX + "/{kind}/{id}")
async def delete(request: web.Request) -> web.Response:
    world, kind = request.app[WORLD], _kind(request)
    item = get(world, kind, request.match_info["id"])
    hook = DELETE_HOOKS.get(kind.collection)
    if hook is not None:
        hook(world, item)
    kind.store(world).pop(item["id"], None)
    return web.Response(status=204)


# -- tags (neutron/extensions/tagging.py) ------------------------------------------------------


async def _tagged(request: web.Request) -> Obj:
    return get(request.app[WORLD], _kind(request), request.match_info["id"])


@routes.get(PREFIX + "/{kind}/{id}/tags")
async def tags_get(request: web.Request) -> web.Response:
    return reply({"tags": list((await _tagged(request))["tags"])})


@routes.put(PREFIX + "/{kind}/{id}/tags")
async def tags_replace(request: web.Request) -> web.Response:
    item = await _tagged(request)
    tags = (await json_body(request)).get("tags")
    if not isinstance(tags, list):
        raise EmuError(400, "Invalid input for tags.", kind="InvalidInput")
    item["tags"] = sorted(set(map(str, tags)))
    request.app[WORLD].touch(item)
    return reply({"tags": item["tags"]})


@routes.put(PREFIX + "/{kind}/{id}/tags/{tag}")
async def tag_add(request: web.Request) -> web.Response:
    item = await _tagged(request)
    if request.match_info["tag"] not in item["tags"]:
        item["tags"] = sorted([*item["tags"], request.match_info["tag"]])
        request.app[WORLD].touch(item)
    return web.Response(status=201)


@routes.delete(PREFIX + "/{kind}/{id}/tags/{tag}")
async def tag_remove(request: web.Request) -> web.Response:
    item, tag = await _tagged(request), request.match_info["tag"]
    if tag not in item["tags"]:
        raise EmuError(404, f"Tag {tag} could not be found.", kind="TagNotFound")
    item["tags"] = [t for t in item["tags"] if t != tag]
    request.app[WORLD].touch(item)
    return web.Response(status=204)


@routes.delete(PREFIX + "/{kind}/{id}/tags")
async def tags_clear(request: web.Request) -> web.Response:
    item = await _tagged(request)
    item["tags"] = []
    request.app[WORLD].touch(item)
    return web.Response(status=204)


# -- ports ---------------------------------------------------------------------------------


def _address_pairs(port: Obj, pairs: Any) -> list[Obj]:
    """Neutron fills a pair's ``mac_address`` with the port's and refuses duplicates
    (neutron/db/allowedaddresspairs_db.py, neutron_lib api/definitions/allowedaddresspairs)."""
    if not isinstance(pairs, list):
        raise EmuError(400, "Invalid input for allowed_address_pairs.", kind="InvalidInput")
    result: list[Obj] = []
    for pair in pairs:
        if not isinstance(pair, dict) or "ip_address" not in pair:
            raise EmuError(
                400,
                "AllowedAddressPair must contain ip_address",
                kind="AllowedAddressPairsMissingIP",
            )
        entry = {
            "ip_address": str(pair["ip_address"]),
            "mac_address": pair.get("mac_address") or port["mac_address"],
        }
        try:
            ipaddress.ip_network(entry["ip_address"], strict=False)
        except ValueError as exc:
            raise EmuError(
                400, f"'{entry['ip_address']}' is not a valid IP address.", kind="InvalidInput"
            ) from exc
        if entry in result:
            raise EmuError(
                400,
                "Request contains duplicate address pair: mac_address "
                f"{entry['mac_address']} ip_address {entry['ip_address']}.",
                kind="DuplicateAddressPairInRequest",
            )
        result.append(entry)
    return result


def _create_port(world: World, body: Obj) -> Obj:
    network_id = body.get("network_id")
    if network_id not in world.networks:
        raise EmuError(404, f"Network {network_id} could not be found.", kind="NetworkNotFound")
    attrs = {k: v for k, v in body.items() if k not in ("network_id", "allowed_address_pairs")}
    attrs.setdefault("tenant_id", body.get("project_id") or world.networks[network_id]["tenant_id"])
    if "security_groups" not in attrs and body.get("port_security_enabled", True):
        default = [
            sg["id"]
            for sg in world.security_groups.values()
            if sg["name"] == "default" and sg["tenant_id"] == attrs["tenant_id"]
        ]
        attrs["security_groups"] = default
    port = world.new_port(str(network_id), **attrs)
    port["allowed_address_pairs"] = _address_pairs(port, body.get("allowed_address_pairs", []))
    return port


def _update_port(world: World, port: Obj, body: Obj) -> None:
    if "allowed_address_pairs" in body:
        pairs = _address_pairs(port, body["allowed_address_pairs"])
        if pairs and not body.get("port_security_enabled", port["port_security_enabled"]):
            raise EmuError(
                409,
                "Port Security must be enabled in order to have allowed address pairs on a port.",
                kind="AddressPairAndPortSecurityRequired",
            )
        body = {**body, "allowed_address_pairs": pairs}
    if "fixed_ips" in body:
        old = port["fixed_ips"]
        port["fixed_ips"] = []
        try:
            body = {**body, "fixed_ips": world.fixed_ips_for(port["network_id"], body["fixed_ips"])}
        finally:
            port["fixed_ips"] = old
    for sg_id in body.get("security_groups") or ():
        if sg_id not in world.security_groups:
            raise EmuError(
                404, f"Security group {sg_id} does not exist", kind="SecurityGroupNotFound"
            )
    port.update(body)


def _delete_port(world: World, port: Obj) -> None:
    for fip in world.floatingips.values():
        if fip["port_id"] == port["id"]:
            fip.update(
                port_id=None,
                fixed_ip_address=None,
                router_id=None,
                status="DOWN",
                port_details=None,
            )


CREATE_HOOKS["ports"] = _create_port
UPDATE_HOOKS["ports"] = _update_port
DELETE_HOOKS["ports"] = _delete_port
