"""Pure helpers of the service controller: the finalizer / status patch shapes of PatchService and
LoadBalancerStatusEqual, the backend node set and the leftover spec hash."""

from __future__ import annotations

from typing import Any

import pytest
from service_objects import (
    BASE,
    CA_TAINT,
    node,
    with_meta,
)

from kccm.api.wellknown import ANNOTATION_LB_SPEC_HASH, FINALIZER_LB_CLEANUP
from kccm.cloudprovider.types import LoadBalancerIngress, LoadBalancerStatus, PortStatus
from kccm.controllers.service_nodes import EMPTY_NODE_SET, BackendNodeSet
from kccm.controllers.service_patches import (
    LEGACY_ANNOTATIONS,
    finalizer_patch,
    legacy_annotations_patch,
    load_balancer_status_equal,
    status_patch,
)
from kccm.controllers.service_predicates import needs_update

# -- PatchService shapes, LoadBalancerStatusEqual -----------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param(
            [],
            [FINALIZER_LB_CLEANUP],
            {"metadata": {"finalizers": [FINALIZER_LB_CLEANUP]}},
            id="add-to-none",
        ),
        pytest.param(
            ["a"],
            ["a", FINALIZER_LB_CLEANUP],
            {
                "metadata": {
                    "$setElementOrder/finalizers": ["a", FINALIZER_LB_CLEANUP],
                    "finalizers": [FINALIZER_LB_CLEANUP],
                }
            },
            id="add-to-others",
        ),
        pytest.param(
            [FINALIZER_LB_CLEANUP], [], {"metadata": {"finalizers": None}}, id="remove-the-only"
        ),
        pytest.param(
            ["a", FINALIZER_LB_CLEANUP, "b"],
            ["a", "b"],
            {
                "metadata": {
                    "$setElementOrder/finalizers": ["a", "b"],
                    "$deleteFromPrimitiveList/finalizers": [FINALIZER_LB_CLEANUP],
                }
            },
            id="remove-among-others",
        ),
    ],
)
def test_finalizer_patch(old: list[str], new: list[str], patch: dict[str, Any]) -> None:
    assert finalizer_patch(old, new) == patch


INGRESS = LoadBalancerIngress(ip="192.0.2.1", ip_mode="VIP", ports=(PortStatus(80, "TCP"),))


def test_status_patch_writes_the_whole_provider_status_or_clears_it() -> None:
    assert status_patch(LoadBalancerStatus((INGRESS,))) == {
        "status": {
            "loadBalancer": {
                "ingress": [
                    {"ip": "192.0.2.1", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]}
                ]
            }
        }
    }
    assert status_patch(LoadBalancerStatus()) == {"status": {"loadBalancer": {"ingress": None}}}


@pytest.mark.parametrize(
    ("previous", "new", "equal"),
    [
        pytest.param({}, LoadBalancerStatus(), True, id="both-empty"),
        pytest.param({"ingress": []}, LoadBalancerStatus(), True, id="empty-list-equals-absent"),
        pytest.param({}, LoadBalancerStatus((INGRESS,)), False, id="new-ingress"),
        pytest.param(
            {
                "ingress": [
                    {"ip": "192.0.2.1", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]}
                ]
            },
            LoadBalancerStatus((INGRESS,)),
            True,
            id="same-ingress",
        ),
        pytest.param(
            {"ingress": [{"ip": "192.0.2.1", "ports": [{"port": 80, "protocol": "TCP"}]}]},
            LoadBalancerStatus((INGRESS,)),
            False,
            id="ip-mode-differs",
        ),
        pytest.param(
            {"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP"}]},
            LoadBalancerStatus((INGRESS,)),
            False,
            id="ports-differ",
        ),
        pytest.param(
            {"ingress": [{"hostname": "lb.example"}]},
            LoadBalancerStatus((LoadBalancerIngress(hostname="lb.example"),)),
            True,
            id="same-hostname",
        ),
    ],
)
def test_load_balancer_status_equal(
    previous: dict[str, Any], new: LoadBalancerStatus, equal: bool
) -> None:
    assert load_balancer_status_equal(previous, new) is equal


# -- kccm: the backend node set maintained from events; the leftover of the spec hash ----------


def test_backend_node_set_versions_only_on_backend_changes() -> None:
    backends = BackendNodeSet()
    backends.apply(None, node("a", provider_id="p-a"))
    backends.apply(None, node("b"))
    first = backends.snapshot()
    assert [n["metadata"]["name"] for n in first.nodes] == ["a", "b"]
    assert backends.recomputations == 1
    assert backends.snapshot() is first, "no change, no rebuild"
    # A label or readiness change keeps the version but refreshes the objects.
    backends.apply(node("a", provider_id="p-a"), node("a", provider_id="p-a", ready="False"))
    refreshed = backends.snapshot()
    assert refreshed.version == first.version
    assert backends.recomputations == 1
    assert refreshed.nodes[0]["status"]["conditions"][0]["status"] == "False"
    assert refreshed.same_backends(first)
    # Identity changes and eligibility changes bump the version.
    backends.apply(node("b"), node("b", addresses=("10.0.0.2",)))
    assert not backends.snapshot().same_backends(first)
    backends.apply(node("b"), node("b", taints=[CA_TAINT]))
    assert [n["metadata"]["name"] for n in backends.snapshot().nodes] == ["a"]
    backends.apply(node("a"), None)
    assert backends.snapshot().nodes == ()
    assert backends.recomputations == 4


def test_same_backends_compares_content_across_versions() -> None:
    backends = BackendNodeSet()
    backends.apply(None, node("a"))
    first = backends.snapshot()
    backends.apply(None, node("b"))
    backends.apply(node("b"), None)
    again = backends.snapshot()
    assert again.version != first.version
    assert again.same_backends(first)
    assert not again.same_backends(None)
    assert not again.same_backends(EMPTY_NODE_SET)


@pytest.mark.parametrize(
    ("annotations", "patch"),
    [
        pytest.param(None, {}, id="no-annotations"),
        pytest.param({"a": "1"}, {}, id="only-users-annotations"),
        pytest.param(
            {"a": "1", ANNOTATION_LB_SPEC_HASH: "v1-0"},
            {"annotations": {ANNOTATION_LB_SPEC_HASH: None}},
            id="leftover-spec-hash-removed-users-kept",
        ),
    ],
)
def test_legacy_annotations_patch(
    annotations: dict[str, str] | None, patch: dict[str, Any]
) -> None:
    service = with_meta(BASE, annotations=annotations) if annotations else BASE
    assert legacy_annotations_patch(service) == patch


def test_the_leftover_spec_hash_is_no_reason_to_sync() -> None:
    old = with_meta(BASE, annotations={"a": "1", ANNOTATION_LB_SPEC_HASH: "v1-0"})
    new = with_meta(BASE, annotations={"a": "1"})
    assert not needs_update(old, new, ignored_annotations=LEGACY_ANNOTATIONS)
    assert needs_update(old, new), "upstream compares every annotation"
