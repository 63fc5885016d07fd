"""Floating IP choices as OCCM's ``ensureFloatingIP`` and ``checkService`` make them: the
configured or annotated floating network (or the one external network), a floating subnet
by ID, name pattern or tags, ``loadBalancerIP`` adopting an existing floating IP,
``keep-floatingip``, a user's floating IP never deleted, internal <-> external switches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, annotated, lb_world, node_of, service

from kccm.cloudprovider import CloudProviderError


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


def _fip_of(world: LBWorld, svc: dict[str, Any]) -> dict[str, Any] | None:
    lb = world.lb_named(svc)
    return world.made[0].neutron.floating_ip_of_port(lb["vip_port_id"])


NETWORK_CHOICES = [
    # id, [LoadBalancer] keys, annotations
    ("configured", {}, {}),
    ("autodetected", {"floating-network-id": None}, {}),
    ("annotated", {"floating-network-id": None}, {ann.FLOATING_NETWORK_ID: "@public"}),
    ("subnet-id-config", {"floating-subnet-id": "@public_subnet"}, {}),
    ("subnet-id-annotation", {}, {ann.FLOATING_SUBNET_ID: "@public_subnet"}),
    ("subnet-pattern", {"floating-subnet": "public*"}, {}),
    ("subnet-regexp", {}, {ann.FLOATING_SUBNET: "~pub.*"}),
]


def _resolve(world: LBWorld, values: dict[str, Any]) -> dict[str, Any]:
    ids = {
        "@public": world.ids["public_network_id"],
        "@public_subnet": world.ids["public_subnet_id"],
    }
    return {k: ids.get(v, v) if isinstance(v, str) else v for k, v in values.items()}


@pytest.mark.parametrize(
    ("lb", "annotations"), [c[1:] for c in NETWORK_CHOICES], ids=[c[0] for c in NETWORK_CHOICES]
)
def test_floating_network_and_subnet(
    world: LBWorld, lb: dict[str, Any], annotations: dict[str, str]
) -> None:
    balancers = world.balancers(**_resolve(world, lb))
    svc = service(annotations=_resolve(world, annotations))
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    fip = _fip_of(world, svc)
    assert fip is not None
    assert fip["floating_network_id"] == world.ids["public_network_id"]
    assert status.ingress[0].ip == fip["floating_ip_address"]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_subnet_pattern_without_match_is_an_error(world: LBWorld) -> None:
    balancers = world.balancers(**{"floating-subnet": "nothing-like-it"})
    svc = service()
    with pytest.raises(CloudProviderError, match="no subnet matching"):
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    # the balancer exists: its ID is written back all the same (upstream's deferred patch)
    assert list(world.patcher.patches[-1]) == [ann.LB_ID]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_subnet_of_another_network_is_refused(world: LBWorld) -> None:
    balancers = world.balancers(**{"floating-subnet-id": world.ids["private_subnet_id"]})
    with pytest.raises(CloudProviderError, match="doesn't belong to the network"):
        balancers.ensure_load_balancer(CLUSTER, service(), world.nodes)


def test_load_balancer_ip_adopts_an_existing_floating_ip(world: LBWorld) -> None:
    balancers = world.balancers()
    mine = balancers.neutron.create_floating_ip(
        {"floating_network_id": world.ids["public_network_id"]}
    )
    svc = service(loadBalancerIP=mine["floating_ip_address"])
    before = world.seq()
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert status.ingress[0].ip == mine["floating_ip_address"]
    assert not any(w.startswith("POST /network/v2.0/floatingips") for w in world.writes(before))
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    left = balancers.neutron.floating_ips(floating_ip_address=mine["floating_ip_address"])
    assert [f["id"] for f in left] == [mine["id"]]  # not ours to delete (no OCCM description)
    balancers.neutron.delete_floating_ip(mine["id"])


def test_load_balancer_ip_in_use_is_an_error(world: LBWorld) -> None:
    balancers = world.balancers()
    other = balancers.neutron.ports(device_id=world.servers[0]["id"])[0]
    taken = balancers.neutron.create_floating_ip(
        {"floating_network_id": world.ids["public_network_id"], "port_id": other["id"]}
    )
    svc = service(loadBalancerIP=taken["floating_ip_address"])
    try:
        with pytest.raises(CloudProviderError, match="is not available"):
            balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
        balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    finally:
        balancers.neutron.delete_floating_ip(taken["id"])


def test_keep_floating_ip(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service(annotations={ann.KEEP_FLOATING_IP: "true"})
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    kept = balancers.neutron.floating_ips(floating_ip_address=status.ingress[0].ip)
    assert len(kept) == 1
    balancers.neutron.delete_floating_ip(kept[0]["id"])


def test_switching_to_internal_deletes_our_floating_ip(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service()
    external = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    internal = balancers.ensure_load_balancer(
        CLUSTER, annotated(svc, annotations={ann.INTERNAL: "true"}), world.nodes
    )
    lb = world.lb_named(svc)
    assert internal.ingress[0].ip == lb["vip_address"]
    assert balancers.neutron.floating_ips(floating_ip_address=external.ingress[0].ip) == []
    again = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert again.ingress[0].ip != lb["vip_address"]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_no_floating_network_publishes_the_vip(world: LBWorld) -> None:
    """Without a configured network and with no external network found: the VIP (OCCM's
    "forcing to ensure an internal load balancer service")."""
    balancers = world.balancers(**{"floating-network-id": None})
    balancers.neutron.floating_network_id = lambda: ""  # type: ignore[method-assign]
    svc = service()
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert status.ingress[0].ip == world.lb_named(svc)["vip_address"]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_ipv6_service_publishes_the_vip(world: LBWorld) -> None:
    """``ipFamilies: [IPv6]``: members on the nodes' IPv6 addresses, the VIP on the IPv6
    subnet (``loadBalancerIP`` as its address), no floating IP (IPv6 has none)."""
    balancers = world.balancers()
    nodes = [node_of(s, ipv6=True) for s in world.servers]
    svc = service(
        annotations={ann.SUBNET_ID: world.ids["private_subnet6_id"]},
        ipFamilies=["IPv6"],
        loadBalancerIP="fd00::99",
    )
    status = balancers.ensure_load_balancer(CLUSTER, svc, nodes)
    lb = world.lb_named(svc)
    assert lb["vip_address"] == "fd00::99"
    assert status.ingress[0].ip == "fd00::99"
    assert balancers.neutron.floating_ip_of_port(lb["vip_port_id"]) is None
    (pool,) = balancers.octavia.pools(lb["id"])
    assert all(":" in m["address"] for m in balancers.octavia.members(pool["id"]))
    (listener,) = balancers.octavia.listeners(lb["id"])
    assert listener["allowed_cidrs"] == ["::/0"]
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_switching_to_internal_detaches_a_kept_floating_ip(world: LBWorld) -> None:
    """``keep-floatingip`` and internal: the floating IP is detached (``port_id: null``) and
    kept. OCCM sends ``{"floatingip": {}}`` here (gophercloud drops the nil port), which
    leaves it attached and is sent again on every sync."""
    balancers = world.balancers()
    svc = service(annotations={ann.KEEP_FLOATING_IP: "true"})
    external = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    internal = annotated(svc, annotations={ann.INTERNAL: "true"})
    balancers.ensure_load_balancer(CLUSTER, internal, world.nodes)
    (kept,) = balancers.neutron.floating_ips(floating_ip_address=external.ingress[0].ip)
    assert kept["port_id"] is None
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(internal), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(internal))
    balancers.neutron.delete_floating_ip(kept["id"])
