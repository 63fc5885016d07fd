"""Where a balancer sits and whom it targets: ``subnet-id``/``network-id``/``port-id``,
``member-subnet-id``, ``flavor-id``, ``availability-zone``, ``node-selector`` (annotation and
``[LoadBalancer]``), and ``manage-security-groups`` (upstream ``checkService``,
``createOctaviaLoadBalancer``, ``filterNodes``, ``ensureAndUpdateOctaviaSecurityGroup``)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, node_of, service

from kccm.providers.openstack.loadbalancer.names import security_group_name

EMU_FLAVOR = "4c9a5a8a-5a4e-4f5e-9b55-0d6c1a7f0a01"


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


PLACEMENTS = [
    # id, [LoadBalancer] keys, annotations ("@x" = the emulator's id x), what the LB carries
    (
        "subnet-annotation",
        {},
        {ann.SUBNET_ID: "@private_subnet_id"},
        {"vip_subnet_id": "@private_subnet_id"},
    ),
    (
        "network-annotation",
        {},
        {ann.NETWORK_ID: "@private_network_id"},
        {"vip_network_id": "@private_network_id"},
    ),
    (
        "subnet-config",
        {"subnet-id": "@private_subnet_id"},
        {},
        {"vip_subnet_id": "@private_subnet_id"},
    ),
    ("flavor-annotation", {}, {ann.FLAVOR_ID: EMU_FLAVOR}, {"flavor_id": EMU_FLAVOR}),
    ("flavor-config", {"flavor-id": EMU_FLAVOR}, {}, {"flavor_id": EMU_FLAVOR}),
    ("zone-annotation", {}, {ann.AVAILABILITY_ZONE: "nova"}, {"availability_zone": "nova"}),
]


def _ids(world: LBWorld, values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: world.ids[v[1:]] if isinstance(v, str) and v.startswith("@") else v
        for k, v in values.items()
    }


@pytest.mark.parametrize(
    ("lb", "annotations", "wanted"), [p[1:] for p in PLACEMENTS], ids=[p[0] for p in PLACEMENTS]
)
def test_placement(
    world: LBWorld, lb: dict[str, str], annotations: dict[str, str], wanted: dict[str, str]
) -> None:
    balancers = world.balancers(**_ids(world, lb))
    svc = service(annotations=_ids(world, annotations))
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    found = world.lb_named(svc)
    assert {k: found.get(k) for k in wanted} == _ids(world, wanted)
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_vip_port(world: LBWorld) -> None:
    balancers = world.balancers()
    api = balancers.octavia.api
    port = api.request(
        "network",
        "POST",
        "/v2.0/ports",
        operation="test",
        json={"port": {"network_id": world.ids["private_network_id"], "name": "my-vip"}},
    )["port"]
    try:
        svc = service(annotations={ann.PORT_ID: port["id"]})
        balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
        assert world.lb_named(svc)["vip_port_id"] == port["id"]
        balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    finally:
        ports = balancers.neutron.ports(name="my-vip")
        for left in ports:
            api.request("network", "DELETE", f"/v2.0/ports/{left['id']}", operation="test")


def test_member_subnet(world: LBWorld) -> None:
    balancers = world.balancers()
    subnet = world.ids["private_subnet_id"]
    svc = service(annotations={ann.MEMBER_SUBNET_ID: subnet})
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    (pool,) = balancers.octavia.pools(world.lb_named(svc)["id"])
    assert {m["subnet_id"] for m in balancers.octavia.members(pool["id"])} == {subnet}
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


SELECTORS = [
    # id, [LoadBalancer] node-selector, annotation, labels per node, members (node indexes)
    ("annotation", None, "role=edge", [{"role": "edge"}, {"role": "core"}], [0]),
    ("key-only", None, "edge", [{"edge": ""}, {}], [0]),
    ("config", "role=core", None, [{"role": "edge"}, {"role": "core"}], [1]),
    ("annotation-wins", "role=core", "role=edge", [{"role": "edge"}, {"role": "core"}], [0]),
]


@pytest.mark.parametrize(
    ("config", "selector", "labels", "members"),
    [s[1:] for s in SELECTORS],
    ids=[s[0] for s in SELECTORS],
)
def test_node_selector(
    world: LBWorld,
    config: str | None,
    selector: str | None,
    labels: list[dict[str, str]],
    members: list[int],
) -> None:
    balancers = world.balancers(**({"node-selector": config} if config else {}))
    nodes = [node_of(s, labels=lab) for s, lab in zip(world.servers, labels, strict=True)]
    svc = service(annotations={ann.NODE_SELECTOR: selector} if selector else {})
    balancers.ensure_load_balancer(CLUSTER, svc, nodes)
    (pool,) = balancers.octavia.pools(world.lb_named(svc)["id"])
    names = sorted(m["name"] for m in balancers.octavia.members(pool["id"]))
    assert names == sorted(nodes[i]["metadata"]["name"] for i in members)
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_security_group_on_member_ports(world: LBWorld) -> None:
    balancers = world.balancers(**{"manage-security-groups": "true"})
    svc = service(
        ports=((80, 30080), (53, 30053)), externalTrafficPolicy="Local", healthCheckNodePort=32300
    )
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    neutron = balancers.neutron
    group = neutron.security_group_id(security_group_name(svc))
    assert group
    rules = sorted(
        (r["protocol"], r["port_range_min"], r["remote_ip_prefix"], r["direction"])
        for r in neutron.security_group_rules(group)
    )
    assert rules == [
        ("tcp", 30053, "10.0.0.0/24", "ingress"),
        ("tcp", 30080, "10.0.0.0/24", "ingress"),
        ("tcp", 32300, "10.0.0.0/24", "ingress"),
    ]
    for server in world.servers:
        (port,) = neutron.ports(device_id=server["id"])
        assert group in port["security_groups"]

    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    assert neutron.security_group_id(security_group_name(svc)) == ""
    for server in world.servers:
        (port,) = neutron.ports(device_id=server["id"])
        assert group not in port["security_groups"]


def test_turning_security_groups_off_removes_the_group(world: LBWorld) -> None:
    managed = world.balancers(**{"manage-security-groups": "true"})
    svc = service()
    managed.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    plain = world.balancers()
    plain.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert plain.neutron.security_group_id(security_group_name(svc)) == ""
    plain.ensure_load_balancer_deleted(CLUSTER, svc)


def test_concurrent_services_share_node_ports(world: LBWorld) -> None:
    """kccm syncs Services concurrently: groups added to and removed from the same node ports
    at once are neither lost nor written back after their deletion."""
    balancers = world.balancers(**{"manage-security-groups": "true"})
    services = [service(f"web{i}", ports=((80, 30100 + i),)) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda s: balancers.ensure_load_balancer(CLUSTER, s, world.nodes), services))
    groups = {balancers.neutron.security_group_id(security_group_name(s)) for s in services}
    for server in world.servers:
        (port,) = balancers.neutron.ports(device_id=server["id"])
        assert groups <= set(port["security_groups"])
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda s: balancers.ensure_load_balancer_deleted(CLUSTER, s), services))
    for server in world.servers:
        (port,) = balancers.neutron.ports(device_id=server["id"])
        assert not groups & set(port["security_groups"])


def test_ovn_security_group_opens_the_source_ranges(world: LBWorld) -> None:
    """ovn keeps client addresses: the group opens the nodePorts to the source ranges, not to
    the member subnet (``ensureAndUpdateOctaviaSecurityGroup``)."""
    balancers = world.balancers(
        **{"lb-provider": "ovn", "lb-method": "SOURCE_IP_PORT", "manage-security-groups": "true"}
    )
    svc = service(loadBalancerSourceRanges=["192.0.2.0/24", "198.51.100.0/24"])
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    group = balancers.neutron.security_group_id(security_group_name(svc))
    rules = sorted(
        (r["port_range_min"], r["remote_ip_prefix"])
        for r in balancers.neutron.security_group_rules(group)
    )
    assert rules == [(30080, "192.0.2.0/24"), (30080, "198.51.100.0/24")]
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
