"""Neutron floating IPs, routers (extraroute, extraroute-atomic) and security groups with
their rules (neutron/db/l3_db.py, neutron/db/extraroute_db.py, neutron/db/securitygroups_db.py,
neutron_lib/exceptions/l3.py, securitygroup.py; gophercloud openstack/networking/v2/
extensions/layer3/{floatingips,routers,extraroutes}, extensions/security/{groups,rules}).

The generic list/show/update/delete paths are :mod:`kccm.emulators.openstack.neutron`'s; this
module adds the create/update/delete/render hooks with Neutron's checks and texts.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web

from kccm.emulators.openstack import neutron
from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.rest import WORLD, json_body, reply
from kccm.emulators.openstack.seed import default_rules
from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = ["create_floatingip", "routes"]

routes = web.RouteTableDef()
PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "sctp": 132}


def _bad(message: str, kind: str = "BadRequest") -> EmuError:
    return EmuError(400, message, kind=kind)


def _stamp(obj: Obj) -> Obj:
    stamp = now_iso()
    return {
        "created_at": stamp,
        "updated_at": stamp,
        "revision_number": 0,
        "tags": [],
        "description": "",
        **obj,
    }


# -- floating IPs ---------------------------------------------------------------------------


def _port_details(port: Obj) -> Obj:
    keys = (
        "name",
        "network_id",
        "mac_address",
        "admin_state_up",
        "status",
        "device_id",
        "device_owner",
    )
    return {k: port[k] for k in keys}


def _router_for(world: World, fip_net: str, port: Obj, fixed_ip: str) -> Obj:
    """The router joining the port's subnet to the floating network, or Neutron's 404
    (l3_db.py ``_get_router_for_floatingip``)."""
    subnet_id = next(ip["subnet_id"] for ip in port["fixed_ips"] if ip["ip_address"] == fixed_ip)
    for router in world.routers.values():
        gateway = router.get("external_gateway_info") or {}
        if gateway.get("network_id") != fip_net:
            continue
        for iface in world.ports.values():
            if (
                iface["device_id"] == router["id"]
                and iface["device_owner"].startswith("network:router_interface")
                and any(ip["subnet_id"] == subnet_id for ip in iface["fixed_ips"])
            ):
                return router
    raise EmuError(
        404,
        f"External network {fip_net} is not reachable from subnet {subnet_id}.  Therefore, "
        f"cannot associate Port {port['id']} with a Floating IP.",
        kind="ExternalGatewayForFloatingIPNotFound",
    )


def _fixed_ip(port: Obj, wanted: str | None) -> str:
    v4 = [
        ip["ip_address"]
        for ip in port["fixed_ips"]
        if ipaddress.ip_address(ip["ip_address"]).version == 4
    ]
    if wanted:
        if wanted not in [ip["ip_address"] for ip in port["fixed_ips"]]:
            raise _bad(
                f"Bad floatingip request: Port {port['id']} does not have fixed ip {wanted}."
            )
        return wanted
    if not v4:
        raise _bad(
            f"Bad floatingip request: Port {port['id']} does not have any IPv4 address "
            "to be associated with a floating IP."
        )
    if len(v4) > 1:
        raise _bad(
            f"Port {port['id']} has multiple fixed IPv4 addresses.  Must provide a "
            "specific IPv4 address when assigning a floating IP."
        )
    return str(v4[0])


def _associate(world: World, fip: Obj, port_id: str | None, fixed: str | None) -> None:
    if not port_id:
        fip.update(
            port_id=None, fixed_ip_address=None, router_id=None, status="DOWN", port_details=None
        )
        return
    port = neutron.get(world, neutron.KINDS["ports"], port_id)
    fixed_ip = _fixed_ip(port, fixed)
    router = _router_for(world, fip["floating_network_id"], port, fixed_ip)
    for other in world.floatingips.values():
        if (
            other is not fip
            and other["port_id"] == port_id
            and other["fixed_ip_address"] == fixed_ip
        ):
            raise EmuError(
                409,
                f"Cannot associate floating IP {fip['floating_ip_address']} ({fip['id']}) with "
                f"port {port_id} using fixed IP {fixed_ip}, as that fixed IP already has a "
                f"floating IP on external network {other['floating_network_id']}.",
                kind="FloatingIPPortAlreadyAssociated",
            )
    fip.update(
        port_id=port_id,
        fixed_ip_address=fixed_ip,
        router_id=router["id"],
        status="ACTIVE",
        port_details=_port_details(port),
    )


def _fip_address(world: World, net: Obj, body: Obj) -> str:
    subnets = [world.subnets[s] for s in net["subnets"] if world.subnets[s]["ip_version"] == 4]
    if body.get("subnet_id"):
        subnets = [s for s in subnets if s["id"] == body["subnet_id"]]
        if not subnets:
            raise _bad(
                f"Bad floatingip request: Subnet {body['subnet_id']} does not belong "
                f"to network {net['id']}."
            )
    address = body.get("floating_ip_address")
    if not address:
        return world.allocate_ip(subnets[0]["id"])
    for subnet in subnets:
        if ipaddress.ip_address(address) in ipaddress.ip_network(subnet["cidr"]):
            if address in world.used_ips(subnet["id"]):
                raise EmuError(
                    409,
                    f"IP address {address} already allocated in subnet {subnet['id']}",
                    kind="IpAddressAlreadyAllocated",
                )
            return str(address)
    raise _bad(
        f"IP address {address} is not a valid IP for the specified subnet.",
        kind="InvalidIpForSubnet",
    )


def create_floatingip(world: World, body: Obj) -> Obj:
    net_id = body.get("floating_network_id")
    net = neutron.get(world, neutron.KINDS["networks"], str(net_id))
    if not net["router:external"]:
        raise _bad(f"Bad floatingip request: Network {net_id} is not a valid external network.")
    fip = _stamp(
        {
            "id": new_id(),
            "floating_ip_address": _fip_address(world, net, body),
            "floating_network_id": net["id"],
            "router_id": None,
            "port_id": None,
            "fixed_ip_address": None,
            "status": "DOWN",
            "tenant_id": body.get("project_id") or body.get("tenant_id") or world.project_id(),
            "dns_domain": "",
            "dns_name": "",
            "port_details": None,
            "port_forwardings": [],
            "qos_policy_id": None,
            "description": body.get("description", ""),
        }
    )
    fip["project_id"] = fip["tenant_id"]
    _associate(world, fip, body.get("port_id"), body.get("fixed_ip_address"))
    world.floatingips[fip["id"]] = fip
    return fip


def _update_fip(world: World, fip: Obj, body: Obj) -> None:
    if "port_id" in body:
        _associate(world, fip, body["port_id"], body.get("fixed_ip_address"))
    if "description" in body:
        fip["description"] = body["description"]


# -- routers -------------------------------------------------------------------------------


def _router_cidrs(world: World, router: Obj) -> list[tuple[Any, set[str]]]:
    result = []
    for port in world.ports.values():
        if port["device_id"] == router["id"]:
            for ip in port["fixed_ips"]:
                cidr = ipaddress.ip_network(world.subnets[ip["subnet_id"]]["cidr"])
                result.append((cidr, {ip["ip_address"]}))
    return result


def _valid_routes(world: World, router: Obj, wanted: Any) -> list[Obj]:
    """Neutron's checks (extraroute_db.py ``_validate_routes``): each route a destination
    CIDR and a next hop on a subnet the router is attached to, not the router's own IP;
    at most ``max_routes``; duplicates collapse."""
    if not isinstance(wanted, list):
        raise _bad("Invalid input for routes.", kind="InvalidInput")
    cidrs = _router_cidrs(world, router)
    result: list[Obj] = []
    for route in wanted:
        try:
            destination = str(ipaddress.ip_network(route["destination"], strict=False))
            nexthop = ipaddress.ip_address(route["nexthop"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad(f"Invalid input for routes. Reason: {exc}.", kind="InvalidInput") from exc
        entry = {"destination": destination, "nexthop": str(nexthop)}
        reason = ""
        if any(str(nexthop) in own for _, own in cidrs):
            reason = "the nexthop is used by router"
        elif not any(nexthop in cidr for cidr, _ in cidrs):
            reason = "the nexthop is not connected with router"
        if reason:
            raise _bad(f"Invalid format for routes: {[entry]}, {reason}", kind="InvalidRoutes")
        if entry not in result:
            result.append(entry)
    if len(result) > world.max_routes:
        raise _bad(
            f"Unable to complete operation for {router['id']}. The number of routes "
            f"exceeds the maximum {world.max_routes}.",
            kind="RoutesExhausted",
        )
    return result


def _update_router(world: World, router: Obj, body: Obj) -> None:
    if "routes" in body and "extraroute" in world.disabled_extensions:
        raise _bad("Unrecognized attribute(s) 'routes'")
    if "routes" in body:
        body = {**body, "routes": _valid_routes(world, router, body["routes"])}
    router.update(body)


async def _extraroutes(request: web.Request, add: bool) -> web.Response:
    """``PUT /routers/{id}/add_extraroutes`` and ``remove_extraroutes`` (the
    extraroute-atomic extension: neutron/db/extraroute_db.py ``add_extraroutes``)."""
    world = request.app[WORLD]
    if "extraroute-atomic" in world.disabled_extensions:  # no such action without it
        raise EmuError(404, "The resource could not be found.", kind="HTTPNotFound")
    router = neutron.get(world, neutron.KINDS["routers"], request.match_info["id"])
    body = (await json_body(request)).get("router") or {}
    given = (
        _valid_routes(world, router, body.get("routes", []))
        if add
        else [
            {
                "destination": str(ipaddress.ip_network(r["destination"], strict=False)),
                "nexthop": str(ipaddress.ip_address(r["nexthop"])),
            }
            for r in body.get("routes", [])
        ]
    )
    old = list(router["routes"])
    new = old + [r for r in given if r not in old] if add else [r for r in old if r not in given]
    router["routes"] = _valid_routes(world, router, new) if add else new
    world.touch(router)
    return reply({"router": router})


@routes.put(neutron.PREFIX + "/routers/{id}/add_extraroutes")
async def add_extraroutes(request: web.Request) -> web.Response:
    return await _extraroutes(request, True)


@routes.put(neutron.PREFIX + "/routers/{id}/remove_extraroutes")
async def remove_extraroutes(request: web.Request) -> web.Response:
    return await _extraroutes(request, False)


# -- security groups --------------------------------------------------------------------------


def _render_sg(world: World, sg: Obj) -> Obj:
    rules = [r for r in world.sg_rules.values() if r["security_group_id"] == sg["id"]]
    return {**sg, "security_group_rules": rules}


def _create_sg(world: World, body: Obj) -> Obj:
    tenant = body.get("project_id") or body.get("tenant_id") or world.project_id()
    sg = _stamp(
        {
            "id": new_id(),
            "name": body.get("name", ""),
            "description": body.get("description", ""),
            "tenant_id": tenant,
            "project_id": tenant,
            "stateful": body.get("stateful", True),
            "shared": False,
        }
    )
    world.security_groups[sg["id"]] = sg
    for rule in default_rules(sg["id"], tenant):
        if rule["direction"] == "egress":
            rule["belongs_to_default_sg"] = False
            world.sg_rules[rule["id"]] = rule
    return sg


def _delete_sg(world: World, sg: Obj) -> None:
    for port in world.ports.values():
        if sg["id"] in port["security_groups"]:
            raise EmuError(409, f"Security Group {sg['id']} in use.", kind="SecurityGroupInUse")
    for rule_id in [r["id"] for r in world.sg_rules.values() if r["security_group_id"] == sg["id"]]:
        del world.sg_rules[rule_id]


def _protocol(value: Any) -> str | None:
    if value in (None, "", "any"):
        return None
    text = str(value).lower()
    if text in PROTOCOLS or (text.isdigit() and 0 <= int(text) <= 255):
        return text
    raise _bad(
        f"Security group rule protocol {value} not supported. Only protocol values "
        f"{sorted(PROTOCOLS)} and integer representations [0 to 255] are supported.",
        kind="SecurityGroupRuleInvalidProtocol",
    )


def _rule_ports(body: Obj, protocol: str | None) -> tuple[int | None, int | None]:
    low, high = body.get("port_range_min"), body.get("port_range_max")
    if (low is not None or high is not None) and protocol is None:
        raise _bad(
            "Must also specify protocol if port range is given.",
            kind="SecurityGroupProtocolRequiredWithPorts",
        )
    if low is not None and high is not None and int(low) > int(high):
        raise _bad(
            "For TCP/UDP protocols, port_range_min must be <= port_range_max",
            kind="SecurityGroupInvalidPortRange",
        )
    return (None if low is None else int(low)), (None if high is None else int(high))


def _rule_prefix(body: Obj, ethertype: str) -> str | None:
    prefix = body.get("remote_ip_prefix")
    if prefix is None:
        return None
    network = ipaddress.ip_network(prefix, strict=False)
    if f"IPv{network.version}" != ethertype:
        raise _bad(
            f"Conflicting value ethertype {ethertype} for CIDR {prefix}",
            kind="SecurityGroupRuleParameterConflict",
        )
    return str(prefix)


_RULE_KEYS = (
    "security_group_id",
    "direction",
    "ethertype",
    "protocol",
    "port_range_min",
    "port_range_max",
    "remote_ip_prefix",
    "remote_group_id",
)


def _create_rule(world: World, body: Obj) -> Obj:
    sg = neutron.get(world, neutron.KINDS["security-groups"], str(body.get("security_group_id")))
    if body.get("direction") not in ("ingress", "egress"):
        raise _bad(
            f"Invalid input for direction. Reason: {body.get('direction')!r} is not in "
            "['ingress', 'egress'].",
            kind="InvalidInput",
        )
    ethertype = body.get("ethertype") or "IPv4"
    protocol = _protocol(body.get("protocol"))
    low, high = _rule_ports(body, protocol)
    prefix = _rule_prefix(body, ethertype)
    rule = _stamp(
        {
            "id": new_id(),
            "security_group_id": sg["id"],
            "direction": body["direction"],
            "ethertype": ethertype,
            "protocol": protocol,
            "port_range_min": low,
            "port_range_max": high,
            "remote_ip_prefix": prefix,
            "remote_group_id": body.get("remote_group_id"),
            "remote_address_group_id": None,
            "normalized_cidr": str(ipaddress.ip_network(prefix, strict=False)) if prefix else None,
            "tenant_id": sg["tenant_id"],
            "project_id": sg["tenant_id"],
            "belongs_to_default_sg": False,
            "description": body.get("description", ""),
        }
    )
    for other in world.sg_rules.values():
        if (
            all(other[k] == rule[k] for k in _RULE_KEYS if k != "remote_ip_prefix")
            and other["normalized_cidr"] == rule["normalized_cidr"]
        ):
            raise EmuError(
                409,
                f"Security group rule already exists. Rule id is {other['id']}.",
                kind="SecurityGroupRuleExists",
            )
    world.sg_rules[rule["id"]] = rule
    world.touch(sg)
    return rule


neutron.CREATE_HOOKS.update(
    {
        "floatingips": create_floatingip,
        "security-groups": _create_sg,
        "security-group-rules": _create_rule,
    }
)
neutron.UPDATE_HOOKS.update({"floatingips": _update_fip, "routers": _update_router})
neutron.DELETE_HOOKS.update({"security-groups": _delete_sg})
neutron.RENDER_HOOKS.update({"security-groups": _render_sg})
