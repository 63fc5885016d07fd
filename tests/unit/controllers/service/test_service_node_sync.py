"""service-lb-controller: node sync only touches ensured services, coalesced, cheap."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from service_harness import (
    EXCLUDE,
    NS,
    Harness,
    calls_for,
    create_node,
    create_service,
    ensure_all,
    key,
    lb_spec,
    run_until_quiet,
    start,
    update_calls,
)

from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.testing.loopturns import turns_during

# -- issue 11.3 / 10.3: node sync only touches ensured services, coalesced, cheap ----------------


async def test_node_sync_leaves_services_not_yet_ensured_alone(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    controller.cache[key("s1")] = await h.service("s1")  # known, not ensured yet
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []
    assert controller.ensured == set()


async def test_nodes_arriving_while_services_are_first_ensured_never_update_them_early(
    harness: Harness,
) -> None:
    """Services exist before the controller starts; nodes register and initialise while the
    first ensures are in flight: every service is ensured before any update, no spurious
    UpdateLoadBalancerFailed, and the late nodes still reach every load balancer."""
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    names = ["s1", "s2", "s3"]
    for name in names:
        await create_service(h, name)
    h.cloud.set_latency("ensure_load_balancer", 5.0)
    controller = await start(h, workers=3)
    task = asyncio.create_task(controller.run())
    await h.clock.advance(0)
    assert h.cloud.calls.count("ensure_load_balancer") == 3, "all three ensures in flight"
    await create_node(h, "b")
    await h.settle()
    await h.kube.patch(NODES, "b", {"spec": {"providerID": "fake://b"}})
    await h.settle()
    assert "update_load_balancer" not in h.cloud.calls
    await h.clock.advance(5.0)
    for _ in range(20):
        await h.clock.advance(0)
    for name in names:
        assert calls_for(h, name) == ["ensure_load_balancer", "update_load_balancer"], name
    assert set(update_calls(h)) == {(key(n), ("a", "b")) for n in names}
    assert "UpdateLoadBalancerFailed" not in h.events.reasons()
    assert {b.hosts for b in h.cloud.balancers.values()} == {("a", "b")}
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


async def test_a_burst_of_node_events_is_one_node_sync(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    syncs, builds = controller.node_syncs, controller.backends.recomputations
    for i in range(50):
        await create_node(h, f"burst-{i:02d}")
    await h.settle()
    assert len(controller.node_queue) == 1, "fifty node events, one queued node sync"
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert controller.node_syncs - syncs == 1
    assert controller.backends.recomputations - builds == 1, "one node-set build per burst"
    assert len(update_calls(h)) == 1
    assert len(update_calls(h)[0][1]) == 51


async def test_start_up_with_existing_nodes_and_services_builds_the_node_set_once(
    harness: Harness,
) -> None:
    h = harness
    for i in range(200):
        await create_node(h, f"n{i:03d}", provider_id=f"fake://n{i:03d}")
    names = [f"s{i:02d}" for i in range(40)]
    for name in names:
        await create_service(h, name)
    controller = await start(h, workers=4)
    task = asyncio.create_task(controller.run())
    await run_until_quiet(h, controller)
    assert h.cloud.calls.count("ensure_load_balancer") == 40
    assert "update_load_balancer" not in h.cloud.calls
    assert controller.backends.recomputations == 1, "every ensure shares one node set"
    assert controller.node_syncs == 1, "the start-up burst of node adds is one node sync"
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"metadata": {"labels": {"x": "y"}}}, id="other-label"),
        pytest.param(
            {"spec": {"taints": [{"key": "example.com/t", "effect": "NoSchedule"}]}},
            id="other-taint",
        ),
        pytest.param({"metadata": {"labels": {EXCLUDE: "false"}}}, id="exclude-false"),
    ],
)
async def test_node_changes_that_keep_the_backends_cost_nothing(
    harness: Harness, change: dict[str, Any]
) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    version, builds = controller.backends.version, controller.backends.recomputations
    await h.kube.patch(NODES, "a", change)
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []
    assert controller.backends.version == version
    assert controller.backends.recomputations == builds
    # ... yet the next ensure is given the newest node object.
    current = controller.backends.snapshot().nodes[0]
    assert current == await h.kube.get(NODES, "a")


async def test_node_sync_gives_the_event_loop_a_turn(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    controller = await start(h)
    old = controller.backends.snapshot()
    for i in range(1000):
        name = f"s{i}"
        controller.cache[key(name)] = {
            "metadata": {"name": name, "namespace": NS},
            "spec": lb_spec(),
        }
        controller.ensured.add(key(name))
        controller.last_synced[key(name)] = old
    await create_node(h, "b")
    await create_node(h, "c")
    await h.kube.delete(NODES, "c")  # a new version, but the same backends as... not quite
    await h.kube.delete(NODES, "b")  # ... now the same backends as `old`
    await h.settle()
    retry, turns = await turns_during(controller.sync_nodes())
    assert retry == set()
    assert h.cloud.calls == [], "same backends: no cloud call"
    assert turns >= 1000 // 256, "the pass over 1000 services yields regularly"
    assert {s.version for s in controller.last_synced.values()} == {controller.backends.version}


# -- issue 13.3: addresses arriving after initialisation reach the load balancers ---------------


async def test_addresses_arriving_after_initialisation_resync_backends(harness: Harness) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    seen: list[list[Any]] = []
    original = h.cloud.update_load_balancer

    async def spy(cluster: str, service: Obj, nodes: Any) -> None:
        seen.append([(n["metadata"]["name"], n.get("status", {}).get("addresses")) for n in nodes])
        await original(cluster, service, nodes)

    h.cloud.update_load_balancer = spy  # type: ignore[method-assign]
    # A node registers without addresses; the cloud-node controller sets its providerID,
    # then patches its addresses.
    await create_node(h, "b")
    await h.settle()
    await h.kube.patch(NODES, "b", {"spec": {"providerID": "fake://b"}})
    await h.settle()
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert seen[-1] == [("a", None), ("b", None)]
    address = [{"type": "InternalIP", "address": "10.0.0.2"}]
    await h.kube.patch(NODES, "b", {"status": {"addresses": address}}, subresource="status")
    await h.settle()
    assert len(controller.node_queue) == 1
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert seen[-1] == [("a", None), ("b", address)]


# -- issue 16: every start ensures; economy is the provider's read-compare-write ---------------


# -- kccm: a node sync's update and the service's own sync never overlap -----------------------


async def test_a_deletion_waits_for_the_node_sync_updating_the_balancer(harness: Harness) -> None:
    """A Service deleted while a node sync updates its balancer is deleted once that update
    returned, never beside it: a provider's update may make again what the deletion removed
    (aws's NLB update ensures: a target group outlived its Service that way)."""
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    controller = await start(h)
    task = asyncio.create_task(controller.run())
    await run_until_quiet(h, controller)
    order: list[str] = []
    release = asyncio.Event()
    update, delete = h.cloud.update_load_balancer, h.cloud.ensure_load_balancer_deleted

    async def held_update(*args: Any) -> None:
        order.append("update")
        await release.wait()
        await update(*args)
        order.append("updated")

    async def deletion(*args: Any) -> None:
        order.append("delete")
        await delete(*args)

    h.cloud.update_load_balancer = held_update  # type: ignore[method-assign]
    h.cloud.ensure_load_balancer_deleted = deletion  # type: ignore[method-assign]
    await create_node(h, "b", provider_id="fake://b")
    for _ in range(20):
        await h.clock.advance(0)
    assert order == ["update"]
    await h.kube.delete(SERVICES, "s1", namespace=NS)
    for _ in range(20):
        await h.clock.advance(0)
    assert order == ["update"], "the deletion waits for the update under way"
    release.set()
    await run_until_quiet(h, controller)
    assert order == ["update", "updated", "delete"]
    assert h.cloud.balancers == {}
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


# -- the same-object promise (cloudprovider.interface.LoadBalancer) ----------------------------


def _record_node_lists(h: Harness) -> list[tuple[str, Any]]:
    """Every ``nodes`` object the provider is given, by method."""
    seen: list[tuple[str, Any]] = []
    for method in ("ensure_load_balancer", "update_load_balancer"):
        real = getattr(h.cloud, method)

        async def recording(cluster: str, service: Any, nodes: Any, *, _m=method, _r=real) -> Any:
            seen.append((_m, nodes))
            return await _r(cluster, service, nodes)

        setattr(h.cloud, method, recording)
    return seen


async def test_one_node_set_is_one_tuple_object_for_every_ensure_and_update(
    harness: Harness,
) -> None:
    """Providers remember work per node list by identity (IdentityMemo): the controller must
    hand every call the same tuple while the set is unchanged, and a new one once it changed."""
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    names = ["s1", "s2", "s3"]
    for name in names:
        await create_service(h, name)
    seen = _record_node_lists(h)
    controller = await start(h)
    await ensure_all(h, controller, names)
    first = seen[0][1]
    assert isinstance(first, tuple)
    assert [m for m, _ in seen] == ["ensure_load_balancer"] * 3
    assert all(nodes is first for _, nodes in seen), "one node set, one tuple"

    seen.clear()
    await create_node(h, "b", provider_id="fake://b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    await controller.sync_service(key("s1"))
    second = seen[0][1]
    assert second is not first
    assert len(second) == 2
    assert [m for m, _ in seen] == ["update_load_balancer"] * 3 + ["ensure_load_balancer"]
    assert all(nodes is second for _, nodes in seen), "the changed set, one new tuple"
