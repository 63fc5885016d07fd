"""The default world, as a devstack install leaves it (devstack lib/keystone, lib/nova,
lib/neutron_plugins/services/l3): domain ``Default``, project and user ``demo`` (password
``secret``, application credential ``kccm-ac``/``ac-secret``; user ``kccm-trustee``/
``trustee-secret`` holds a trust of ``demo`` on ``demo``), region ``RegionOne``, flavors
m1.small/m1.medium/m1.large (devstack's ids 2/3/4), the external network ``public``
(172.24.4.0/24), the tenant network ``private`` (10.0.0.0/24 and fd00::/64), ``router1``
between them and the ``default`` security group.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kccm.emulators.openstack.world import Obj, World, new_id, now_iso

__all__ = ["DEFAULTS", "default_rules", "new_network", "new_subnet", "seed_world"]

DEFAULTS = {
    "region": "RegionOne",
    "domain": "Default",
    "project": "demo",
    "user": "demo",
    "password": "secret",
    "app_cred_name": "kccm-ac",
    "app_cred_secret": "ac-secret",
    "trustee": "kccm-trustee",
    "trustee_password": "trustee-secret",
    "az": "nova",
}

FLAVORS = (
    ("2", "m1.small", 2048, 1, 20),
    ("3", "m1.medium", 4096, 2, 40),
    ("4", "m1.large", 8192, 4, 80),
)


def _stamped(obj: Obj) -> Obj:
    stamp = now_iso()
    obj.setdefault("created_at", stamp)
    obj.setdefault("updated_at", stamp)
    obj.setdefault("revision_number", 0)
    obj.setdefault("tags", [])
    obj.setdefault("description", "")
    return obj


def new_network(world: World, name: str, project_id: str, **attrs: Any) -> Obj:
    net = _stamped(
        {
            "id": new_id(),
            "name": name,
            "status": "ACTIVE",
            "subnets": [],
            "admin_state_up": True,
            "tenant_id": project_id,
            "project_id": project_id,
            "router:external": False,
            "shared": False,
            "mtu": 1450,
            "port_security_enabled": True,
            "availability_zones": [DEFAULTS["az"]],
            "availability_zone_hints": [],
            "ipv4_address_scope": None,
            "ipv6_address_scope": None,
            "is_default": False,
            **attrs,
        }
    )
    world.networks[net["id"]] = net
    return net


def new_subnet(world: World, net: Obj, name: str, cidr: str, **attrs: Any) -> Obj:
    network = ipaddress.ip_network(cidr)
    gateway = network[1]
    last = network[-2] if network.version == 4 else network[min(network.num_addresses - 1, 1 << 16)]
    subnet = _stamped(
        {
            "id": new_id(),
            "name": name,
            "network_id": net["id"],
            "tenant_id": net["tenant_id"],
            "project_id": net["tenant_id"],
            "ip_version": network.version,
            "cidr": str(network),
            "gateway_ip": str(gateway),
            "allocation_pools": [{"start": str(gateway + 1), "end": str(last)}],
            "enable_dhcp": True,
            "dns_nameservers": [],
            "host_routes": [],
            "ipv6_ra_mode": "slaac" if network.version == 6 else None,
            "ipv6_address_mode": "slaac" if network.version == 6 else None,
            "subnetpool_id": None,
            "service_types": [],
            **attrs,
        }
    )
    world.subnets[subnet["id"]] = subnet
    net["subnets"].append(subnet["id"])
    return subnet


def default_rules(sg_id: str, project_id: str) -> list[Obj]:
    """Neutron's rules of a new group (neutron/db/securitygroups_db.py): egress to anywhere
    per ethertype, and for ``default`` ingress from the group itself."""
    rules = []
    for ethertype in ("IPv4", "IPv6"):
        for direction, remote in (("egress", None), ("ingress", sg_id)):
            rules.append(
                _stamped(
                    {
                        "id": new_id(),
                        "security_group_id": sg_id,
                        "direction": direction,
                        "ethertype": ethertype,
                        "protocol": None,
                        "port_range_min": None,
                        "port_range_max": None,
                        "remote_ip_prefix": None,
                        "remote_group_id": remote,
                        "remote_address_group_id": None,
                        "normalized_cidr": None,
                        "tenant_id": project_id,
                        "project_id": project_id,
                        "belongs_to_default_sg": True,
                    }
                )
            )
    return rules


def _seed_identity(world: World) -> str:
    domain: Obj = {"id": "default", "name": DEFAULTS["domain"], "enabled": True}
    world.domains[domain["id"]] = domain
    project = {"id": new_id().replace("-", ""), "name": DEFAULTS["project"], "domain_id": "default"}
    world.projects[project["id"]] = project
    user = {
        "id": new_id().replace("-", ""),
        "name": DEFAULTS["user"],
        "domain_id": "default",
        "password": DEFAULTS["password"],
        "project_id": project["id"],
    }
    world.users[user["id"]] = user
    cred = {
        "id": new_id().replace("-", ""),
        "name": DEFAULTS["app_cred_name"],
        "secret": DEFAULTS["app_cred_secret"],
        "user_id": user["id"],
        "project_id": project["id"],
    }
    world.app_creds[cred["id"]] = cred
    trustee: Obj = {
        "id": new_id().replace("-", ""),
        "name": DEFAULTS["trustee"],
        "domain_id": "default",
        "password": DEFAULTS["trustee_password"],
        "project_id": None,
    }
    world.users[trustee["id"]] = trustee
    trust: Obj = {
        "id": new_id().replace("-", ""),
        "trustor_user_id": user["id"],
        "trustee_user_id": trustee["id"],
        "project_id": project["id"],
    }
    world.trusts[trust["id"]] = trust
    return str(project["id"])


def _seed_flavors(world: World) -> None:
    for flavor_id, name, ram, vcpus, disk in FLAVORS:
        world.flavors[flavor_id] = {
            "id": flavor_id,
            "name": name,
            "ram": ram,
            "vcpus": vcpus,
            "disk": disk,
            "OS-FLV-EXT-DATA:ephemeral": 0,
            "swap": "",
            "rxtx_factor": 1.0,
            "os-flavor-access:is_public": True,
            "OS-FLV-DISABLED:disabled": False,
            "description": None,
            "extra_specs": {},
        }


def _seed_router(world: World, project_id: str, public: Obj, private: Obj) -> None:
    router = _stamped(
        {
            "id": new_id(),
            "name": "router1",
            "status": "ACTIVE",
            "admin_state_up": True,
            "tenant_id": project_id,
            "project_id": project_id,
            "routes": [],
            "availability_zones": [DEFAULTS["az"]],
            "availability_zone_hints": [],
            "flavor_id": None,
        }
    )
    world.routers[router["id"]] = router
    gateway = world.new_port(
        public["id"],
        device_id=router["id"],
        device_owner="network:router_gateway",
        tenant_id="",
        fixed_ips=[{"subnet_id": public["subnets"][0]}],
    )
    router["external_gateway_info"] = {
        "network_id": public["id"],
        "enable_snat": True,
        "external_fixed_ips": [dict(ip) for ip in gateway["fixed_ips"]],
    }
    for subnet_id in private["subnets"]:
        gateway_ip = world.subnets[subnet_id]["gateway_ip"]
        world.new_port(
            private["id"],
            device_id=router["id"],
            device_owner="network:router_interface",
            tenant_id=project_id,
            fixed_ips=[{"subnet_id": subnet_id, "ip_address": gateway_ip}],
        )


def seed_world(world: World) -> World:
    """Fill ``world`` with the default resources; returns it."""
    project_id = _seed_identity(world)
    _seed_flavors(world)
    public = new_network(world, "public", project_id, **{"router:external": True})
    new_subnet(world, public, "public-subnet", "172.24.4.0/24", enable_dhcp=False)
    private = new_network(world, "private", project_id)
    new_subnet(world, private, "private-subnet", "10.0.0.0/24")
    new_subnet(world, private, "ipv6-private-subnet", "fd00::/64")
    sg = _stamped(
        {
            "id": new_id(),
            "name": "default",
            "description": "Default security group",
            "tenant_id": project_id,
            "project_id": project_id,
            "stateful": True,
            "shared": False,
        }
    )
    world.security_groups[sg["id"]] = sg
    for rule in default_rules(sg["id"], project_id):
        world.sg_rules[rule["id"]] = rule
    _seed_router(world, project_id, public, private)
    world.baseline_ports = set(world.ports)
    world.baseline_networks = set(world.networks) | set(world.subnets)
    return world
