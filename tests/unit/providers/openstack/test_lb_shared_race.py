"""Services sharing a balancer (``load-balancer-id``) synced at the same time, as kccm's ten
service workers do (OCCM runs one): the balancer's tag list, which says which Services use
it, is read, changed and written back whole (Octavia has no compare-and-swap; the last
``PUT`` wins), so two syncs that read it before either wrote lose one tag, and the delete
of a Service that believes itself alone on the balancer then cascade-deletes it under the
other.

The interleavings are forced, never left to timing: each sync runs in its own thread and
stops at a named request until the other sync has reached a named point (read the balancer,
finished) or is waiting for the provider's lock on that balancer (the lock's debug line).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from os_lb_support import CLUSTER, LBWorld, ann, lb_world, service

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.api import OpenStackConflict
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers
from kccm.providers.openstack.loadbalancer.locks import BalancerBusy
from kccm.providers.openstack.loadbalancer.names import load_balancer_name
from kccm.testing.interleave import Interleaving, Stop

LOCKS_LOGGER = "kccm.providers.openstack.loadbalancer.locks"

LB_PATH = re.compile(r"/loadbalancers/[0-9a-f-]{36}$")
SAFETY_NET = 30.0


@pytest.fixture
def world() -> Iterator[LBWorld]:
    with lb_world(servers=1) as made:
        yield made


@dataclass
class ByService:
    """A ServicePatcher keeping the annotations written for each Service."""

    written: dict[str, dict[str, str]] = field(default_factory=dict)

    def patch_annotations(self, svc: Mapping[str, Any], annotations: Mapping[str, str]) -> None:
        self.written.setdefault(svc["metadata"]["name"], {}).update(annotations)

    def current(self, svc: dict[str, Any]) -> dict[str, Any]:
        values = {**svc["metadata"]["annotations"], **self.written.get(svc["metadata"]["name"], {})}
        return {**svc, "metadata": {**svc["metadata"], "annotations": values}}


def watch(order: Interleaving, balancers: OctaviaLoadBalancers) -> None:
    """Points of ``balancers``' Octavia requests on a balancer: ``read`` after a ``GET``
    (and a stop there), ``tags`` before a ``PUT`` carrying tags, the method before others."""
    api = balancers.octavia.api
    send = api.request

    def request(service_type: str, method: str, path: str, **kw: Any) -> Any:
        on_lb = service_type == "load-balancer" and bool(LB_PATH.search(path))
        if on_lb:
            body = (kw.get("json") or {}).get("loadbalancer") or {}
            order.before("tags" if method == "PUT" and "tags" in body else method)
        answer = send(service_type, method, path, **kw)
        if on_lb and method == "GET":
            order.mark("read")
            order.before("read")
        return answer

    api.request = request  # type: ignore[method-assign]


def _provider(world: LBWorld, patcher: ByService, **lb: str) -> OctaviaLoadBalancers:
    balancers = world.balancers(**lb)
    balancers.set_service_patcher(patcher)
    return balancers


def _tags(balancers: OctaviaLoadBalancers, lb_id: str) -> list[str]:
    return sorted(balancers.octavia.get_load_balancer(lb_id)["tags"])


def _name(svc: Mapping[str, Any]) -> str:
    return load_balancer_name(CLUSTER, svc)


def _owner(world: LBWorld, balancers: OctaviaLoadBalancers, patcher: ByService) -> Any:
    owner = service("owner", ports=((80, 30080),))
    balancers.ensure_load_balancer(CLUSTER, owner, world.nodes)
    owner = patcher.current(owner)
    return owner, owner["metadata"]["annotations"][ann.LB_ID]


def _cleanup(balancers: OctaviaLoadBalancers, patcher: ByService, *svcs: Any) -> None:
    for svc in svcs:
        balancers.ensure_load_balancer_deleted(CLUSTER, patcher.current(svc))


JOINS = [
    # id, max-shared-lb, guests expected to join
    pytest.param("3", 2, id="room-for-both-guests-both-tagged"),
    pytest.param("2", 1, id="room-for-one-guest-the-other-refused"),
]


@pytest.mark.parametrize(("max_shared", "joined"), JOINS)
def test_two_guests_joining_at_once_are_both_counted(
    world: LBWorld, max_shared: str, joined: int
) -> None:
    patcher = ByService()
    balancers = _provider(world, patcher, **{"max-shared-lb": max_shared})
    owner, lb_id = _owner(world, balancers, patcher)
    guests = {
        role: service(role, ports=((port, 30000 + port),), annotations={ann.LB_ID: lb_id})
        for role, port in (("g1", 8081), ("g2", 8082))
    }
    # each guest writes its tag only once the other has read the balancer (or waits for it)
    order = Interleaving(
        (Stop("g1", "tags", ("g2:read", "g2:waits")), Stop("g2", "tags", ("g1:read", "g1:waits")))
    )
    watch(order, balancers)
    with order.lock_log(LOCKS_LOGGER):
        results = order.run(
            {
                role: lambda svc=svc: balancers.ensure_load_balancer(CLUSTER, svc, world.nodes)
                for role, svc in guests.items()
            }
        )
    assert balancers.locks.held() == []
    refused = {role for role, r in results.items() if isinstance(r, Exception)}
    members = [g for role, g in guests.items() if role not in refused]
    try:
        for role in refused:
            assert isinstance(results[role], CloudProviderError)
            assert "already shared with 2 Services" in str(results[role])
        assert len(members) == joined, results
        assert _tags(balancers, lb_id) == sorted(_name(s) for s in (owner, *members))
    finally:
        _cleanup(balancers, patcher, *guests.values(), owner)


def _guest_listener_alive(balancers: OctaviaLoadBalancers, port: int) -> bool:
    octavia = balancers.octavia
    return any(
        li["protocol_port"] == port
        for lb in octavia.list_load_balancers()
        for li in octavia.listeners(str(lb["id"]))
    )


def test_owner_deleted_while_a_guest_joins_leaves_the_guest_a_balancer(
    world: LBWorld,
) -> None:
    patcher = ByService()
    balancers = _provider(world, patcher, **{"max-shared-lb": "3"})
    owner, lb_id = _owner(world, balancers, patcher)
    guest = service("guest", ports=((8081, 30081),), annotations={ann.LB_ID: lb_id})
    # the guest tags the balancer once the owner's delete has read it; the delete goes on
    # from its read once the guest is done (or waits for the balancer)
    order = Interleaving(
        (
            Stop("guest", "tags", ("owner:read", "owner:waits")),
            Stop("owner", "read", ("guest:done", "guest:waits")),
        )
    )
    watch(order, balancers)
    with order.lock_log(LOCKS_LOGGER):
        results = order.run(
            {
                "owner": lambda: balancers.ensure_load_balancer_deleted(CLUSTER, owner),
                "guest": lambda: balancers.ensure_load_balancer(CLUSTER, guest, world.nodes),
            }
        )
    try:
        assert results["owner"] is None
        assert not isinstance(results["guest"], Exception), results["guest"]
        assert _guest_listener_alive(balancers, 8081)
    finally:
        _cleanup(balancers, patcher, guest)


def test_a_tag_write_refused_with_409_is_rebuilt_from_the_balancer_read_again(
    world: LBWorld,
) -> None:
    """Another writer (a second controller, an operator) changes the tags while kccm's
    ``PUT`` is refused as the balancer is busy: the retry carries both changes."""
    patcher = ByService()
    balancers = _provider(world, patcher, **{"max-shared-lb": "3"})
    other = world.balancers()
    owner, lb_id = _owner(world, balancers, patcher)
    foreign = f"kube_service_{CLUSTER}_elsewhere_other"
    guest = service("guest", ports=((8081, 30081),), annotations={ann.LB_ID: lb_id})
    world.emu.admin.fault("load-balancer", "PUT", r"/loadbalancers/[^/]+$", kind="conflict")
    send = balancers.octavia.api.request

    def request(service_type: str, method: str, path: str, **kw: Any) -> Any:
        try:
            return send(service_type, method, path, **kw)
        except OpenStackConflict:
            tags = other.octavia.get_load_balancer(lb_id)["tags"]
            other.octavia.update_load_balancer(lb_id, {"tags": [*tags, foreign]})
            raise

    balancers.octavia.api.request = request  # type: ignore[method-assign]
    try:
        balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
        assert _tags(balancers, lb_id) == sorted([_name(owner), _name(guest), foreign])
    finally:
        balancers.octavia.api.request = send  # type: ignore[method-assign]
        tags = [t for t in other.octavia.get_load_balancer(lb_id)["tags"] if t != foreign]
        other.octavia.update_load_balancer(lb_id, {"tags": tags or [""]})
        _cleanup(balancers, patcher, guest, owner)


def test_a_sync_kept_waiting_past_the_bound_fails_to_be_retried(world: LBWorld) -> None:
    """Another Service's sync holds the shared balancer (a zero bound stands for the 30 s):
    the guest's ensure fails naming the balancer, before any write, and its retry joins."""
    patcher = ByService()
    balancers = _provider(world, patcher, **{"max-shared-lb": "3"})
    owner, lb_id = _owner(world, balancers, patcher)
    guest = service("guest", ports=((8081, 30081),), annotations={ann.LB_ID: lb_id})
    balancers.locks.wait_s = 0
    holding, release = threading.Event(), threading.Event()

    def other_sync() -> None:
        with balancers.locks.hold(lb_id):
            holding.set()
            release.wait(SAFETY_NET)

    thread = threading.Thread(target=other_sync)
    thread.start()
    try:
        assert holding.wait(SAFETY_NET)
        before = world.seq()
        with pytest.raises(BalancerBusy) as busy:
            balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
        assert str(busy.value) == f"balancer {lb_id} is busy with another Service's sync; retrying"
        assert world.writes(before) == []
    finally:
        release.set()
        thread.join(SAFETY_NET)
    try:
        balancers.ensure_load_balancer(CLUSTER, guest, world.nodes)
        assert _tags(balancers, lb_id) == sorted([_name(owner), _name(guest)])
    finally:
        _cleanup(balancers, patcher, guest, owner)
