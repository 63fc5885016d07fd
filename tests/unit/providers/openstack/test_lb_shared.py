"""Sharing a balancer between Services through ``load-balancer-id`` (upstream's shared-LB
checks in ``ensureOctaviaLoadBalancer``, ``checkListenerPorts``, ``deleteOctaviaListeners``
and the tag removal in ``ensureLoadBalancerDeleted``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service

from kccm.cloudprovider import CloudProviderError


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


def test_second_service_shares_and_leaves(world: LBWorld) -> None:
    balancers = world.balancers()
    owner = service("owner", ports=((80, 30080),))
    status = balancers.ensure_load_balancer(CLUSTER, owner, world.nodes)
    owner = world.with_written(owner)
    lb = world.lb_named(owner)
    guest = service("guest", ports=((8080, 30081),), annotations={ann.LB_ID: lb["id"]})
    guest_status = balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
    assert guest_status.ingress[0].ip == status.ingress[0].ip
    tags = balancers.octavia.get_load_balancer(lb["id"])["tags"]
    assert sorted(tags) == sorted(
        [f"kube_service_{CLUSTER}_default_owner", f"kube_service_{CLUSTER}_default_guest"]
    )
    assert sorted(li["protocol_port"] for li in balancers.octavia.listeners(lb["id"])) == [80, 8080]

    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
    assert world.writes(before) == []

    third = service("third", ports=((9090, 30082),), annotations={ann.LB_ID: lb["id"]})
    with pytest.raises(CloudProviderError, match="already shared with 2 Services"):
        balancers.ensure_load_balancer(CLUSTER, third, world.nodes)
    clash = service("clash", ports=((80, 30083),), annotations={ann.LB_ID: lb["id"]})
    with pytest.raises(CloudProviderError, match="the listener port 80 already exists"):
        world.balancers(**{"max-shared-lb": "5"}).ensure_load_balancer(CLUSTER, clash, world.nodes)

    balancers.ensure_load_balancer_deleted(CLUSTER, guest)
    assert [li["protocol_port"] for li in balancers.octavia.listeners(lb["id"])] == [80]
    assert balancers.octavia.get_load_balancer(lb["id"])["tags"] == [
        f"kube_service_{CLUSTER}_default_owner"
    ]
    balancers.ensure_load_balancer_deleted(CLUSTER, owner)


def test_internal_service_cannot_share(world: LBWorld) -> None:
    balancers = world.balancers()
    owner = service("owner")
    balancers.ensure_load_balancer(CLUSTER, owner, world.nodes)
    owner = world.with_written(owner)
    lb = world.lb_named(owner)
    guest = service(
        "guest", ports=((81, 30090),), annotations={ann.LB_ID: lb["id"], ann.INTERNAL: "true"}
    )
    with pytest.raises(CloudProviderError, match="internal Service cannot share"):
        balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
    balancers.ensure_load_balancer_deleted(CLUSTER, owner)


def test_max_shared_lb_zero_refuses_every_guest_not_the_owner(world: LBWorld) -> None:
    """``max-shared-lb = 0`` starts (as OCCM) and then refuses each Service naming another's
    balancer: ``sharedCount+1 > MaxSharedLB`` (the owner is not counted against it)."""
    balancers = world.balancers(**{"max-shared-lb": "0"})
    owner = service("owner", ports=((80, 30080),))
    balancers.ensure_load_balancer(CLUSTER, owner, world.nodes)
    owner = world.with_written(owner)
    lb = world.lb_named(owner)
    balancers.ensure_load_balancer(CLUSTER, owner, world.nodes)
    guest = service("guest", ports=((8080, 30081),), annotations={ann.LB_ID: lb["id"]})
    with pytest.raises(CloudProviderError, match="already shared with 1 Services"):
        balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
    balancers.ensure_load_balancer_deleted(CLUSTER, owner)
