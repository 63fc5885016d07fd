"""service-lb-controller's node sync, mirroring upstream's controller_test.go:
TestUpdateNodesInExternalLoadBalancer, TestNodeChangesInExternalLoadBalancer."""

from __future__ import annotations

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
    start,
    update_calls,
)

from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloudError

# -- node sync: TestUpdateNodesInExternalLoadBalancer / TestNodeChangesInExternalLoadBalancer ----


async def test_update_nodes_no_services_no_calls(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    controller = await start(h)
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []


async def test_node_added_updates_every_lb_service_once(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for name in ("s1", "s2", "s3"):
        await create_service(h, name)
    await create_service(h, "plain", spec={"type": "ClusterIP", "ports": []})
    controller = await start(h, workers=2)
    await ensure_all(h, controller, ["s1", "s2", "s3", "plain"])
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert sorted(update_calls(h)) == [
        (f"{NS}/s1", ("a", "b")),
        (f"{NS}/s2", ("a", "b")),
        (f"{NS}/s3", ("a", "b")),
    ]
    assert h.events.reasons() == ["UpdatedLoadBalancer"] * 3
    assert h.metric("service_controller_loadbalancer_sync_total") == 3
    # Nothing changed since: a second sync costs nothing.
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []


async def test_excluded_node_updates_only_services_whose_set_changed(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_node(h, "b")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])  # s1 synced with {a, b}
    await h.kube.patch(NODES, "b", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await ensure_all(h, controller, ["s2"])  # s2 synced with {a} already
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(f"{NS}/s1", ("a",))]


@pytest.mark.parametrize(
    ("change", "hosts"),
    [
        pytest.param({"metadata": {"labels": {EXCLUDE: ""}}}, ("a",), id="exclude-label"),
        pytest.param(
            {
                "spec": {
                    "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
                }
            },
            ("a",),
            id="autoscaler-taint",
        ),
        pytest.param({"spec": {"providerID": "fake://b2"}}, ("a", "b"), id="provider-id-change"),
        pytest.param({"metadata": {"labels": {EXCLUDE: "false"}}}, None, id="exclude-false-no-op"),
        pytest.param({"metadata": {"labels": {"x": "y"}}}, None, id="other-label-no-op"),
    ],
)
async def test_node_changes_in_external_load_balancer(
    harness: Harness, change: dict[str, Any], hosts: tuple[str, ...] | None
) -> None:
    h = harness
    await create_node(h, "a")
    await create_node(h, "b", provider_id="fake://b")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.kube.patch(NODES, "b", change)
    await h.settle()
    await controller.sync_nodes()
    assert update_calls(h) == ([] if hosts is None else [(f"{NS}/s1", hosts)])


async def test_failed_host_update_escalates_to_a_full_ensure(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h)
    await ensure_all(h, controller, ["s1", "s2"])
    h.cloud.fail("update_load_balancer", FakeCloudError("backend pool busy"), times=1)
    await create_node(h, "b")
    await h.settle()
    controller.service_queue.add(key("placeholder"))  # make queue order observable
    await controller._process_node_key("b")
    failed = [e for e in h.events.recorded if e[1] == "UpdateLoadBalancerFailed"]
    assert len(failed) == 1
    assert failed[0][2] == (
        "Error updating load balancer with new hosts [a b] [node names limited, total number "
        "of nodes: 2], error: backend pool busy"
    )
    assert h.metric("service_controller_nodesync_error_total") == 1
    # A plain add (no rate limit): the failed service is ready at once, in the service queue.
    assert len(controller.service_queue) == 2
    assert controller.service_queue.num_requeues(f"{NS}/{failed[0][3].split('/')[1]}") == 0
    # The new node set was stored before the call: the next node sync does not retry it.
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == []


async def test_failed_update_of_a_vanished_lb_is_not_an_error(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    svc = await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.cloud.ensure_load_balancer_deleted("kubernetes", svc)  # the fake now fails updates
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls[-2:] == ["update_load_balancer", "get_load_balancer"]
    assert h.events.recorded == []


async def test_update_implemented_elsewhere_is_silent_success(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", ImplementedElsewhere())
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.events.recorded == []


async def test_update_to_zero_hosts_warns_unavailable(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.kube.patch(NODES, "a", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(f"{NS}/s1", ())]
    assert h.events.recorded == [
        (
            "Warning",
            "UnAvailableLoadBalancer",
            "There are no available nodes for LoadBalancer",
            "Service/s1",
            "service-controller",
        )
    ]


async def test_update_failed_message_lists_twenty_names(harness: Harness) -> None:
    h = harness
    for i in range(22):
        await create_node(h, f"n{i:02d}")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", FakeCloudError("boom"))
    await create_node(h, "n22")
    await h.settle()
    assert await controller.sync_nodes() == {key("s1")}
    names = " ".join(f"n{i:02d}" for i in range(20))
    assert h.events.recorded[-1][2] == (
        f"Error updating load balancer with new hosts [{names} <3 more>] [node names limited, "
        "total number of nodes: 23], error: boom"
    )


# -- informer handlers -------------------------------------------------------------------------
