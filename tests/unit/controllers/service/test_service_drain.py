"""service-lb-controller's two-phase target removal (service_drain.py): a Node leaving the set
(label, autoscaler taint, deletion) drains for the Service's drain time, then goes; upstream's
removal at once without a drain time or without the provider's capability; a deadline queues
the node sync (no polling); a restart starts the window again; all on fake time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pytest
from service_harness import (
    EXCLUDE,
    NS,
    Harness,
    create_node,
    ensure_all,
    key,
    lb_spec,
    start,
)

from kccm.cloudprovider import LoadBalancerStatus, Node, Service
from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS, MAX_DRAIN_SECONDS
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.cloudprovider.nodes import node_name
from kccm.controllers.service import ServiceController, ServiceSyncError
from kccm.controllers.service_drain import DRAIN_RECORD, PRUNE_EVERY, NodeDrains
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FakeCloud

TAINT = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}
GAUGE = "kccm_service_draining_targets"


def _names(nodes: Sequence[Node]) -> tuple[str, ...]:
    return tuple(sorted(node_name(n) for n in nodes))


class DrainingFake(FakeCloud):
    """The fake cloud with a draining state: every balancer write is logged as
    (method, hosts, draining)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.writes: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        self.writes.append(("ensure", _names(nodes), ()))
        return await super().ensure_load_balancer(cluster_name, service, nodes)

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self.writes.append(("update", _names(nodes), ()))
        await super().update_load_balancer(cluster_name, service, nodes)

    async def ensure_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> LoadBalancerStatus:
        self.writes.append(("ensure", _names(nodes), _names(draining)))
        return await super().ensure_load_balancer(cluster_name, service, [*nodes, *draining])

    async def update_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> None:
        self.writes.append(("update", _names(nodes), _names(draining)))
        await super().update_load_balancer(cluster_name, service, [*nodes, *draining])


async def leave_by_label(h: Harness) -> None:
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {EXCLUDE: "true"}}})


async def leave_by_taint(h: Harness) -> None:
    await h.kube.patch(NODES, "c", {"spec": {"taints": [TAINT]}})


async def leave_by_deletion(h: Harness) -> None:
    await h.kube.delete(NODES, "c")


async def leave_by_pending_deletion(h: Harness) -> None:
    await h.kube.patch(NODES, "c", {"metadata": {"finalizers": ["example.com/hold"]}})
    await h.kube.delete(NODES, "c")


LEAVES = {
    "label": leave_by_label,
    "taint": leave_by_taint,
    "deletion": leave_by_deletion,
    "pending-deletion": leave_by_pending_deletion,
}


@dataclass(frozen=True)
class Case:
    annotation: str | None
    flag: int
    capable: bool
    drains: bool


CASES = {
    "annotation-drains": Case("30", 0, True, True),
    "flag-drains": Case(None, 30, True, True),
    "annotation-zero-beats-flag": Case("0", 30, True, False),
    "nothing-asked-is-upstream": Case(None, 0, True, False),
    "provider-without-draining-removes-at-once": Case("30", 0, False, False),
}


async def ensured(h: Harness, annotation: str | None, flag: int = 0) -> ServiceController:
    for name in ("a", "b", "c"):
        await create_node(h, name)
    meta: dict[str, Any] = {"name": "svc", "namespace": NS}
    if annotation is not None:
        meta["annotations"] = {ANNOTATION_DRAIN_SECONDS: annotation}
    await h.kube.create(SERVICES, {"metadata": meta, "spec": lb_spec()})
    controller = await start(h, drain_seconds=flag)
    await ensure_all(h, controller, ["svc"])
    while len(controller.node_queue):  # the Nodes' adds
        controller.node_queue.done(await controller.node_queue.get())
    return controller


def writes(h: Harness) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    found = getattr(h.cloud, "writes", None)
    if found is not None:
        return list(found[1:])  # after the first ensure
    return [("update", tuple(c.args[2]), ()) for c in h.cloud.call_log if "update" in c.method]


@pytest.mark.parametrize("leave", LEAVES.values(), ids=LEAVES.keys())
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_leaving_node_drains_for_the_drain_time_then_goes(
    harness: Harness, case: Case, leave: Any
) -> None:
    h = harness
    if case.capable:
        h.cloud = DrainingFake(clock=h.clock)
    controller = await ensured(h, case.annotation, case.flag)
    await leave(h)
    await h.settle()
    if case.drains:  # without a drain, upstream's triggers: a taint waits for the next sync
        assert len(controller.node_queue) == 1, "the departure queues a node sync"
    await controller.sync_nodes()
    if not case.drains:
        assert writes(h) == [("update", ("a", "b"), ())]
        assert controller.node_queue.waiting == 0
        return
    assert writes(h) == [("update", ("a", "b"), ("c",))]
    assert controller.node_queue.waiting == 1, "the deadline is queued, not polled"
    assert h.metric(GAUGE) == 1
    until = controller.sync_states.states.last("service", key(), DRAIN_RECORD)
    assert until is not None
    assert list(until.detail["draining_until"]) == ["c"]
    await h.clock.advance(29.5)
    await controller.sync_nodes()
    assert writes(h) == [("update", ("a", "b"), ("c",))], "nothing changes inside the window"
    while len(controller.node_queue):
        controller.node_queue.done(await controller.node_queue.get())
    await h.clock.advance(0.5)
    assert len(controller.node_queue) == 1, "the deadline queued the node sync"
    await controller.sync_nodes()
    assert writes(h) == [("update", ("a", "b"), ("c",)), ("update", ("a", "b"), ())]
    assert h.metric(GAUGE) == 0
    assert controller.sync_states.states.last("service", key(), DRAIN_RECORD) is None


async def test_a_taint_queues_no_node_sync_when_no_service_asks(harness: Harness) -> None:
    """Upstream's triggers are unchanged without a drain time: a taint waits for the next
    node sync (upstream shouldSyncUpdatedNode)."""
    h = harness
    h.cloud = DrainingFake(clock=h.clock)
    controller = await ensured(h, None)
    await leave_by_taint(h)
    await h.settle()
    assert len(controller.node_queue) == 0


async def test_a_node_coming_back_ends_its_drain(harness: Harness) -> None:
    h = harness
    h.cloud = DrainingFake(clock=h.clock)
    controller = await ensured(h, "30")
    await leave_by_label(h)
    await h.settle()
    await controller.sync_nodes()
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {EXCLUDE: None}}})
    await h.settle()
    await controller.sync_nodes()
    assert writes(h) == [("update", ("a", "b"), ("c",)), ("update", ("a", "b", "c"), ())]
    assert h.metric(GAUGE) == 0


async def test_a_restart_starts_the_window_again(harness: Harness) -> None:
    """A Node already outside the set when the controller starts is offered as draining for
    a whole window (the provider adds none it does not target), then left out."""
    h = harness
    h.cloud = DrainingFake(clock=h.clock)
    for name in ("a", "b", "c"):
        await create_node(h, name)
    await leave_by_label(h)
    meta = {"name": "svc", "namespace": NS, "annotations": {ANNOTATION_DRAIN_SECONDS: "30"}}
    await h.kube.create(SERVICES, {"metadata": meta, "spec": lb_spec()})
    controller = await start(h)
    await h.settle()
    await controller.sync_service(key())
    assert h.cloud.writes == [("ensure", ("a", "b"), ("c",))]
    await h.clock.advance(30)
    await controller.sync_nodes()
    assert h.cloud.writes[1:] == [("update", ("a", "b"), ())]


async def test_an_invalid_drain_time_fails_the_sync_naming_the_annotation(
    harness: Harness,
) -> None:
    h = harness
    h.cloud = DrainingFake(clock=h.clock)
    for name in ("a", "b"):
        await create_node(h, name)
    meta = {"name": "svc", "namespace": NS, "annotations": {ANNOTATION_DRAIN_SECONDS: "soon"}}
    await h.kube.create(SERVICES, {"metadata": meta, "spec": lb_spec()})
    controller = await start(h)
    await h.settle()
    with pytest.raises(ServiceSyncError, match=ANNOTATION_DRAIN_SECONDS):
        await controller.sync_service(key())
    assert h.cloud.writes == []


async def test_departures_older_than_any_drain_time_are_forgotten(harness: Harness) -> None:
    """Deleted Nodes' names do not pile up: a departure older than the longest drain time is
    dropped at the next pruning (every PRUNE_EVERY node events)."""
    h = harness
    drains = NodeDrains(cast(GatedLoadBalancer, None), h.clock, 0)
    gone = {"metadata": {"name": "gone"}}
    drains.observe(gone, None, True, False)
    assert set(drains.left) == {"gone"}
    await h.clock.advance(MAX_DRAIN_SECONDS)
    other = {"metadata": {"name": "other"}}
    for _ in range(PRUNE_EVERY):
        drains.observe(other, other, True, True)
    assert drains.left == {}
