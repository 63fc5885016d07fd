"""service-lb-controller: every start ensures; economy is the provider's read-compare-write."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from service_harness import (
    ENSURED,
    NS,
    Harness,
    create_node,
    create_service,
    ensure_all,
    fake_ingress,
    key,
    lb_spec,
    run_until_quiet,
    start,
    update_calls,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.apicalls import APICallCounts
from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.cloudprovider.types import LoadBalancerIPMode
from kccm.controllers.service import (
    ServiceController,
    ServiceSyncError,
)
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import SERVICES
from kccm.providers.fake import FakeBalancer, FakeCloudError
from kccm.runtime.informers import SharedInformerFactory

LEGACY_HASH = "service.kccm.io/load-balancer-spec-hash"
"""The annotation kccm wrote up to issue 16: never written now, removed with the next write."""


async def restart(h: Harness) -> ServiceController:
    """A new controller process: fresh informers and caches, the same apiserver and cloud."""
    await h.factory.stop()
    h.factory = SharedInformerFactory(h.kube, clock=h.clock)
    h.cloud.clear_calls()
    h.events.recorded.clear()
    h.kube.patches.clear()
    return await start(h)


def kccm_marks(obj: Obj) -> list[str]:
    """Annotations and labels of kccm's own on ``obj`` (none may be left)."""
    meta = obj.get("metadata") or {}
    keys = [*(meta.get("annotations") or {}), *(meta.get("labels") or {})]
    return [k for k in keys if "kccm.io" in k]


async def first_run(h: Harness, names: list[str]) -> ServiceController:
    await create_node(h, "a", provider_id="fake://a")
    await create_node(h, "b", provider_id="fake://b")
    for name in names:
        await create_service(h, name)
    controller = await start(h)
    await ensure_all(h, controller, names)
    return controller


def writes_since(h: Harness, before: APICallCounts) -> dict[str, int]:
    return dict(h.cloud.cloud_api_calls().snapshot().since(before).writes)


async def test_ensure_writes_nothing_of_kccms_own_on_the_service(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await controller.sync_service(key("s1"))
    assert [p.body for p in h.kube.patches] == [
        {"metadata": {"finalizers": [FINALIZER_LB_CLEANUP]}},
        {"status": {"loadBalancer": {"ingress": fake_ingress()}}},
    ]
    assert kccm_marks(await h.service("s1")) == []


async def test_restart_ensures_every_balancer_with_upstreams_events_and_no_cloud_write(
    harness: Harness,
) -> None:
    """Upstream ensures every Service on start; the fake's read-compare-write makes that
    cost reads only, and nothing is written to the apiserver either."""
    h = harness
    names = ["s1", "s2", "s3"]
    await first_run(h, names)
    controller = await restart(h)
    before = h.cloud.cloud_api_calls().snapshot()
    task = asyncio.create_task(controller.run())
    await run_until_quiet(h, controller)
    assert sorted(h.cloud.calls) == ["ensure_load_balancer"] * 3
    assert writes_since(h, before) == {}
    assert h.kube.patches == [], "status and finalizer are unchanged: nothing to write"
    assert sorted(h.events.reasons()) == sorted(ENSURED * 3)
    assert controller.ensured == {key(n) for n in names}
    # Those services are now ensured by this process: node changes reach them.
    await create_node(h, "c", provider_id="fake://c")
    await run_until_quiet(h, controller)
    assert sorted(update_calls(h)) == [(key(n), ("a", "b", "c")) for n in names]
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


def _balancer(h: Harness) -> FakeBalancer:
    (balancer,) = h.cloud.balancers.values()
    return balancer


async def _lose_the_balancer(h: Harness) -> None:
    h.cloud.remove_balancer(_balancer(h).name)


async def _tamper_ports(h: Harness) -> None:
    h.cloud.alter_balancer(_balancer(h).name, ports=())


async def _tamper_hosts(h: Harness) -> None:
    h.cloud.alter_balancer(_balancer(h).name, hosts=("a",))


async def _change_the_cloud_config(h: Harness) -> None:
    h.cloud.load_balancer_ip_mode = LoadBalancerIPMode.PROXY


async def _annotate(h: Harness) -> None:
    await h.kube.patch(SERVICES, "s1", {"metadata": {"annotations": {"x": "1"}}}, namespace=NS)


async def _change_ports(h: Harness) -> None:
    ports = [{"name": "p", "protocol": "TCP", "port": 8080, "targetPort": 80}]
    await h.kube.patch(SERVICES, "s1", {"spec": {"ports": ports}}, namespace=NS)


async def _add_node(h: Harness) -> None:
    await create_node(h, "c", provider_id="fake://c")


async def _nothing(h: Harness) -> None:
    return None


@pytest.mark.parametrize(
    ("while_down", "writes"),
    [
        pytest.param(_nothing, {}, id="nothing-changed-no-cloud-write"),
        pytest.param(_annotate, {}, id="annotation-changed-same-balancer-no-write"),
        pytest.param(
            _lose_the_balancer, {"create_load_balancer": 1}, id="deleted-balancer-re-created"
        ),
        pytest.param(_tamper_ports, {"set_load_balancer_ports": 1}, id="drifted-ports-repaired"),
        pytest.param(_tamper_hosts, {"set_load_balancer_hosts": 1}, id="drifted-hosts-repaired"),
        pytest.param(
            _change_the_cloud_config,
            {"set_load_balancer_ip_mode": 1},
            id="changed-cloud-config-applied",
        ),
        pytest.param(_change_ports, {"set_load_balancer_ports": 1}, id="ports-changed-written"),
        pytest.param(_add_node, {"set_load_balancer_hosts": 1}, id="node-added-written"),
    ],
)
async def test_restart_repairs_what_changed_while_kccm_was_down(
    harness: Harness,
    while_down: Callable[[Harness], Awaitable[None]],
    writes: dict[str, int],
) -> None:
    h = harness
    await first_run(h, ["s1"])
    await while_down(h)
    controller = await restart(h)
    before = h.cloud.cloud_api_calls().snapshot()
    await controller.sync_service(key("s1"))
    assert h.cloud.calls == ["ensure_load_balancer"]
    assert h.events.reasons() == ENSURED
    assert writes_since(h, before) == writes
    service = await h.service("s1")
    balancer = _balancer(h)
    assert [p.port for p in balancer.ports] == [p["port"] for p in service["spec"]["ports"]]
    assert balancer.hosts == tuple(sorted(controller.backends.snapshot().identities))
    assert balancer.ip_mode == h.cloud.load_balancer_ip_mode
    ingress = service["status"]["loadBalancer"]["ingress"]
    assert ingress[0]["ipMode"] == balancer.ip_mode.value, "the status follows the balancer"


async def _status_changes(h: Harness) -> None:
    h.cloud.remove_balancer(_balancer(h).name)  # re-created with a new address


async def _type_changes(h: Harness) -> None:
    await h.kube.patch(SERVICES, "s1", {"spec": {"type": "ClusterIP"}}, namespace=NS)


@pytest.mark.parametrize(
    ("change", "patches"),
    [
        pytest.param(_nothing, 0, id="no-write-due-the-leftover-stays"),
        pytest.param(_status_changes, 1, id="removed-with-the-status-patch"),
        pytest.param(_type_changes, 2, id="removed-with-the-finalizer-and-status-patches"),
    ],
)
async def test_a_leftover_spec_hash_goes_with_the_next_write_kccm_makes_anyway(
    harness: Harness, change: Callable[[Harness], Awaitable[None]], patches: int
) -> None:
    h = harness
    await first_run(h, ["s1"])
    leftover = {"metadata": {"annotations": {LEGACY_HASH: "v1-0123"}}}
    await h.kube.patch(SERVICES, "s1", leftover, namespace=NS)
    await change(h)
    controller = await restart(h)
    assert await controller.service_queue.get() == key("s1"), "the start-up add"
    controller.service_queue.done(key("s1"))
    await controller.sync_service(key("s1"))
    assert all(
        LEGACY_HASH in p.body["metadata"]["annotations"]
        for p in h.kube.patches
        if "metadata" in p.body
    )
    assert len(h.kube.patches) == patches, "never a write of its own"
    annotations = (await h.service("s1"))["metadata"].get("annotations") or {}
    assert (LEGACY_HASH not in annotations) is (patches > 0)
    await h.settle()
    assert len(controller.service_queue) == 0, "removing the leftover is no reason to sync"


async def test_a_leftover_spec_hash_rides_on_the_finalizer_patch(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    leftover = {"metadata": {"annotations": {LEGACY_HASH: "v1-0123", "keep": "me"}}}
    await h.kube.patch(SERVICES, "s1", leftover, namespace=NS)
    controller = await start(h)
    h.kube.patches.clear()
    await controller.sync_service(key("s1"))
    assert h.kube.patches[0].body == {
        "metadata": {"finalizers": [FINALIZER_LB_CLEANUP], "annotations": {LEGACY_HASH: None}}
    }
    annotations = (await h.service("s1"))["metadata"]["annotations"]
    assert annotations == {"keep": "me"}


async def test_node_sync_writes_nothing_to_the_service(harness: Harness) -> None:
    h = harness
    controller = await first_run(h, ["s1"])
    h.kube.patches.clear()
    await create_node(h, "c", provider_id="fake://c")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(key("s1"), ("a", "b", "c"))]
    assert h.kube.patches == []
    # A failed update leaves the balancer's state unknown: the service goes for a full ensure.
    h.cloud.fail("update_load_balancer", FakeCloudError("busy"))
    await create_node(h, "d", provider_id="fake://d")
    await h.settle()
    assert await controller.sync_nodes() == {key("s1")}
    assert h.kube.patches == []


async def test_a_node_change_during_the_start_up_ensure_still_reaches_the_balancer(
    harness: Harness,
) -> None:
    h = harness
    await first_run(h, ["s1"])
    controller = await restart(h)
    h.cloud.set_latency("ensure_load_balancer", 5.0)
    sync = asyncio.create_task(controller.sync_service(key("s1")))
    await h.clock.advance(0)
    await create_node(h, "c", provider_id="fake://c")  # arrives while the ensure is in flight
    await h.settle()
    await h.clock.advance(5.0)
    await sync
    assert h.cloud.calls == ["ensure_load_balancer"]
    assert len(controller.node_queue) == 1, "the balancer has {a, b}: a node sync follows"
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert update_calls(h) == [(key("s1"), ("a", "b", "c"))]


# -- a failed ensure: node syncs leave the service alone until a retry ensures ----------------

EXTRA_PORT = {"name": "q", "protocol": "TCP", "port": 81, "targetPort": 81}


async def _fail_ensure_of_a_new_port(h: Harness, controller: ServiceController) -> None:
    ports = [*lb_spec()["ports"], EXTRA_PORT]
    await h.kube.patch(SERVICES, "s1", {"spec": {"ports": ports}}, namespace=NS)
    await h.settle()
    h.cloud.fail("ensure_load_balancer", FakeCloudError("half-applied"), times=1)
    with pytest.raises(ServiceSyncError):
        await controller.sync_service(key("s1"))


async def _node_joins(h: Harness, controller: ServiceController) -> None:
    await create_node(h, "late", provider_id="fake://late")
    await h.settle()
    await controller.sync_nodes()


async def _spec_reverted(h: Harness, controller: ServiceController) -> None:
    patch = {"spec": {"ports": lb_spec()["ports"]}}
    await h.kube.patch(SERVICES, "s1", patch, namespace=NS, patch_type=PatchType.MERGE)
    await h.settle()


@pytest.mark.parametrize(
    "then",
    [
        pytest.param(_node_joins, id="a-node-sync-cannot-stand-for-the-failed-ensure"),
        pytest.param(_spec_reverted, id="reverting-the-spec-still-ensures"),
    ],
)
async def test_after_a_failed_ensure_the_retry_really_ensures(
    then: Callable[[Harness, ServiceController], Awaitable[None]], harness: Harness
) -> None:
    controller = await first_run(harness, ["s1"])
    await _fail_ensure_of_a_new_port(harness, controller)
    assert key("s1") not in controller.ensured, "node syncs leave it alone"
    await then(harness, controller)
    assert "update_load_balancer" not in harness.cloud.calls
    harness.cloud.clear_calls()
    await controller.sync_service(key("s1"))
    assert "ensure_load_balancer" in harness.cloud.calls
    assert key("s1") in controller.ensured


async def test_a_load_balancer_implemented_elsewhere_is_not_node_synced(
    harness: Harness,
) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    h.cloud.fail("ensure_load_balancer", ImplementedElsewhere())
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    assert key("s1") not in controller.ensured
    await _node_joins(h, controller)
    assert "update_load_balancer" not in h.cloud.calls
    assert kccm_marks(await h.service("s1")) == []
