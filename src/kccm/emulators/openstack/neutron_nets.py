"""Neutron network and subnet creation and deletion (neutron/db/db_base_plugin_v2.py
``create_network``/``delete_network``/``create_subnet``/``delete_subnet``; neutron_lib
exceptions ``NetworkInUse``, ``SubnetInUse``, ``InvalidInput``), so a test can add e.g. a
second external network. Roles are not emulated: any token may set ``router:external``.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

from kccm.emulators.openstack import neutron
from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.seed import new_network, new_subnet
from kccm.emulators.openstack.world import Obj, World

__all__ = ["routes"]

routes = web.RouteTableDef()  # none of its own: hooks into neutron's generic paths
NETWORK_KEYS = {
    "name",
    "description",
    "admin_state_up",
    "router:external",
    "shared",
    "mtu",
    "port_security_enabled",
    "tenant_id",
    "project_id",
    "availability_zone_hints",
}
SUBNET_KEYS = {
    "name",
    "description",
    "network_id",
    "ip_version",
    "cidr",
    "gateway_ip",
    "allocation_pools",
    "enable_dhcp",
    "dns_nameservers",
    "host_routes",
    "tenant_id",
    "project_id",
    "ipv6_ra_mode",
    "ipv6_address_mode",
}


def _unrecognized(body: Obj, known: set[str]) -> None:
    extra = sorted(set(body) - known)
    if extra:
        names = ", ".join(f"'{name}'" for name in extra)
        raise EmuError(400, f"Unrecognized attribute(s) {names}", kind="HTTPBadRequest")


def _create_network(world: World, body: Obj) -> Obj:
    _unrecognized(body, NETWORK_KEYS)
    project = body.get("project_id") or body.get("tenant_id") or world.project_id()
    attrs = {k: v for k, v in body.items() if k not in ("name", "tenant_id", "project_id")}
    return new_network(world, str(body.get("name", "")), project, **attrs)


def _create_subnet(world: World, body: Obj) -> Obj:
    _unrecognized(body, SUBNET_KEYS)
    net = neutron.get(world, neutron.KINDS["networks"], str(body.get("network_id")))
    try:
        cidr = ipaddress.ip_network(str(body.get("cidr")), strict=False)
    except ValueError as exc:
        raise EmuError(
            400,
            f"Invalid input for cidr. Reason: '{body.get('cidr')}' is not a valid IP subnet.",
            kind="InvalidInput",
        ) from exc
    for other in (world.subnets[s] for s in net["subnets"]):
        if cidr.overlaps(ipaddress.ip_network(other["cidr"])):
            raise EmuError(
                400,
                f"Invalid input for operation: Requested subnet with cidr: "
                f"{cidr} for network: {net['id']} overlaps with another subnet.",
                kind="InvalidInput",
            )
    keys = ("description", "enable_dhcp", "dns_nameservers", "host_routes")
    subnet = new_subnet(
        world, net, str(body.get("name", "")), str(cidr), **{k: body[k] for k in keys if k in body}
    )
    if body.get("gateway_ip"):
        subnet["gateway_ip"] = body["gateway_ip"]
    if body.get("allocation_pools"):
        subnet["allocation_pools"] = list(body["allocation_pools"])
    return subnet


def _delete_network(world: World, net: Obj) -> None:
    if any(port["network_id"] == net["id"] for port in world.ports.values()):
        raise EmuError(
            409,
            f"Unable to complete operation on network {net['id']}. There are "
            "one or more ports still in use on the network.",
            kind="NetworkInUse",
        )
    for subnet_id in net["subnets"]:
        world.subnets.pop(subnet_id, None)


def _delete_subnet(world: World, subnet: Obj) -> None:
    for port in world.ports.values():
        if any(ip["subnet_id"] == subnet["id"] for ip in port["fixed_ips"]):
            raise EmuError(
                409,
                f"Unable to complete operation on subnet {subnet['id']}: One "
                "or more ports have an IP allocation from this subnet.",
                kind="SubnetInUse",
            )
    net = world.networks[subnet["network_id"]]
    net["subnets"] = [s for s in net["subnets"] if s != subnet["id"]]


neutron.CREATE_HOOKS.update({"networks": _create_network, "subnets": _create_subnet})
neutron.DELETE_HOOKS.update({"networks": _delete_network, "subnets": _delete_subnet})
