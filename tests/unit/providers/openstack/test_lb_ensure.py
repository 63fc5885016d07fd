"""Octavia balancers against the emulator: what a first ensure creates (OCCM's names, tags,
description, one fully populated POST, the floating IP, the annotations written back), that a
second ensure and an update with nothing changed make no mutating call, and that deletion
leaves nothing — for each configuration in the table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, annotated, lb_world, service

from kccm.cloudprovider import LoadBalancerIngress
from kccm.providers.openstack.loadbalancer.names import listener_name, monitor_name, pool_name


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


CASES: list[tuple[str, dict[str, Any], dict[str, str], dict[str, Any]]] = [
    # id, [LoadBalancer] keys, annotations, spec fields
    ("default", {}, {}, {}),
    ("create-monitor", {"create-monitor": "true"}, {}, {}),
    (
        "monitor-annotations",
        {},
        {
            ann.ENABLE_HEALTH_MONITOR: "true",
            ann.HEALTH_MONITOR_DELAY: "7",
            ann.HEALTH_MONITOR_TIMEOUT: "4",
            ann.HEALTH_MONITOR_MAX_RETRIES: "2",
            ann.HEALTH_MONITOR_MAX_RETRIES_DOWN: "5",
        },
        {},
    ),
    ("internal", {}, {ann.INTERNAL: "true"}, {}),
    ("internal-lb-config", {"internal-lb": "true"}, {}, {}),
    ("source-ranges", {}, {}, {"loadBalancerSourceRanges": ["192.168.32.1/24", "10.1.0.0/16"]}),
    (
        "local-policy",
        {"create-monitor": "true"},
        {},
        {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32100},
    ),
    ("proxy-v2", {}, {ann.PROXY_PROTOCOL: "v2"}, {}),
    ("x-forwarded-for", {}, {ann.X_FORWARDED_FOR: "true"}, {}),
    (
        "timeouts",
        {},
        {
            ann.TIMEOUT_CLIENT_DATA: "1000",
            ann.TIMEOUT_MEMBER_CONNECT: "2000",
            ann.TIMEOUT_MEMBER_DATA: "3000",
            ann.TIMEOUT_TCP_INSPECT: "10",
        },
        {},
    ),
    ("conn-limit-method", {}, {ann.CONN_LIMIT: "100", ann.LB_METHOD: "LEAST_CONNECTIONS"}, {}),
    ("session-affinity", {}, {}, {"sessionAffinity": "ClientIP"}),
    ("serial", {"provider-requires-serial-api-calls": "true", "create-monitor": "true"}, {}, {}),
    ("no-cascade", {"cascade-delete": "false", "create-monitor": "true"}, {}, {}),
    (
        "tls-external-store",
        {"container-store": "external"},
        {ann.TLS_CONTAINER_REF: "https://kms.example/v1/containers/abc"},
        {},
    ),
    (
        "security-groups",
        {"manage-security-groups": "true"},
        {},
        {"externalTrafficPolicy": "Local", "healthCheckNodePort": 32101},
    ),
    (
        "two-ports-udp",
        {"create-monitor": "true"},
        {},
        {
            "ports": [
                {"name": "dns", "port": 53, "nodePort": 30053, "protocol": "UDP"},
                {"name": "web", "port": 80, "nodePort": 30080, "protocol": "TCP"},
            ]
        },
    ),
]


@pytest.mark.parametrize(
    ("lb", "annotations", "spec"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_lifecycle_and_economy(
    world: LBWorld, lb: dict[str, str], annotations: dict[str, str], spec: dict[str, Any]
) -> None:
    balancers = world.balancers(**lb)
    svc = annotated(service(annotations=annotations), **spec)
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    (ingress,) = status.ingress
    assert ingress.ip

    written = world.with_written(svc)
    assert written["metadata"]["annotations"][ann.ADDRESS] == ingress.ip
    before, ledger = world.seq(), balancers.octavia.api.ledger.snapshot()
    assert balancers.ensure_load_balancer(CLUSTER, written, world.nodes) == status
    balancers.update_load_balancer(CLUSTER, written, world.nodes)
    assert world.writes(before) == []
    assert balancers.octavia.api.ledger.snapshot().since(ledger).total_writes == 0
    assert balancers.get_load_balancer(CLUSTER, written) == (
        type(status)(ingress=[LoadBalancerIngress(ip=ingress.ip)]),
        True,
    )

    balancers.ensure_load_balancer_deleted(CLUSTER, written)
    assert balancers.get_load_balancer(CLUSTER, written) == (None, False)


def test_first_ensure_is_one_fully_populated_post(world: LBWorld) -> None:
    balancers = world.balancers(**{"create-monitor": "true"})
    svc = service(ports=((80, 30080), (443, 30443)))
    before = world.seq()
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    octavia_writes = [w for w in world.writes(before) if "/lbaas/" in w]
    assert octavia_writes == ["POST /load-balancer/v2/lbaas/loadbalancers"]
    lb = world.lb_named(svc)
    name = f"kube_service_{CLUSTER}_default_web"
    assert lb["name"] == name
    assert lb["tags"] == [name]
    assert lb["description"] == f"Kubernetes external service default/web from cluster {CLUSTER}"
    assert lb["provider"] == "amphora"
    listeners = sorted(
        balancers.octavia.listeners(lb["id"]), key=lambda item: item["protocol_port"]
    )
    assert [item["name"] for item in listeners] == [listener_name(0, name), listener_name(1, name)]
    assert [item["tags"] for item in listeners] == [[name], [name]]
    pools = {p["name"]: p for p in balancers.octavia.pools(lb["id"])}
    assert sorted(pools) == [pool_name(0, name), pool_name(1, name)]
    pool = pools[pool_name(0, name)]
    assert pool["lb_algorithm"] == "ROUND_ROBIN"
    members = balancers.octavia.members(pool["id"])
    assert sorted((m["name"], m["protocol_port"]) for m in members) == sorted(
        (n["metadata"]["name"], 30080) for n in world.nodes
    )
    monitor = balancers.octavia.health_monitor(pool["healthmonitor_id"])
    assert (monitor["name"], monitor["type"], monitor["delay"], monitor["timeout"]) == (
        monitor_name(0, name),
        "TCP",
        5,
        3,
    )
    assert (monitor["max_retries"], monitor["max_retries_down"]) == (1, 3)
    fip = balancers.neutron.floating_ip_of_port(lb["vip_port_id"])
    assert fip is not None
    assert fip["floating_ip_address"] == status.ingress[0].ip
    assert fip["floating_network_id"] == world.ids["public_network_id"]
    assert fip["description"] == (
        f"Floating IP for Kubernetes external service default/web from cluster {CLUSTER}"
    )
    assert status.ingress[0].ip_mode == "VIP"
    assert world.patcher.patches == [{ann.LB_ID: lb["id"], ann.ADDRESS: status.ingress[0].ip}]
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def test_internal_publishes_the_vip(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service(annotations={ann.INTERNAL: "true"})
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    lb = world.lb_named(svc)
    assert status.ingress[0].ip == lb["vip_address"]
    assert balancers.neutron.floating_ip_of_port(lb["vip_port_id"]) is None
    assert lb["vip_subnet_id"] == world.ids["private_subnet_id"]
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_nodes_join_and_leave_in_one_batch_put(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes[:1])
    before = world.seq()
    balancers.update_load_balancer(CLUSTER, svc, world.nodes)
    writes = world.writes(before)
    assert len(writes) == 1
    assert writes[0].startswith("PUT /load-balancer/v2/lbaas/pools/")
    assert writes[0].endswith("/members")
    lb = world.lb_named(svc)
    (pool,) = balancers.octavia.pools(lb["id"])
    assert len(balancers.octavia.members(pool["id"])) == 2
    balancers.update_load_balancer(CLUSTER, svc, world.nodes[1:])
    assert [m["name"] for m in balancers.octavia.members(pool["id"])] == [
        world.nodes[1]["metadata"]["name"]
    ]
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_port_change_replaces_the_listener(world: LBWorld) -> None:
    balancers = world.balancers()
    svc = service(ports=((80, 30080),))
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    moved = annotated(
        svc, ports=[{"name": "p8080", "port": 8080, "nodePort": 30080, "protocol": "TCP"}]
    )
    balancers.ensure_load_balancer(CLUSTER, moved, world.nodes)
    lb = world.lb_named(svc)
    assert [item["protocol_port"] for item in balancers.octavia.listeners(lb["id"])] == [8080]
    assert len(balancers.octavia.pools(lb["id"])) == 1
    balancers.ensure_load_balancer_deleted(CLUSTER, moved)


def test_legacy_name_is_found_and_deleted(world: LBWorld) -> None:
    """A balancer named ``a``+UID (OCCM before the kube_service_ names) is used, not a new
    one made; deleting the Service deletes it (kccm: OCCM leaves it, its name not starting
    with kube_service_)."""
    balancers = world.balancers()
    svc = service()
    legacy = ("a" + svc["metadata"]["uid"]).replace("-", "")[:32]
    body = {"name": legacy, "vip_subnet_id": world.ids["private_subnet_id"]}
    created = balancers.octavia.create_load_balancer(body)
    balancers.octavia.wait_active(created["id"])
    before = world.seq()
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert world.patcher.patches[-1][ann.LB_ID] == created["id"]
    assert "POST /load-balancer/v2/lbaas/loadbalancers" not in world.writes(before)
    assert status.ingress[0].ip
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
    assert balancers.get_load_balancer(CLUSTER, svc) == (None, False)


def test_cluster_rename(world: LBWorld) -> None:
    """``--cluster-name`` changed: the annotated balancer and its children are renamed."""
    balancers = world.balancers(**{"create-monitor": "true"})
    svc = service()
    balancers.ensure_load_balancer("old", svc, world.nodes)
    svc = world.with_written(svc)
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    name = f"kube_service_{CLUSTER}_default_web"
    lb = world.lb_named(svc)
    assert lb["tags"] == [name]
    (listener,) = balancers.octavia.listeners(lb["id"])
    (pool,) = balancers.octavia.pools(lb["id"])
    monitor = balancers.octavia.health_monitor(pool["healthmonitor_id"])
    assert (listener["name"], listener["tags"]) == (listener_name(0, name), [name])
    assert (pool["name"], monitor["name"]) == (pool_name(0, name), monitor_name(0, name))
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_serial_mode_sends_one_call_per_object(world: LBWorld) -> None:
    """``provider-requires-serial-api-calls``: an empty balancer, then the listener, the pool
    and each member on their own (``SeriallyReconcilePoolMembers``), each waited for."""
    balancers = world.balancers(**{"provider-requires-serial-api-calls": "true"})
    svc = service()
    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    octavia = [
        w.split("/lbaas/")[1].split("/")[0] + (":members" if w.endswith("/members") else "")
        for w in world.writes(before)
        if "/lbaas/" in w
    ]
    assert octavia == ["loadbalancers", "listeners", "pools", "pools:members", "pools:members"]
    lb = world.lb_named(svc)
    (pool,) = balancers.octavia.pools(lb["id"])
    names = sorted(m["name"] for m in balancers.octavia.members(pool["id"]))
    assert names == sorted(
        f"member_{n['metadata']['name']}_{n['status']['addresses'][0]['address']}_30080"
        for n in world.nodes
    )
    before = world.seq()
    balancers.update_load_balancer(CLUSTER, world.with_written(svc), world.nodes[:1])
    (removal,) = world.writes(before)
    assert removal.startswith("DELETE ")
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
