"""Share groups on the openstack provider (kccm's BalancerSharer, :mod:`.loadbalancer.sharing`):
one Octavia balancer per group, each member's listeners tagged with its own name, the last
member removing the balancer and its floating IP; over the OpenStack emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, annotated, lb_world, service

from kccm.cloudprovider import (
    CloudProviderError,
    InvalidServiceConfig,
    ShareGroup,
    collect_service_warnings,
)
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers
from kccm.providers.openstack.loadbalancer.sharing import (
    REASON_LB_ID_IGNORED,
    OctaviaSharing,
    group_balancer_name,
    group_of_description,
)

GROUP = ShareGroup("default", "shop")
NAME = group_balancer_name(CLUSTER, GROUP)


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


def member(name: str, port: int, node_port: int, **annotations: str) -> dict[str, Any]:
    values = {ANNOTATION_SHARE_GROUP: GROUP.name, **annotations}
    return service(name, ports=((port, node_port),), annotations=values)


def own_name(svc: dict[str, Any]) -> str:
    return f"kube_service_{CLUSTER}_default_{svc['metadata']['name']}"


def group_lb(balancers: OctaviaSharing) -> dict[str, Any] | None:
    found = balancers.octavia.list_load_balancers(name=NAME)
    assert len(found) <= 1, found
    return found[0] if found else None


def the_group_lb(balancers: OctaviaSharing) -> dict[str, Any]:
    lb = group_lb(balancers)
    assert lb is not None, "no group balancer"
    return lb


def listener_owners(balancers: OctaviaSharing, lb: dict[str, Any]) -> dict[int, list[str]]:
    return {
        int(li["protocol_port"]): list(li.get("tags") or ())
        for li in balancers.octavia.listeners(str(lb["id"]))
    }


def test_group_balancer_name_cannot_be_a_services_name() -> None:
    assert f"kube_service_{CLUSTER}_default_shop.share" == NAME


def test_two_members_share_one_balancer_and_the_last_leaves_nothing(world: LBWorld) -> None:
    balancers = world.balancers()
    web, api = member("web", 80, 30080), member("api", 443, 30443)
    one = balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    two = balancers.ensure_shared_load_balancer(CLUSTER, GROUP, api, world.nodes)
    assert one.ingress[0].ip
    assert one.ingress[0].ip == two.ingress[0].ip
    lb = the_group_lb(balancers)
    assert sorted(lb["tags"]) == sorted([own_name(web), own_name(api)])
    assert listener_owners(balancers, lb) == {80: [own_name(web)], 443: [own_name(api)]}
    fip = balancers.neutron.floating_ip_of_port(str(lb["vip_port_id"]))
    assert fip is not None
    assert "default/shop.share" in str(fip["description"])
    assert world.patcher.patches == [], "a group member got OCCM's annotations written back"
    assert balancers.get_shared_load_balancer(CLUSTER, GROUP, web)[1]

    before = world.seq()
    for svc in (web, api):
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    assert world.writes(before) == [], "an unchanged ensure wrote"

    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, web)
    lb = the_group_lb(balancers)
    assert lb["tags"] == [own_name(api)]
    assert listener_owners(balancers, lb) == {443: [own_name(api)]}
    status, found = balancers.get_shared_load_balancer(CLUSTER, GROUP, api)
    assert found
    assert status is not None
    assert status.ingress[0].ip == one.ingress[0].ip
    assert not balancers.get_shared_load_balancer(CLUSTER, GROUP, web)[1]

    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)
    assert group_lb(balancers) is None
    assert balancers.neutron.floating_ips(floating_ip_address=one.ingress[0].ip) == []
    before = world.seq()
    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)
    assert world.writes(before) == [], "a repeated delete wrote"


@pytest.mark.parametrize("cascade", ["true", "false"], ids=["cascade", "one-by-one"])
def test_the_last_member_deletes_with_or_without_cascade(world: LBWorld, cascade: str) -> None:
    balancers = world.balancers(**{"cascade-delete": cascade})
    web = member("web", 80, 30080)
    balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, web)
    assert group_lb(balancers) is None


def test_node_update_changes_only_the_members_pool(world: LBWorld) -> None:
    balancers = world.balancers()
    web, api = member("web", 80, 30080), member("api", 443, 30443)
    for svc in (web, api):
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    balancers.update_shared_load_balancer(CLUSTER, GROUP, web, [])
    lb = the_group_lb(balancers)
    pools = {
        int(li["protocol_port"]): balancers.octavia.pool_of_listener(str(lb["id"]), str(li["id"]))
        for li in balancers.octavia.listeners(str(lb["id"]))
    }
    members = {
        port: len(balancers.octavia.members(str(pool["id"])))
        for port, pool in pools.items()
        if pool is not None
    }
    assert members == {80: 0, 443: 1}
    for svc in (web, api):
        balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)


def test_a_port_of_another_member_is_never_taken(world: LBWorld) -> None:
    balancers = world.balancers()
    web, rival = member("web", 80, 30080), member("rival", 80, 30081)
    balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    with pytest.raises(CloudProviderError, match="listener port 80 already exists"):
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, rival, world.nodes)
    lb = the_group_lb(balancers)
    assert listener_owners(balancers, lb) == {80: [own_name(web)]}
    for svc in (rival, web):
        balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)
    assert group_lb(balancers) is None


def test_a_group_balancer_deleted_behind_kccms_back_is_made_again_with_its_address(
    world: LBWorld,
) -> None:
    balancers = world.balancers()
    web = member("web", 80, 30080)
    first = balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    lb = the_group_lb(balancers)
    balancers.octavia.delete_load_balancer(str(lb["id"]), cascade=True)
    status = balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    assert status.ingress[0].ip == first.ingress[0].ip
    again = the_group_lb(balancers)
    assert again["id"] != lb["id"]
    assert listener_owners(balancers, again) == {80: [own_name(web)]}
    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, web)


@pytest.mark.parametrize(
    ("lb_opts", "annotations", "error"),
    [
        ({}, {ann.INTERNAL: "true"}, "internal Service cannot share"),
        ({"internal-lb": "true"}, {}, "internal Service cannot share"),
    ],
    ids=["internal-annotation", "internal-lb-config"],
)
def test_internal_services_cannot_share(
    world: LBWorld, lb_opts: dict[str, str], annotations: dict[str, str], error: str
) -> None:
    balancers = world.balancers(**lb_opts)
    svc = member("web", 80, 30080, **annotations)
    with pytest.raises(InvalidServiceConfig, match=error) as raised:
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    assert raised.value.key == ann.INTERNAL
    assert group_lb(balancers) is None


@pytest.mark.parametrize(
    ("annotations", "spec", "settings"),
    [
        ({}, {}, {}),
        ({ann.INTERNAL: "true"}, {}, {ann.INTERNAL: "true"}),
        ({ann.FLOATING_NETWORK_ID: "net"}, {}, {ann.FLOATING_NETWORK_ID: "net"}),
        (
            {ann.FLAVOR_ID: "f", ann.AVAILABILITY_ZONE: "z"},
            {},
            {ann.FLAVOR_ID: "f", ann.AVAILABILITY_ZONE: "z"},
        ),
        ({}, {"loadBalancerIP": "203.0.113.9"}, {"spec.loadBalancerIP": "203.0.113.9"}),
        ({ann.TIMEOUT_CLIENT_DATA: "5000"}, {"loadBalancerSourceRanges": ["10.0.0.0/8"]}, {}),
    ],
    ids=["none", "internal", "floating-network", "flavor-and-zone", "address", "per-listener"],
)
def test_sharing_settings(
    world: LBWorld, annotations: dict[str, str], spec: dict[str, Any], settings: dict[str, str]
) -> None:
    svc = annotated(member("web", 80, 30080, **annotations), **spec)
    assert world.balancers().sharing_settings(svc) == settings


def test_a_member_with_load_balancer_id_is_warned_and_leaves_its_own_balancer(
    world: LBWorld,
) -> None:
    balancers = world.balancers()
    plain = service("web", ports=((80, 30080),))
    balancers.ensure_load_balancer(CLUSTER, plain, world.nodes)
    own = world.lb_named(plain)
    joined = annotated(world.with_written(plain), annotations={ANNOTATION_SHARE_GROUP: "shop"})
    assert joined["metadata"]["annotations"][ann.LB_ID] == own["id"]
    with collect_service_warnings() as warnings:
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, joined, world.nodes)
    reasons = [w.reason for w in warnings]
    assert reasons == [REASON_LB_ID_IGNORED], list(warnings)
    assert balancers.octavia.list_load_balancers(name=own_name(plain)) == []
    lb = the_group_lb(balancers)
    assert listener_owners(balancers, lb) == {80: [own_name(plain)]}
    balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, joined)


def _plain_ensure(balancers: OctaviaSharing, svc: dict[str, Any], world: LBWorld) -> None:
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)


def _plain_delete(balancers: OctaviaSharing, svc: dict[str, Any], world: LBWorld) -> None:
    balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def _other_group(balancers: OctaviaSharing, svc: dict[str, Any], world: LBWorld) -> None:
    balancers.ensure_shared_load_balancer(CLUSTER, OTHER, svc, world.nodes)


OTHER = ShareGroup("default", "cart")


@pytest.mark.parametrize(
    ("annotation", "then"),
    [
        (None, _plain_ensure),
        (None, _plain_delete),
        ("cart", _other_group),
    ],
    ids=["annotation-removed-own-balancer", "annotation-removed-then-deleted", "moved-to-cart"],
)
def test_a_service_that_leaves_its_group_takes_its_listeners_along(
    world: LBWorld, annotation: str | None, then: Any
) -> None:
    balancers = world.balancers()
    web, api = member("web", 80, 30080), member("api", 443, 30443)
    for svc in (web, api):
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    moved = annotated(web, annotations={ANNOTATION_SHARE_GROUP: annotation})
    try:
        then(balancers, moved, world)
        lb = the_group_lb(balancers)
        assert listener_owners(balancers, lb) == {443: [own_name(api)]}
        assert lb["tags"] == [own_name(api)]
        before = world.seq()
        then(balancers, moved, world)
        assert not [w for w in world.writes(before) if NAME in w], "left twice"
    finally:
        if annotation is None:
            balancers.ensure_load_balancer_deleted(CLUSTER, moved)
        else:
            balancers.ensure_shared_load_balancer_deleted(CLUSTER, OTHER, moved)
        balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)


def test_the_last_service_leaving_its_group_removes_the_group_balancer(world: LBWorld) -> None:
    balancers = world.balancers()
    web = member("web", 80, 30080)
    balancers.ensure_shared_load_balancer(CLUSTER, GROUP, web, world.nodes)
    fip = balancers.neutron.floating_ip_of_port(str(the_group_lb(balancers)["vip_port_id"]))
    assert fip is not None
    plain = annotated(web, annotations={ANNOTATION_SHARE_GROUP: None})
    balancers.ensure_load_balancer(CLUSTER, plain, world.nodes)
    assert group_lb(balancers) is None
    assert fip["id"] not in {f["id"] for f in balancers.neutron.floating_ips()}
    balancers.ensure_load_balancer_deleted(CLUSTER, plain)


def published(svc: dict[str, Any], ip: str) -> dict[str, Any]:
    return {**svc, "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}


def test_a_service_that_left_while_no_kccm_ran_leaves_after_the_restart(world: LBWorld) -> None:
    balancers = world.balancers()
    web, api = member("web", 80, 30080), member("api", 443, 30443)
    for svc in (web, api):
        status = balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    ip = str(status.ingress[0].ip)
    restarted = world.balancers()
    plain = published(annotated(web, annotations={ANNOTATION_SHARE_GROUP: None}), ip)
    try:
        restarted.ensure_load_balancer(CLUSTER, plain, world.nodes)
        lb = the_group_lb(restarted)
        assert listener_owners(restarted, lb) == {443: [own_name(api)]}
        assert lb["tags"] == [own_name(api)]
    finally:
        restarted.ensure_load_balancer_deleted(CLUSTER, plain)
        restarted.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, api)


@pytest.mark.parametrize(
    ("description", "group"),
    [
        ("Floating IP for Kubernetes external service default/shop.share from cluster k", "shop"),
        ("Floating IP for Kubernetes external service default/web from cluster k", None),
        ("Floating IP for Kubernetes external service other/shop.share from cluster k", None),
        ("kccm retained address of default/web from cluster k", None),
        ("", None),
    ],
    ids=["group", "service-of-its-own", "other-namespace", "retained", "none"],
)
def test_group_of_description(description: str, group: str | None) -> None:
    found = group_of_description(description, "default")
    assert (found.name if found else None) == group


def test_a_service_of_its_own_costs_no_extra_call(world: LBWorld) -> None:
    """Ensured by kccm, published and annotated with its balancer: the unchanged ensure sends
    exactly the requests of the provider without share groups."""
    balancers = world.balancers()
    plain = service("web", ports=((80, 30080),))
    status = balancers.ensure_load_balancer(CLUSTER, plain, world.nodes)
    seen = published(world.with_written(plain), str(status.ingress[0].ip))
    try:
        calls = []
        for ensure in (
            OctaviaLoadBalancers.ensure_load_balancer,
            OctaviaSharing.ensure_load_balancer,
        ):
            since = world.seq()
            ensure(balancers, CLUSTER, seen, world.nodes)
            calls.append([(r["method"], r["path"]) for r in world.emu.admin.requests(since)])
        assert calls[0] == calls[1]
        assert balancers.joined == {}
    finally:
        balancers.ensure_load_balancer_deleted(CLUSTER, seen)


def test_explain_describes_the_group_balancer_for_a_member(world: LBWorld) -> None:
    balancers = world.balancers()
    web, api = member("web", 80, 30080), member("api", 443, 30443)
    assert balancers.describe_load_balancer(CLUSTER, web) is None
    for svc in (web, api):
        balancers.ensure_shared_load_balancer(CLUSTER, GROUP, svc, world.nodes)
    try:
        view = balancers.describe_load_balancer(CLUSTER, web)
        assert view is not None
        assert view.name == NAME
        assert sorted(li.port for li in view.listeners) == [80, 443]
    finally:
        for svc in (web, api):
            balancers.ensure_shared_load_balancer_deleted(CLUSTER, GROUP, svc)
