"""What the service controller records of each sync (kccm explain service): success, the
classified failure, attempts in a row, the next retry the queue scheduled, the eligible Nodes
and each excluded Node with why; kccm_sync_failures_total by reason."""

from __future__ import annotations

from typing import Any

import pytest
from service_harness import (
    EXCLUDE,
    NS,
    Harness,
    create_node,
    create_service,
    key,
    lb_spec,
    start,
)

from kccm.cloudprovider import Node, NodeExclusion, Reason, Service
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.controllers.service import (
    CONTROLLER_NAME,
    ServiceController,
    ServiceControllerOptions,
    build,
)
from kccm.controllers.syncstate import SyncRecord
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FAULT_ANNOTATION, FakeCloud

UNINIT = {"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule"}
AUTOSCALER = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}


async def sync_once(h: Harness, controller: ServiceController, name: str = "svc") -> SyncRecord:
    """One pass of a service worker over ``name`` (the loop reports the outcome)."""
    await h.settle()
    controller.service_queue.add(key(name))
    await controller._service_loop.process_next()
    records = controller.sync_states.states.get("service", key(name))
    assert [r.controller for r in records] == [CONTROLLER_NAME]
    return records[0]


def failures(h: Harness, reason: str) -> float:
    value = h.registry.get_sample_value(
        "kccm_sync_failures_total", {"controller": CONTROLLER_NAME, "reason": reason}
    )
    return value or 0.0


async def ready_nodes(h: Harness, count: int) -> None:
    for i in range(count):
        await create_node(h, f"ok{i}", provider_id=f"fake://ok{i}")


async def annotate(h: Harness, value: str | None, name: str = "svc") -> None:
    await h.kube.patch(
        SERVICES, name, {"metadata": {"annotations": {FAULT_ANNOTATION: value}}}, namespace=NS
    )


async def test_a_success_records_the_node_set(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 2)
    await create_node(h, "excluded", labels={EXCLUDE: "true"}, provider_id="fake://x")
    await create_node(h, "autoscaled", taints=[AUTOSCALER], provider_id="fake://y")
    await create_node(h, "uninit", taints=[UNINIT], provider_id="fake://z")
    await create_node(h, "no-pid")
    await create_service(h)
    record = await sync_once(h, await start(h))
    assert (record.ok, record.reason, record.attempts, record.next_retry_at) == (
        True,
        None,
        0,
        None,
    )
    assert record.detail == {
        "eligible_nodes": 2,
        "excluded": {
            "autoscaled": "taint ToBeDeletedByClusterAutoscaler (the cluster autoscaler)",
            "excluded": f"label {EXCLUDE}=true",
            "no-pid": "not initialised: no spec.providerID",
            "uninit": "not initialised: taint node.cloudprovider.kubernetes.io/uninitialized",
        },
        "excluded_count": 4,
    }
    assert record.at == h.clock.now().timestamp()


@pytest.mark.parametrize(
    ("kind", "reason", "message_part", "first_retry"),
    [
        pytest.param("quota-exceeded", Reason.QUOTA, "quota", 5.0, id="quota"),
        pytest.param("throttled", Reason.THROTTLED, "rate limit", 5.0, id="throttled"),
        pytest.param("permission-denied", Reason.PERMISSION, "not authorized", 5.0, id="perm"),
        pytest.param("invalid-config", Reason.INVALID, FAULT_ANNOTATION, 5.0, id="invalid"),
        pytest.param("cloud-api-error", Reason.CLOUD_API, "internal error", 5.0, id="cloud-api"),
        pytest.param("error", Reason.OTHER, "fake: error", 5.0, id="other"),
        pytest.param("waiting-on-cloud", Reason.WAITING, "still provisioning", 5.0, id="waiting"),
    ],
)
async def test_a_failure_is_classified_with_its_retry(
    harness: Harness, kind: str, reason: Reason, message_part: str, first_retry: float
) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    controller = await start(h)
    h.cloud.fail_with("ensure_load_balancer", kind)
    record = await sync_once(h, controller)
    assert (record.ok, record.reason, record.attempts) == (False, reason, 1)
    assert message_part in record.message
    assert record.next_retry_at == record.at + first_retry
    assert record.detail["eligible_nodes"] == 1
    assert failures(h, str(reason)) == 1


async def test_attempts_grow_with_the_backoff_and_a_success_resets_them(
    harness: Harness,
) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    controller = await start(h)
    h.cloud.fail_with("ensure_load_balancer", "quota-exceeded", times=2)
    first = await sync_once(h, controller)
    await h.clock.advance(5)
    second = await sync_once(h, controller)
    assert [(r.attempts, r.next_retry_at - r.at) for r in (first, second)] == [  # type: ignore[operator]
        (1, 5.0),
        (2, 10.0),
    ]
    third = await sync_once(h, controller)
    assert (third.ok, third.attempts, third.reason, third.next_retry_at) == (True, 0, None, None)
    assert failures(h, "quota-exceeded") == 2


async def test_no_eligible_node_is_its_own_reason(harness: Harness) -> None:
    h = harness
    await create_node(h, "uninit", taints=[UNINIT])
    await create_service(h)
    record = await sync_once(h, await start(h))
    assert (record.ok, record.reason, record.next_retry_at) == (False, Reason.NO_NODES, None)
    assert record.message == "There are no available nodes for LoadBalancer"
    assert record.detail["eligible_nodes"] == 0
    assert failures(h, "no-eligible-nodes") == 1


async def test_a_cloud_error_with_no_eligible_node_says_no_nodes(harness: Harness) -> None:
    h = harness
    await create_service(h)
    controller = await start(h)
    h.cloud.fail_with("ensure_load_balancer", "cloud-api-error")
    record = await sync_once(h, controller)
    assert (record.reason, record.message) == (
        Reason.NO_NODES,
        "failed to ensure load balancer: fake: internal error of the cloud API",
    )


async def test_a_bad_fault_annotation_is_an_invalid_config_naming_it(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    await annotate(h, "no-such-fault")
    record = await sync_once(h, await start(h))
    assert record.reason is Reason.INVALID
    assert f"annotation {FAULT_ANNOTATION}: unknown fault 'no-such-fault'" in record.message


async def test_a_service_deleted_is_forgotten(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    controller = await start(h)
    await sync_once(h, controller)
    await h.kube.delete(SERVICES, "svc", namespace=NS)
    await h.settle()
    controller.service_queue.add(key())
    await controller._service_loop.process_next()
    assert controller.sync_states.states.get("service", key()) == []


async def test_a_service_that_stops_wanting_a_balancer_is_forgotten(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    controller = await start(h)
    await sync_once(h, controller)
    await h.kube.patch(SERVICES, "svc", {"spec": {"type": "ClusterIP"}}, namespace=NS)
    await h.settle()
    controller.service_queue.add(key())
    await controller._service_loop.process_next()
    assert controller.sync_states.states.get("service", key()) == []
    assert h.cloud.balancers == {}


class SelectingCloud(FakeCloud):
    """A provider that targets only Nodes labelled ``pool=web`` (as aws' target-node-labels)."""

    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        def why(node: Node) -> str | None:
            labels: dict[str, Any] = node["metadata"].get("labels") or {}
            return None if labels.get("pool") == "web" else "does not match pool=web"

        return why


async def test_the_providers_selector_names_what_it_leaves_out(harness: Harness) -> None:
    h = harness
    h.cloud = SelectingCloud(clock=h.clock)
    await create_node(h, "web", labels={"pool": "web"}, provider_id="fake://web")
    await create_node(h, "db", labels={"pool": "db"}, provider_id="fake://db")
    await create_node(h, "uninit", labels={"pool": "db"}, taints=[UNINIT])
    await create_service(h)
    record = await sync_once(h, await start(h))
    assert record.detail == {
        "eligible_nodes": 1,
        "excluded": {
            "db": "does not match pool=web",
            "uninit": "not initialised: taint node.cloudprovider.kubernetes.io/uninitialized",
        },
        "excluded_count": 2,
    }


async def test_the_node_view_follows_node_events(harness: Harness) -> None:
    h = harness
    await create_node(h, "late")
    await create_service(h)
    controller = await start(h)
    assert (await sync_once(h, controller)).reason is Reason.NO_NODES
    await h.kube.patch(
        NODES,
        "late",
        {"spec": {"providerID": "fake://late"}},
    )
    record = await sync_once(h, controller)
    assert (record.ok, record.detail["eligible_nodes"]) == (True, 1)


async def test_excluded_nodes_listed_are_capped(harness: Harness) -> None:
    h = harness
    for i in range(105):
        await create_node(h, f"n{i:03d}", labels={EXCLUDE: "true"})
    await create_service(h)
    record = await sync_once(h, await start(h))
    assert len(record.detail["excluded"]) == 100
    assert record.detail["excluded_count"] == 105
    assert "n000" in record.detail["excluded"]
    assert "n104" not in record.detail["excluded"]


async def test_a_status_update_keeps_the_computed_exclusions(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h)
    controller = await start(h)
    await sync_once(h, controller)
    recorder = controller.sync_states
    cached = recorder._framework
    assert cached is not None
    await h.kube.patch(
        NODES, "ok0", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    await h.settle()
    assert recorder._framework is cached
    await h.kube.patch(NODES, "ok0", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await h.settle()
    assert recorder._framework is None
    assert (await sync_once(h, controller)).reason is Reason.NO_NODES


B = "b.example.com/lb"


async def start_serving(h: Harness, *classes: str) -> ServiceController:
    """The controller of a kccm that serves only ``classes`` (--load-balancer-class-only)."""
    context = ControllerContext(
        kube=h.kube,
        informers=h.factory,
        cloud=GatedCloud(h.cloud, h.gate),
        events=h.events,
        registry=h.registry,
        clock=h.clock,
    )
    options = ServiceControllerOptions(
        load_balancer_classes=list(classes), load_balancer_class_only=True
    )
    controller = build(context, options)
    assert controller is not None
    h.factory.start()
    await h.factory.wait_for_sync()
    return controller


async def test_a_service_of_a_served_class_is_recorded(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h, spec=lb_spec(loadBalancerClass=B))
    record = await sync_once(h, await start_serving(h, B))
    assert (record.ok, record.detail["eligible_nodes"]) == (True, 1)


async def test_a_service_that_leaves_for_another_class_is_forgotten(harness: Harness) -> None:
    h = harness
    await ready_nodes(h, 1)
    await create_service(h, spec=lb_spec(loadBalancerClass=B))
    controller = await start_serving(h, B)
    await sync_once(h, controller)
    current = await h.service("svc")
    await h.kube.replace(SERVICES, {**current, "spec": {"type": "ClusterIP", "ports": []}})
    await h.settle()
    controller.service_queue.add(key())
    await controller._service_loop.process_next()
    assert controller.sync_states.states.get("service", key()) == []
    assert h.cloud.balancers == {}
