"""service-lb-controller's per-Service target Nodes (``service.kccm.io/target-node-selector``):
the selection AND upstream's exclusions, a relabel converging through the node sync, a bad
selector failing the sync with a Warning while the balancer keeps its Nodes, and no change at
all for Services without the annotation."""

from __future__ import annotations

from typing import Any

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
    update_calls,
)

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR as SELECTOR
from kccm.cloudprovider import Node, NodeExclusion, Reason, Service
from kccm.controllers.service import ServiceController
from kccm.kube.interface import Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FakeCloud


async def create_selecting(h: Harness, name: str, selector: str | None) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if selector is not None:
        meta["annotations"] = {SELECTOR: selector}
    return await h.kube.create(SERVICES, {"metadata": meta, "spec": lb_spec()})


def ensure_calls(h: Harness) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (str(call.args[1]), tuple(call.args[2]))
        for call in h.cloud.call_log
        if call.method == "ensure_load_balancer"
    ]


async def drain_node_queue(controller: ServiceController) -> None:
    while len(controller.node_queue):
        controller.node_queue.done(await controller.node_queue.get())


async def three_nodes(h: Harness) -> None:
    await create_node(h, "a", labels={"pool": "web", "zone": "1"})
    await create_node(h, "b", labels={"pool": "web", "zone": "2"})
    await create_node(h, "c", labels={"pool": "db", "zone": "1"})


async def ensured(h: Harness, name: str, selector: str | None) -> ServiceController:
    await three_nodes(h)
    await create_selecting(h, name, selector)
    controller = await start(h)
    await h.settle()
    await controller.sync_service(key(name))
    return controller


@pytest.mark.parametrize(
    ("selector", "hosts"),
    [
        pytest.param(None, ("a", "b", "c"), id="no-annotation-every-node"),
        pytest.param("", ("a", "b", "c"), id="empty-selects-every-node"),
        pytest.param("pool=web", ("a", "b"), id="equals-picks-two"),
        pytest.param("pool!=web", ("c",), id="not-equals"),
        pytest.param("zone in (1),pool", ("a", "c"), id="in-and-exists"),
        pytest.param("!pool", (), id="none-selected"),
        pytest.param("pool=web,zone notin (2)", ("a",), id="and-of-requirements"),
    ],
)
async def test_the_ensure_gets_the_selected_nodes(
    harness: Harness, selector: str | None, hosts: tuple[str, ...]
) -> None:
    await ensured(harness, "s1", selector)
    assert ensure_calls(harness) == [(key("s1"), hosts)]


async def test_no_selected_node_warns_unavailable(harness: Harness) -> None:
    await ensured(harness, "s1", "pool=none")
    assert "UnAvailableLoadBalancer" in harness.events.reasons()


async def test_selection_and_upstream_exclusion_both_apply(harness: Harness) -> None:
    h = harness
    await create_node(h, "x", labels={"pool": "web", EXCLUDE: "true"})
    await create_node(h, "y", labels={"pool": "web"})
    await create_node(
        h, "z", labels={"pool": "web"}, taints=[{"key": "ToBeDeletedByClusterAutoscaler"}]
    )
    await create_selecting(h, "s1", "pool=web")
    controller = await start(h)
    await h.settle()
    await controller.sync_service(key("s1"))
    assert ensure_calls(h) == [(key("s1"), ("y",))]


@pytest.mark.parametrize(
    ("node", "labels", "hosts"),
    [
        pytest.param("c", {"pool": "web"}, ("a", "b", "c"), id="relabel-joins"),
        pytest.param("a", {"pool": "db"}, ("b",), id="relabel-leaves"),
        pytest.param("c", {"team": "x"}, None, id="relabel-outside-the-selection-no-call"),
        pytest.param("a", {EXCLUDE: "true"}, ("b",), id="excluded-selected-node-leaves"),
    ],
)
async def test_a_relabel_converges_through_the_node_sync(
    harness: Harness, node: str, labels: dict[str, str], hosts: tuple[str, ...] | None
) -> None:
    h = harness
    controller = await ensured(h, "s1", "pool=web")
    await ensure_all(h, controller, [])
    await drain_node_queue(controller)
    await h.kube.patch(NODES, node, {"metadata": {"labels": labels}})
    await h.settle()
    assert len(controller.node_queue) == 1  # the relabel asked for a node sync
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == ([] if hosts is None else [(key("s1"), hosts)])
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()  # converged: nothing more to do
    assert update_calls(h) == []


async def test_a_relabel_is_no_node_sync_without_selecting_services(harness: Harness) -> None:
    h = harness
    controller = await ensured(h, "s1", None)
    await ensure_all(h, controller, [])
    await drain_node_queue(controller)
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {"pool": "web"}}})
    await h.settle()
    assert len(controller.node_queue) == 0  # upstream: other labels trigger nothing


async def test_only_the_selecting_service_is_updated(harness: Harness) -> None:
    h = harness
    await three_nodes(h)
    await create_selecting(h, "picky", "pool=web")
    await create_selecting(h, "plain", None)
    controller = await start(h)
    await ensure_all(h, controller, ["picky", "plain"])
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {"pool": "web"}}})
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(key("picky"), ("a", "b", "c"))]


async def test_services_with_one_selector_share_one_view(harness: Harness) -> None:
    h = harness
    await three_nodes(h)
    await create_selecting(h, "s1", "pool=web")
    await create_selecting(h, "s2", "pool=web")
    controller = await start(h)
    await ensure_all(h, controller, ["s1", "s2"])
    first, second = controller.last_synced[key("s1")], controller.last_synced[key("s2")]
    assert first is second
    assert first.version < -1  # never one of the whole set's versions


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("pool in web", id="in-without-parenthesis"),
        pytest.param("pool==web==x", id="two-operators"),
        pytest.param("Bad Key", id="no-operator"),
    ],
)
async def test_a_bad_selector_fails_the_sync_and_keeps_the_nodes(
    harness: Harness, bad: str
) -> None:
    h = harness
    controller = await ensured(h, "s1", "pool=web")
    await ensure_all(h, controller, [])
    await h.kube.patch(SERVICES, "s1", {"metadata": {"annotations": {SELECTOR: bad}}}, namespace=NS)
    await h.settle()
    with pytest.raises(Exception, match=SELECTOR):
        await controller.sync_service(key("s1"))
    assert h.cloud.calls == []  # no ensure: the balancer keeps {a, b}
    [(kind, reason, message, _, _)] = h.events.recorded
    assert (kind, reason) == ("Warning", "SyncLoadBalancerFailed")
    assert f"annotation {SELECTOR}={bad!r} is not a label selector: " in message
    # a node sync leaves it alone too: never "every node" in its place
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {"pool": "web"}}})
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []
    # fixed: the next sync ensures with the selection
    await h.kube.patch(
        SERVICES, "s1", {"metadata": {"annotations": {SELECTOR: "zone=1"}}}, namespace=NS
    )
    await h.settle()
    await controller.sync_service(key("s1"))
    assert ensure_calls(h) == [(key("s1"), ("a", "c"))]


async def test_a_relabel_during_the_ensure_is_caught_up_after_it(harness: Harness) -> None:
    """The node sync the relabel asks for skips the Service while it syncs; the sync's end
    sees its selection is behind the Nodes' labels and asks for another."""
    h = harness
    await three_nodes(h)
    await create_selecting(h, "s1", "pool=web")
    controller = await start(h)
    await h.settle()
    ensure = controller.balancer.ensure_load_balancer

    async def relabelling(*args: Any, **kwargs: Any) -> Any:
        await h.kube.patch(NODES, "c", {"metadata": {"labels": {"pool": "web"}}})
        await h.settle()
        await drain_node_queue(controller)  # the node sync it asked for ran, skipping s1
        return await ensure(*args, **kwargs)

    controller.balancer.ensure_load_balancer = relabelling  # type: ignore[method-assign]
    await controller.sync_service(key("s1"))
    assert ensure_calls(h) == [(key("s1"), ("a", "b"))]
    assert len(controller.node_queue) == 1
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(key("s1"), ("a", "b", "c"))]


class PoolWebCloud(FakeCloud):
    """A provider with its own selector (as aws' target-node-labels): only ``pool=web``."""

    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        def why(node: Node) -> str | None:
            labels: dict[str, Any] = node["metadata"].get("labels") or {}
            return None if labels.get("pool") == "web" else "does not match pool=web"

        return why


async def test_the_sync_record_names_what_each_selector_leaves_out(harness: Harness) -> None:
    """Both selectors apply (the intersection): the framework's first, then the provider's."""
    h = harness
    h.cloud = PoolWebCloud(clock=h.clock)
    for name, labels in (("a", {"pool": "web", "zone": "1"}), ("b", {"pool": "web"})):
        await create_node(h, name, labels=labels, provider_id=f"fake://{name}")
    await create_node(h, "c", labels={"pool": "db", "zone": "1"}, provider_id="fake://c")
    await create_selecting(h, "s1", "zone")
    controller = await start(h)
    await h.settle()
    controller.service_queue.add(key("s1"))
    await controller._service_loop.process_next()
    [record] = controller.sync_states.states.get("service", key("s1"))
    assert record.detail == {
        "eligible_nodes": 1,
        "excluded": {
            "b": f"not selected by annotation {SELECTOR}=zone",
            "c": "does not match pool=web",
        },
        "excluded_count": 2,
    }


async def test_a_bad_selector_is_recorded_as_invalid_config(harness: Harness) -> None:
    h = harness
    await three_nodes(h)
    await create_selecting(h, "s1", "zone in 1")
    controller = await start(h)
    await h.settle()
    controller.service_queue.add(key("s1"))
    await controller._service_loop.process_next()
    [record] = controller.sync_states.states.get("service", key("s1"))
    assert record.reason is Reason.INVALID
    assert SELECTOR in (record.message or "")
