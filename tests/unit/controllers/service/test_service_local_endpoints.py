"""The Warning a Service with a target-node selector and ``externalTrafficPolicy: Local``
gets when its endpoints (EndpointSlices) run on Nodes its balancer does not target: said
once per change, not for Services without a selector or with ``Cluster``, and a failed read
never fails the sync."""

from __future__ import annotations

from typing import Any

import pytest
from service_harness import NS, Harness, create_node, ensure_all, key, lb_spec, start

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR as SELECTOR
from kccm.controllers.service import ServiceController
from kccm.controllers.service_endpoints import REASON, endpoint_nodes
from kccm.kube.errors import Forbidden
from kccm.kube.resources import ENDPOINT_SLICES, NODES, SERVICES


async def setup(
    h: Harness, *, selector: str | None = "pool=web", policy: str = "Local"
) -> ServiceController:
    await create_node(h, "a", labels={"pool": "web"})
    await create_node(h, "b", labels={"pool": "web"})
    await create_node(h, "c", labels={"pool": "db"})
    meta: dict[str, Any] = {"name": "s1", "namespace": NS}
    if selector is not None:
        meta["annotations"] = {SELECTOR: selector}
    await h.kube.create(SERVICES, {"metadata": meta, "spec": lb_spec(externalTrafficPolicy=policy)})
    await h.kube.create(ENDPOINT_SLICES, endpoint_slice("s1-x", "s1", ["a", "c"]))
    await h.kube.create(ENDPOINT_SLICES, endpoint_slice("other-x", "other", ["b"]))
    return await start(h)


def endpoint_slice(name: str, service: str, nodes: list[str]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [f"10.0.0.{i}"], "nodeName": n, "conditions": {"ready": True}}
            for i, n in enumerate(nodes)
        ],
    }


def warnings(h: Harness) -> list[str]:
    return [message for _, reason, message, _, _ in h.events.recorded if reason == REASON]


async def test_endpoints_outside_the_selection_are_a_warning_said_once(harness: Harness) -> None:
    h = harness
    controller = await setup(h)
    await h.settle()
    await controller.sync_service(key("s1"))
    [message] = warnings(h)
    assert "(c; annotation service.kccm.io/target-node-selector=pool=web)" in message
    assert message.startswith("externalTrafficPolicy is Local and endpoints run on Nodes")
    await controller.sync_service(key("s1"))  # the same Nodes outside: not said again
    assert len(warnings(h)) == 1


async def test_a_relabel_that_brings_the_node_in_quiets_it(harness: Harness) -> None:
    h = harness
    controller = await setup(h)
    await ensure_all(h, controller, ["s1"])
    await h.kube.patch(NODES, "c", {"metadata": {"labels": {"pool": "web"}}})
    await h.settle()
    await controller.sync_nodes()
    assert warnings(h) == []
    await h.kube.patch(NODES, "a", {"metadata": {"labels": {"pool": "db"}}})
    await h.settle()
    await controller.sync_nodes()
    [message] = warnings(h)
    assert "(a; annotation" in message


@pytest.mark.parametrize(
    ("selector", "policy"),
    [
        pytest.param(None, "Local", id="no-selector"),
        pytest.param("pool=web", "Cluster", id="cluster-policy"),
    ],
)
async def test_no_warning_and_no_read_otherwise(
    harness: Harness, selector: str | None, policy: str
) -> None:
    h = harness
    controller = await setup(h, selector=selector, policy=policy)
    await h.settle()

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no EndpointSlice read for this Service")

    controller.targets.local_endpoints.kube.list = refuse  # type: ignore[method-assign]
    await controller.sync_service(key("s1"))
    assert warnings(h) == []
    assert "EnsuredLoadBalancer" in h.events.reasons()


async def test_a_failed_read_never_fails_the_sync(harness: Harness) -> None:
    h = harness
    controller = await setup(h)
    await h.settle()

    async def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise Forbidden("endpointslices is forbidden")

    controller.targets.local_endpoints.kube.list = forbidden  # type: ignore[method-assign]
    await controller.sync_service(key("s1"))
    assert warnings(h) == []
    assert "EnsuredLoadBalancer" in h.events.reasons()


def test_unready_endpoints_and_endpoints_without_a_node_do_not_count() -> None:
    slices = [
        {
            "endpoints": [
                {"nodeName": "a", "conditions": {"ready": True}},
                {"nodeName": "b", "conditions": {"ready": False}},
                {"nodeName": "c", "conditions": {}},
                {"conditions": {"ready": True}},
            ]
        },
        {"endpoints": None},
    ]
    assert endpoint_nodes(slices) == {"a", "c"}
