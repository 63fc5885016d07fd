"""An ``lb-method`` Octavia does not know, as OCCM v1.36.0 treats it (``ensureOctaviaPool``,
``pkg/openstack/loadbalancer.go`` lines 905-936): on a pool that exists the refused update is a
``LoadBalancerLbMethodUnknown`` Warning and the sync goes on, members included (a Node change
still reaches the pool); only where a pool would be made is the Service refused, before any
write (a new balancer: test_lb_annotations.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, annotated, lb_world, node_of, service

from kccm.cloudprovider import collect_service_warnings
from kccm.providers.openstack.loadbalancer import events as ev
from kccm.providers.openstack.loadbalancer.annotations import LBAnnotationError
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=2) as made:
        yield made


def _member_addresses(balancers: OctaviaLoadBalancers, lb_id: str) -> list[str]:
    (pool,) = balancers.octavia.pools(lb_id)
    return sorted(str(m["address"]) for m in balancers.octavia.members(str(pool["id"])))


SYNCS = [
    # id, the call a Node change makes
    ("update", "update_load_balancer"),
    ("ensure", "ensure_load_balancer"),
]


@pytest.mark.parametrize("call", [s[1] for s in SYNCS], ids=[s[0] for s in SYNCS])
def test_a_node_change_reaches_the_pool_despite_an_unknown_method(
    world: LBWorld, call: str
) -> None:
    balancers = world.balancers()
    first, second = (node_of(s) for s in world.servers)
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, [first])
    svc = annotated(world.with_written(svc), annotations={ann.LB_METHOD: "RANDOM"})
    lb_id = str(world.lb_named(svc)["id"])
    try:
        with collect_service_warnings() as warnings:
            getattr(balancers, call)(CLUSTER, svc, [first, second])
        assert _member_addresses(balancers, lb_id) == sorted(
            a["address"] for n in (first, second) for a in n["status"]["addresses"]
        )
        refused = [w for w in warnings if w.reason == ev.LB_METHOD_UNKNOWN]
        assert len(refused) == 1, list(warnings)
        assert refused[0].message.startswith("Error updating LB method for LoadBalancer: ")
        (pool,) = balancers.octavia.pools(lb_id)
        assert pool["lb_algorithm"] == "ROUND_ROBIN"
    finally:
        balancers.ensure_load_balancer_deleted(CLUSTER, svc)


def test_a_pool_to_be_made_again_is_refused_before_the_old_one_goes(world: LBWorld) -> None:
    """A protocol change makes the pool again; OCCM deletes the old one, then Octavia refuses
    the new one. kccm refuses first, so the old pool keeps serving."""
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    lb_id = str(world.lb_named(svc)["id"])
    (before,) = balancers.octavia.pools(lb_id)
    changed = annotated(svc, annotations={ann.LB_METHOD: "RANDOM", ann.PROXY_PROTOCOL: "v2"})
    try:
        with pytest.raises(LBAnnotationError) as refused:
            balancers.ensure_load_balancer(CLUSTER, changed, world.nodes)
        assert refused.value.key == ann.LB_METHOD
        assert [p["id"] for p in balancers.octavia.pools(lb_id)] == [before["id"]]
    finally:
        balancers.ensure_load_balancer_deleted(CLUSTER, svc)
