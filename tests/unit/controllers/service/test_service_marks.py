"""The marks seam (kccm.cloudprovider.ServiceMarker): a provider naming its own finalizer and
labels gets them on its Services instead of the generic finalizer; the generic one is still
removed from a Service that carries it, and the labels are written only when they change."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pytest
from service_harness import NS, Harness, create_service, ensure_all, key, lb_spec, start

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider import Service, ServiceMarker
from kccm.controllers.service import ServiceController
from kccm.controllers.service_predicates import (
    UPSTREAM_CLASSES,
    LoadBalancerClasses,
    lost_finalizer,
    may_hold_released_balancer,
    needs_cleanup,
)
from kccm.kube.interface import PatchType
from kccm.kube.resources import SERVICES
from kccm.providers.fake import FakeCloud

MINE = "example.com/balancer"
OTHER_KIND = "example.com/other-balancer"
ID_LABEL, PORT_LABEL = "example.com/balancer-id", "example.com/port"
MERGE = PatchType.MERGE


class MarkingCloud(FakeCloud):
    """The fake provider with its own finalizer (another one for Services annotated
    ``kind: other``) and two labels: the balancer's name and the first port."""

    def service_finalizer(self, service: Service) -> str:
        kind = (service["metadata"].get("annotations") or {}).get("kind")
        return OTHER_KIND if kind == "other" else MINE

    def service_labels(self, service: Service) -> Mapping[str, str]:
        port = service["spec"]["ports"][0]["port"]
        return {ID_LABEL: f"lb-{service['metadata']['name']}", PORT_LABEL: str(port)}

    def service_label_keys(self) -> Collection[str]:
        return (ID_LABEL, PORT_LABEL)


def _binds(cloud: MarkingCloud) -> ServiceMarker:
    return cloud  # mypy: the fake is a ServiceMarker


async def marking(h: Harness, **service: Any) -> ServiceController:
    h.cloud = MarkingCloud(clock=h.clock)
    _binds(h.cloud)
    await create_service(h, **service)
    return await start(h)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj["metadata"]


async def test_an_ensured_service_carries_the_provider_s_finalizer_and_labels(
    harness: Harness,
) -> None:
    h = harness
    controller = await marking(h)
    await controller.sync_service(key())
    svc = await h.service("svc")
    assert _meta(svc)["finalizers"] == [MINE]
    assert _meta(svc)["labels"] == {ID_LABEL: "lb-svc", PORT_LABEL: "80"}
    assert [p.body for p in h.kube.patches][:2] == [
        {"metadata": {"finalizers": [MINE]}},
        {"metadata": {"labels": {ID_LABEL: "lb-svc", PORT_LABEL: "80"}}},
    ]
    assert all(p.subresource == "status" for p in h.kube.patches)


async def test_a_resync_of_an_unchanged_service_writes_nothing(harness: Harness) -> None:
    h = harness
    controller = await marking(h)
    await ensure_all(h, controller, ["svc"])
    h.kube.patches.clear()
    await ensure_all(h, controller, ["svc"])
    assert h.kube.patches == []


async def test_only_a_changed_label_is_written(harness: Harness) -> None:
    h = harness
    controller = await marking(h)
    await ensure_all(h, controller, ["svc"])
    h.kube.patches.clear()
    spec = lb_spec()
    spec["ports"][0]["port"] = 8080
    await h.kube.patch(
        SERVICES, "svc", {"spec": {"ports": spec["ports"]}}, namespace=NS, patch_type=MERGE
    )
    await ensure_all(h, controller, ["svc"])
    assert [p.body for p in h.kube.patches if "labels" in p.body.get("metadata", {})] == [
        {"metadata": {"labels": {PORT_LABEL: "8080"}}}
    ]


@pytest.mark.parametrize(
    ("finalizers", "annotations"),
    [
        pytest.param([MINE], {}, id="provider-finalizer"),
        pytest.param([FINALIZER_LB_CLEANUP], {}, id="generic-finalizer-balanced-before"),
        pytest.param([FINALIZER_LB_CLEANUP, MINE], {}, id="both"),
        pytest.param([OTHER_KIND], {"kind": "other"}, id="per-service-finalizer"),
    ],
)
async def test_a_deleted_service_loses_every_mark_and_goes(
    harness: Harness, finalizers: list[str], annotations: dict[str, str]
) -> None:
    h = harness
    controller = await marking(h)
    await ensure_all(h, controller, ["svc"])
    meta = {"annotations": annotations, "labels": {"app": "web"}, "finalizers": finalizers}
    await h.kube.patch(SERVICES, "svc", {"metadata": meta}, namespace=NS, patch_type=MERGE)
    await h.kube.delete(SERVICES, "svc", namespace=NS)
    await h.settle()
    h.kube.patches.clear()
    await controller.sync_service(key())
    assert h.cloud.balancers == {}
    assert not any(_meta(o)["name"] == "svc" for o in h.kube.objects(SERVICES))
    removal = h.kube.patches[0].body["metadata"]  # one patch: finalizers and labels
    assert removal["labels"] == {ID_LABEL: None, PORT_LABEL: None}
    assert removal["finalizers"] is None


async def test_a_service_no_longer_a_balancer_keeps_its_own_labels(harness: Harness) -> None:
    h = harness
    controller = await marking(h)
    await ensure_all(h, controller, ["svc"])
    await h.kube.patch(SERVICES, "svc", {"metadata": {"labels": {"app": "web"}}}, namespace=NS)
    await h.kube.patch(SERVICES, "svc", {"spec": {"type": "ClusterIP"}}, namespace=NS)
    await ensure_all(h, controller, ["svc"])
    svc = await h.service("svc")
    assert _meta(svc).get("finalizers") in (None, [])
    assert _meta(svc)["labels"] == {"app": "web"}


async def test_a_service_with_the_generic_finalizer_gets_the_provider_s_too(
    harness: Harness,
) -> None:
    h = harness
    controller = await marking(h, finalizers=[FINALIZER_LB_CLEANUP])
    await controller.sync_service(key())
    assert _meta(await h.service("svc"))["finalizers"] == [FINALIZER_LB_CLEANUP, MINE]


def _mine(service: Mapping[str, Any]) -> str:
    return MINE


@pytest.mark.parametrize(
    ("finalizers", "deleting", "expected"),
    [
        pytest.param([MINE], True, True, id="provider-finalizer-deleting"),
        pytest.param([FINALIZER_LB_CLEANUP], True, True, id="generic-finalizer-deleting"),
        pytest.param([MINE], False, False, id="provider-finalizer-live"),
        pytest.param(["example.com/someone-else"], True, False, id="foreign-finalizer"),
    ],
)
def test_needs_cleanup_knows_the_provider_s_finalizer(
    finalizers: list[str], deleting: bool, expected: bool
) -> None:
    meta: dict[str, Any] = {"name": "svc", "finalizers": finalizers}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    service = {"metadata": meta, "spec": lb_spec()}
    assert needs_cleanup(service, _mine) is expected
    assert needs_cleanup(service) is (expected and FINALIZER_LB_CLEANUP in finalizers)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param([MINE], [], True, id="provider-finalizer-lost"),
        pytest.param([FINALIZER_LB_CLEANUP], [], True, id="generic-finalizer-lost"),
        pytest.param([MINE], [MINE], False, id="provider-finalizer-kept"),
        pytest.param(["example.com/someone-else"], [], False, id="foreign-finalizer-lost"),
    ],
)
def test_a_lost_provider_finalizer_is_put_back_when_classes_are_served(
    old: list[str], new: list[str], expected: bool
) -> None:
    """With served classes, a Service of ours that lost the provider's finalizer is synced
    (the generic finalizer's rule, for the finalizer the provider names)."""
    classes = LoadBalancerClasses.of(["example.com/lb"])
    spec = {**lb_spec(), "loadBalancerClass": "example.com/lb"}
    before = {"metadata": {"name": "svc", "finalizers": old}, "spec": spec}
    after = {"metadata": {"name": "svc", "finalizers": new}, "spec": spec}
    assert lost_finalizer(before, after, classes, _mine) is expected


@pytest.mark.parametrize(
    ("finalizers", "expected"),
    [
        pytest.param([MINE], True, id="provider-finalizer"),
        pytest.param([FINALIZER_LB_CLEANUP], True, id="generic-finalizer"),
        pytest.param(["example.com/someone-else"], False, id="foreign-finalizer"),
    ],
)
def test_a_service_of_another_class_holding_the_provider_s_finalizer_is_looked_at(
    finalizers: list[str], expected: bool
) -> None:
    """A Service switched to a class kccm does not serve may still hold our balancer when it
    carries the provider's finalizer (the class-switch rule, for that finalizer)."""
    spec = {**lb_spec(), "loadBalancerClass": "example.com/not-ours"}
    service = {"metadata": {"name": "svc", "finalizers": finalizers}, "spec": spec}
    assert may_hold_released_balancer(service, UPSTREAM_CLASSES, _mine) is expected


async def test_a_deleted_service_holding_only_the_provider_s_finalizer_is_forgotten(
    harness: Harness,
) -> None:
    """Its clean-up sync ends with the Service still cached (deletionTimestamp, finalizer):
    it no longer counts as served, so ``kccm explain`` drops it."""
    h = harness
    controller = await marking(h)
    await ensure_all(h, controller, ["svc"])
    controller.sync_states.outcome(key(), None, None)  # what the queue records after a sync
    assert controller.sync_states.states.get("service", key()) != []
    await h.kube.patch(
        SERVICES,
        "svc",
        {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}},
        namespace=NS,
        patch_type=MERGE,
    )
    await h.settle()
    controller.sync_states.outcome(key(), None, None)
    assert controller.sync_states.states.get("service", key()) == []
