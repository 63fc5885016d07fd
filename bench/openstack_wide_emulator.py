"""kccm's OpenStack emulator with one more tenant network, for benches with many servers.

Usage: python bench/openstack_wide_emulator.py --port P [--nodes-cidr 10.64.0.0/20]
       [the options of ``python -m kccm.testing.openstack``]

The default world's tenant network ``private`` has one IPv4 /24 (devstack's), so it holds 253
servers; bench/openstack_scale.py seeds 1,000. This runs the same server
(:mod:`kccm.testing.openstack.server`) with the default world plus a network ``nodes`` (one
IPv4 subnet of ``--nodes-cidr``, no IPv6) with an interface on ``router1``, as a cloud with a
larger tenant network would have it. Nothing else differs; it prints the same ready line.
"""

from __future__ import annotations

import argparse
import sys

from kccm.testing.openstack import server
from kccm.testing.openstack.seed import new_network, new_subnet, seed_world
from kccm.testing.openstack.world import World

NETWORK = "nodes"


def widen(world: World, cidr: str) -> World:
    """Add the ``nodes`` network and subnet, and router1's interface on it (as seed does for
    ``private``), to an already seeded world."""
    project_id = world.project_id()
    net = new_network(world, NETWORK, project_id)
    subnet = new_subnet(world, net, f"{NETWORK}-subnet", cidr)
    router = world.router_named("router1")
    port = world.new_port(
        net["id"],
        device_id=router["id"],
        device_owner="network:router_interface",
        tenant_id=project_id,
        fixed_ips=[{"subnet_id": subnet["id"], "ip_address": subnet["gateway_ip"]}],
    )
    world.baseline_ports.add(port["id"])
    return world


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--nodes-cidr", default="10.64.0.0/20")
    ours, rest = parser.parse_known_args(argv)
    # server.serve seeds the default world through its module-level name; widen it there.
    server.__dict__["seed_world"] = lambda world: widen(seed_world(world), ours.nodes_cidr)
    return server.main(rest)


if __name__ == "__main__":
    sys.exit(main())
