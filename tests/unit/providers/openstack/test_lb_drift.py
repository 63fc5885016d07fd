"""Read-compare-write: whatever is removed or changed behind kccm's back (a listener, a pool,
members, the monitor, the floating IP, listener settings) is put back by the next ensure,
which then is the last write: the ensure after it makes none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, lb_world, service

from kccm.providers.openstack.api import OpenStackError
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world() as made:
        yield made


Drift = Callable[[OctaviaLoadBalancers, dict[str, Any]], None]


def _pool(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> dict[str, Any]:
    (pool,) = b.octavia.pools(lb["id"])
    return pool


def delete_listener(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    pool = _pool(b, lb)
    b.octavia.delete_pool(lb["id"], pool["id"])
    (listener,) = b.octavia.listeners(lb["id"])
    b.octavia.delete_listener(lb["id"], listener["id"])


def delete_pool(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    b.octavia.delete_pool(lb["id"], _pool(b, lb)["id"])


def delete_member(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    pool = _pool(b, lb)
    member = b.octavia.members(pool["id"])[0]
    b.octavia.delete_member(lb["id"], pool["id"], member["id"])


def delete_monitor(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    b.octavia.delete_health_monitor(lb["id"], _pool(b, lb)["healthmonitor_id"])


def change_monitor(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    b.octavia.update_health_monitor(lb["id"], _pool(b, lb)["healthmonitor_id"], {"delay": 30})


def change_listener(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    (listener,) = b.octavia.listeners(lb["id"])
    b.octavia.update_listener(
        lb["id"], listener["id"], {"connection_limit": 5, "timeout_client_data": 1}
    )


def change_method(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    b.octavia.update_pool(lb["id"], _pool(b, lb)["id"], {"lb_algorithm": "SOURCE_IP"})


def delete_fip(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    fip = b.neutron.floating_ip_of_port(lb["vip_port_id"])
    assert fip is not None
    b.neutron.delete_floating_ip(fip["id"])


def detach_fip(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    fip = b.neutron.floating_ip_of_port(lb["vip_port_id"])
    assert fip is not None
    b.neutron.set_floating_ip_port(fip["id"], None)
    b.neutron.delete_floating_ip(fip["id"])


def drop_tag(b: OctaviaLoadBalancers, lb: dict[str, Any]) -> None:
    b.octavia.update_load_balancer(lb["id"], {"tags": []})


DRIFTS: list[tuple[str, Drift]] = [
    ("listener-deleted", delete_listener),
    ("pool-deleted", delete_pool),
    ("member-deleted", delete_member),
    ("monitor-deleted", delete_monitor),
    ("monitor-changed", change_monitor),
    ("listener-changed", change_listener),
    ("lb-method-changed", change_method),
    ("fip-deleted", delete_fip),
    ("fip-detached-and-deleted", detach_fip),
    ("lb-tag-dropped", drop_tag),
]


def _shape(b: OctaviaLoadBalancers, lb_id: str) -> dict[str, Any]:
    """What the balancer looks like, ids left out."""
    octavia = b.octavia
    (listener,) = octavia.listeners(lb_id)
    (pool,) = octavia.pools(lb_id)
    monitor = octavia.health_monitor(pool["healthmonitor_id"])
    lb = octavia.get_load_balancer(lb_id)
    fip = b.neutron.floating_ip_of_port(lb["vip_port_id"])
    return {
        "tags": lb["tags"],
        "listener": {
            k: listener[k]
            for k in (
                "name",
                "protocol",
                "protocol_port",
                "connection_limit",
                "timeout_client_data",
                "tags",
            )
        },
        "pool": {k: pool[k] for k in ("name", "protocol", "lb_algorithm")},
        "members": sorted(
            (m["name"], m["address"], m["protocol_port"]) for m in octavia.members(pool["id"])
        ),
        "monitor": {k: monitor[k] for k in ("name", "type", "delay", "timeout", "max_retries")},
        "fip": fip is not None,
    }


@pytest.mark.parametrize("drift", [d[1] for d in DRIFTS], ids=[d[0] for d in DRIFTS])
def test_drift_is_repaired(world: LBWorld, drift: Drift) -> None:
    balancers = world.balancers(**{"create-monitor": "true"})
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    lb = world.lb_named(svc)
    wanted = _shape(balancers, lb["id"])

    drift(balancers, lb)
    assert _shape_or_none(balancers, lb["id"]) != wanted
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    assert _shape(balancers, lb["id"]) == wanted
    assert status.ingress[0].ip

    before = world.seq()
    balancers.ensure_load_balancer(CLUSTER, world.with_written(svc), world.nodes)
    assert world.writes(before) == []
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))


def _shape_or_none(b: OctaviaLoadBalancers, lb_id: str) -> dict[str, Any] | None:
    try:
        return _shape(b, lb_id)
    except (ValueError, KeyError, OpenStackError):
        return None


def test_deleted_balancer_is_made_again(world: LBWorld) -> None:
    """kccm: a ``load-balancer-id`` whose balancer is gone is looked up by name and made
    again (OCCM fails the Service for ever)."""
    balancers = world.balancers()
    svc = service()
    balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    svc = world.with_written(svc)
    old = world.lb_named(svc)
    fip = balancers.neutron.floating_ip_of_port(old["vip_port_id"])
    assert fip is not None
    balancers.neutron.delete_floating_ip(fip["id"])
    balancers.octavia.delete_load_balancer(old["id"], cascade=True)
    status = balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
    new = world.lb_named(svc)
    assert new["id"] != old["id"]
    assert world.patcher.patches[-1]["loadbalancer.openstack.org/load-balancer-id"] == new["id"]
    assert status.ingress[0].ip
    balancers.ensure_load_balancer_deleted(CLUSTER, world.with_written(svc))
