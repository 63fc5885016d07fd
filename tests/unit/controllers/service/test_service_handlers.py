"""service-lb-controller: the informer handlers, TestServiceQueueDelay, run, build(), concurrency
and metrics."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from service_harness import (
    EXCLUDE,
    NS,
    Harness,
    create_node,
    create_service,
    ensure_all,
    key,
    lb_spec,
    start,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.errors import RetryError
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.controllers.service import (
    ServiceControllerOptions,
    build,
)
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FakeCloud, FakeCloudError


async def test_service_add_handler_enqueues_only_managed_or_cleanup(harness: Harness) -> None:
    h = harness
    await create_service(h, "lb")
    await create_service(h, "classed", spec=lb_spec(loadBalancerClass="x.io/lb"))
    await create_service(h, "plain", spec={"type": "ClusterIP", "ports": []})
    await create_service(
        h,
        "leftover",
        spec={"type": "ClusterIP", "ports": []},
        finalizers=[FINALIZER_LB_CLEANUP],
    )
    controller = await start(h)
    queued = {await controller.service_queue.get() for _ in range(len(controller.service_queue))}
    assert queued == {key("lb"), key("leftover")}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"externalTrafficPolicy": "Local"}, id="traffic-policy"),
        pytest.param({"loadBalancerSourceRanges": ["10.0.0.0/8"]}, id="source-ranges"),
        pytest.param({"type": "ClusterIP"}, id="type-no-longer-loadbalancer"),
        pytest.param({"loadBalancerIP": "192.0.2.9"}, id="load-balancer-ip"),
        pytest.param({"externalIPs": ["192.0.2.10"]}, id="external-ips"),
    ],
)
async def test_service_update_handler_enqueues_on_needs_update_without_an_event(
    harness: Harness, change: dict[str, Any]
) -> None:
    """v0.36.3's needsUpdate only logs its reasons (V(2)); it records no Event."""
    h = harness
    await create_service(h, "lb")
    controller = await start(h)
    await controller.service_queue.get()
    controller.service_queue.done(key("lb"))
    await h.kube.patch(SERVICES, "lb", {"metadata": {"labels": {"a": "b"}}}, namespace=NS)
    await h.settle()
    assert len(controller.service_queue) == 0, "a label change is not worth a sync"
    await h.kube.patch(SERVICES, "lb", {"spec": change}, namespace=NS)
    await h.settle()
    assert len(controller.service_queue) == 1
    assert h.events.recorded == []


@pytest.mark.parametrize(
    ("classes", "synced"),
    [
        pytest.param((), 0, id="default-is-upstream-no-sync"),
        pytest.param(("a.example.com/lb",), 1, id="serving-a-class-puts-it-back"),
    ],
)
async def test_a_stripped_finalizer_is_put_back_only_when_serving_classes(
    harness: Harness, classes: tuple[str, ...], synced: int
) -> None:
    """A user removes the cleanup finalizer of an ensured Service: upstream's needsUpdate
    ignores finalizers, so without --load-balancer-class nothing syncs (docs/behaviour.md,
    "Quirks: decisions"); a kccm serving classes syncs to put it back (a class switch)."""
    h = harness
    controller = await start(h, classes=classes)
    await create_service(h, "lb")
    await h.settle()
    await ensure_all(h, controller, ["lb"])
    assert (await h.service("lb"))["metadata"]["finalizers"] == [FINALIZER_LB_CLEANUP]
    await h.kube.patch(SERVICES, "lb", {"metadata": {"finalizers": None}}, namespace=NS)
    await h.settle()
    assert len(controller.service_queue) == synced


async def test_node_handlers_enqueue_add_delete_and_relevant_updates(harness: Harness) -> None:
    h = harness
    controller = await start(h)
    await create_node(h, "a")
    await h.settle()
    assert len(controller.node_queue) == 1
    assert await controller.node_queue.get() == "nodes"
    controller.node_queue.done("nodes")
    await h.kube.patch(NODES, "a", {"status": {"conditions": [{"type": "Ready"}]}})
    await h.settle()
    assert len(controller.node_queue) == 0, "readiness does not trigger a node sync"
    await h.kube.patch(NODES, "a", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await h.settle()
    assert len(controller.node_queue) == 1
    await controller.node_queue.get()
    controller.node_queue.done("nodes")
    await h.kube.patch(
        NODES,
        "a",
        {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
        subresource="status",
    )
    await h.settle()
    assert len(controller.node_queue) == 1, "new addresses trigger a node sync (kccm)"
    await controller.node_queue.get()
    controller.node_queue.done("nodes")
    await h.kube.delete(NODES, "a")
    await h.settle()
    assert len(controller.node_queue) == 1


async def test_resync_reenqueues_only_services_needing_cleanup(harness: Harness) -> None:
    h = harness
    await create_service(h, "lb")
    await create_service(
        h, "leftover", spec={"type": "ClusterIP", "ports": []}, finalizers=[FINALIZER_LB_CLEANUP]
    )
    controller = await start(h)
    while len(controller.service_queue):
        done = await controller.service_queue.get()
        controller.service_queue.done(done)
    await controller._resync_services()
    assert len(controller.service_queue) == 1
    assert await controller.service_queue.get() == key("leftover")


# -- TestServiceQueueDelay and the full loop ----------------------------------------------------


@pytest.mark.parametrize(
    ("error", "delays"),
    [
        pytest.param(RetryError("retry me", 42), [42.0, 42.0], id="retry-error-42s-exactly"),
        pytest.param(FakeCloudError("plain"), [5.0, 10.0], id="plain-error-backs-off-5s-10s"),
    ],
)
async def test_service_queue_delay(
    harness: Harness, error: BaseException, delays: list[float]
) -> None:
    h = harness
    await create_service(h)
    h.cloud.fail("ensure_load_balancer", error)
    controller = await start(h)
    loop = controller._service_loop
    for expected in delays:
        before = h.clock.monotonic()
        assert await loop.process_next()
        assert len(controller.service_queue) == 0
        assert controller.service_queue.waiting == 1
        await h.clock.advance(0)
        deadline = h.clock.next_deadline()
        assert deadline is not None
        assert deadline - before == pytest.approx(expected)
        await h.clock.advance(expected)
        assert len(controller.service_queue) == 1
    expected_requeues = 0 if isinstance(error, RetryError) else 2
    assert controller.service_queue.num_requeues(key()) == expected_requeues


async def test_node_queue_never_retries(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", FakeCloudError("nope"))
    await create_node(h, "b")
    await h.settle()
    loop = controller._node_loop
    while len(controller.node_queue):
        await loop.process_next()
    assert controller.node_queue.waiting == 0
    assert controller.node_queue.num_requeues("b") == 0
    assert h.metric("service_controller_nodesync_latency_seconds_count") >= 1
    assert h.metric("service_controller_update_loadbalancer_host_latency_seconds_count") >= 1


async def test_run_ensures_services_and_reports_running(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h, workers=2)
    gauge = 'running_managed_controllers{manager="cloud-controller-manager",name="service"}'
    task = asyncio.create_task(controller.run())
    for _ in range(100):
        await h.clock.advance(0)
        stored = [await h.service(n) for n in ("s1", "s2")]
        if all(s["status"].get("loadBalancer") for s in stored):
            break
    assert [s["status"]["loadBalancer"]["ingress"][0]["ip"] for s in stored] == sorted(
        s["status"]["loadBalancer"]["ingress"][0]["ip"] for s in stored
    )
    assert (
        h.registry.get_sample_value(
            "running_managed_controllers",
            {"manager": "cloud-controller-manager", "name": "service"},
        )
        == 1
    ), gauge
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)
    assert (
        h.registry.get_sample_value(
            "running_managed_controllers",
            {"manager": "cloud-controller-manager", "name": "service"},
        )
        == 0
    )
    assert h.registry.get_sample_value("workqueue_adds_total", {"name": "service"}) is not None
    assert h.registry.get_sample_value("workqueue_adds_total", {"name": "node"}) is not None


async def test_build_skips_when_provider_has_no_load_balancers(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    context = ControllerContext(
        kube=h.kube,
        informers=h.factory,
        cloud=GatedCloud(FakeCloud(enable_load_balancers=False), h.gate),
        events=h.events,
        registry=h.registry,
        clock=h.clock,
    )
    with caplog.at_level(logging.WARNING):
        assert build(context) is None
    assert "does not support external load balancers" in caplog.text


def test_default_concurrency_does_not_serialise() -> None:
    assert ServiceControllerOptions().concurrent_service_syncs == 10


# -- concurrency (checklist 40, issue item 7) -----------------------------------------------------


async def test_service_workers_ensure_in_parallel(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for i in range(5):
        await create_service(h, f"s{i}")
    h.cloud.set_latency("ensure_load_balancer", 10.0)
    controller = await start(h, workers=3)
    task = asyncio.create_task(controller.run())
    await h.clock.advance(0)
    assert h.cloud.calls.count("ensure_load_balancer") == 3, "three workers, three in flight"
    await h.clock.advance(10)
    assert h.cloud.calls.count("ensure_load_balancer") == 5
    await h.clock.advance(10)
    stopping = asyncio.create_task(controller.stop(grace=30))
    await h.clock.advance(0)
    assert await asyncio.wait_for(stopping, 5)
    await asyncio.wait_for(task, 5)


async def test_node_sync_fans_out_with_the_same_parallelism(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for i in range(4):
        await create_service(h, f"s{i}")
    controller = await start(h, workers=2)
    await ensure_all(h, controller, [f"s{i}" for i in range(4)])
    h.cloud.set_latency("update_load_balancer", 10.0)
    await create_node(h, "b")
    await h.settle()
    sync = asyncio.create_task(controller.sync_nodes())
    await h.clock.advance(0)
    assert h.cloud.calls.count("update_load_balancer") == 2
    await h.clock.advance(10)
    assert h.cloud.calls.count("update_load_balancer") == 4
    await h.clock.advance(10)
    assert await sync == set()
    assert h.metric("service_controller_nodesync_latency_seconds_sum") == 20.0
    assert (
        h.registry.get_sample_value(
            "service_controller_update_loadbalancer_host_latency_seconds_bucket", {"le": "16384.0"}
        )
        == 4
    )


async def test_latency_histograms_use_exponential_buckets_1_2_15(harness: Harness) -> None:
    await start(harness)
    bounds = [
        sample.labels["le"]
        for metric in harness.registry.collect()
        if metric.name == "service_controller_nodesync_latency_seconds"
        for sample in metric.samples
        if sample.name.endswith("_bucket")
    ]
    assert bounds == [str(float(2**i)) for i in range(15)] + ["+Inf"]
