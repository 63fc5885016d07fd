"""Upstream's finalizer and labels on the Services the alibabacloud provider balances
(kccm.providers.alibabacloud.loadbalancer.marks)."""

from __future__ import annotations

from typing import Any

import pytest
from test_clb_conformance_alibabacloud import ClbOnly

from kccm.cloudprovider import ServiceMarker, as_service_marker
from kccm.providers.alibabacloud.loadbalancer.marks import (
    CLB_FINALIZER,
    LABEL_LOADBALANCER_ID,
    LABEL_SERVICE_HASH,
    NLB_FINALIZER,
    AlibabaServiceMarks,
    needs_nlb,
)
from kccm.providers.alibabacloud.loadbalancer.servicehash import service_hash

TYPE = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-type"
GATE = {"LoadBalancerTypeAnnotation": True}


def service(uid: str = "u1", annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    meta = {"name": "web", "namespace": "default", "uid": uid, "annotations": annotations or {}}
    return {"metadata": meta, "spec": {"type": "LoadBalancer", **spec}}


@pytest.mark.parametrize(
    ("svc", "gates", "expected"),
    [
        pytest.param(service(), {}, CLB_FINALIZER, id="clb"),
        pytest.param(
            service(loadBalancerClass="alibabacloud.com/nlb"), {}, NLB_FINALIZER, id="nlb-class"
        ),
        pytest.param(service(annotations={TYPE: "nlb"}), GATE, NLB_FINALIZER, id="nlb-annotation"),
        pytest.param(
            service(annotations={TYPE: "nlb"}), {}, CLB_FINALIZER, id="annotation-no-gate"
        ),
        pytest.param(service(annotations={TYPE: "clb"}), GATE, CLB_FINALIZER, id="clb-annotation"),
    ],
)
def test_the_finalizer_is_upstream_s_for_the_balancer_kind(
    svc: Any, gates: dict[str, bool], expected: str
) -> None:
    marks = AlibabaServiceMarks(lambda s: needs_nlb(s, gates))
    assert marks.service_finalizer(svc) == expected


def _steps(marks: AlibabaServiceMarks, steps: str) -> None:
    for step in steps.split():
        if step == "ensure":
            marks.ensured(service(), "lb-1")
        elif step == "ensure-other":
            marks.ensured(service("u2"), "lb-2")
        elif step == "delete":
            marks.deleted(service())


@pytest.mark.parametrize(
    ("steps", "balancer_id"),
    [
        pytest.param("", None, id="not-ensured-hash-only"),
        pytest.param("ensure", "lb-1", id="ensured"),
        pytest.param("ensure ensure-other", "lb-1", id="per-service"),
        pytest.param("ensure delete", None, id="deleted"),
    ],
)
def test_the_labels_are_the_hash_and_the_ensured_balancer_id(
    steps: str, balancer_id: str | None
) -> None:
    marks = AlibabaServiceMarks(lambda s: False)
    _steps(marks, steps)
    wanted = {LABEL_SERVICE_HASH: service_hash(service())}
    if balancer_id:
        wanted[LABEL_LOADBALANCER_ID] = balancer_id
    assert marks.service_labels(service()) == wanted
    assert set(marks.service_label_keys()) == {LABEL_SERVICE_HASH, LABEL_LOADBALANCER_ID}


def test_the_clb_capability_is_a_service_marker() -> None:
    balancers = ClbOnly().load_balancer()
    marker: ServiceMarker | None = as_service_marker(balancers)
    assert marker is balancers
    assert marker.service_finalizer(service()) == CLB_FINALIZER
