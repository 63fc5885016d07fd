"""Pure helpers of the service controller, as upstream's tables: TestWantsLoadBalancer,
TestNeedsCleanup, Test_respectsPredicates, Test_shouldSyncUpdatedNode, TestNodesNotEqual."""

from __future__ import annotations

from typing import Any

import pytest
from service_objects import (
    CA_TAINT,
    EXCLUDE,
    node,
    svc,
    with_meta,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.controllers.service_nodes import (
    STABLE_NODE_SET_PREDICATES,
    loggable_node_names,
    nodes_sufficiently_equal,
    respects_predicates,
    should_sync_updated_node,
)
from kccm.controllers.service_predicates import needs_cleanup, wants_load_balancer

# -- TestWantsLoadBalancer / TestNeedsCleanup ---------------------------------------------------


@pytest.mark.parametrize(
    ("service", "wanted"),
    [
        pytest.param(svc(), True, id="type-loadbalancer-without-class-is-ours"),
        pytest.param(svc(type="ClusterIP"), False, id="clusterip-is-not-ours"),
        pytest.param(svc(type="NodePort"), False, id="nodeport-is-not-ours"),
        pytest.param(svc(loadBalancerClass="x.io/lb"), False, id="a-class-means-someone-else"),
        pytest.param(svc(loadBalancerClass=""), False, id="even-an-empty-class-is-not-ours"),
    ],
)
def test_wants_load_balancer(service: dict[str, Any], wanted: bool) -> None:
    assert wants_load_balancer(service) is wanted


@pytest.mark.parametrize(
    ("service", "cleanup"),
    [
        pytest.param(svc(), False, id="no-finalizer-no-cleanup"),
        pytest.param(
            with_meta(svc(), deletionTimestamp="2026-01-01T00:00:00Z"),
            False,
            id="deleting-without-finalizer-no-cleanup",
        ),
        pytest.param(
            with_meta(svc(), finalizers=[FINALIZER_LB_CLEANUP]),
            False,
            id="finalizer-and-still-loadbalancer-no-cleanup",
        ),
        pytest.param(
            with_meta(
                svc(), finalizers=[FINALIZER_LB_CLEANUP], deletionTimestamp="2026-01-01T00:00:00Z"
            ),
            True,
            id="finalizer-and-deletion-timestamp-needs-cleanup",
        ),
        pytest.param(
            with_meta(svc(type="ClusterIP"), finalizers=[FINALIZER_LB_CLEANUP]),
            True,
            id="finalizer-and-type-changed-needs-cleanup",
        ),
        pytest.param(
            with_meta(svc(loadBalancerClass="x.io/lb"), finalizers=[FINALIZER_LB_CLEANUP]),
            False,
            id="finalizer-and-class-set-but-type-loadbalancer-no-cleanup",
        ),
    ],
)
def test_needs_cleanup(service: dict[str, Any], cleanup: bool) -> None:
    assert needs_cleanup(service) is cleanup


# -- Test_respectsPredicates ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "eligible"),
    [
        pytest.param(node(), True, id="plain-node"),
        pytest.param(node(ready="False"), True, id="not-ready-still-eligible"),
        pytest.param(node(provider_id=""), True, id="no-provider-id-still-eligible"),
        pytest.param(
            node(
                taints=[
                    {
                        "key": "node.cloudprovider.kubernetes.io/uninitialized",
                        "effect": "NoSchedule",
                    }
                ]
            ),
            True,
            id="uninitialized-taint-still-eligible",
        ),
        pytest.param(
            node(labels={"node-role.kubernetes.io/control-plane": ""}),
            True,
            id="control-plane-label-still-eligible",
        ),
        pytest.param(node(deleting=True), False, id="being-deleted"),
        pytest.param(node(taints=[CA_TAINT]), False, id="to-be-deleted-by-autoscaler"),
        pytest.param(node(labels={EXCLUDE: ""}), False, id="exclude-label-empty-excludes"),
        pytest.param(node(labels={EXCLUDE: "true"}), False, id="exclude-label-true"),
        pytest.param(node(labels={EXCLUDE: "yes"}), False, id="exclude-label-unparsable"),
        *[
            pytest.param(node(labels={EXCLUDE: v}), True, id=f"exclude-label-{v}-parses-false")
            for v in ("0", "f", "F", "false", "FALSE", "False")
        ],
        *[
            pytest.param(node(labels={EXCLUDE: v}), False, id=f"exclude-label-{v}-parses-true")
            for v in ("1", "t", "T", "TRUE", "True")
        ],
    ],
)
def test_respects_predicates(candidate: dict[str, Any], eligible: bool) -> None:
    assert respects_predicates(candidate, *STABLE_NODE_SET_PREDICATES) is eligible


# -- Test_shouldSyncUpdatedNode -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "sync"),
    [
        pytest.param(node(), node(labels={EXCLUDE: "true"}), True, id="exclude-label-added"),
        pytest.param(node(labels={EXCLUDE: "true"}), node(), True, id="exclude-label-removed"),
        pytest.param(
            node(), node(labels={EXCLUDE: "false"}), False, id="exclude-label-false-no-change"
        ),
        pytest.param(
            node(labels={EXCLUDE: "true"}),
            node(labels={EXCLUDE: "false"}),
            True,
            id="exclude-label-flipped-to-false",
        ),
        pytest.param(node(), node(provider_id="fake://n1"), True, id="provider-id-set"),
        pytest.param(
            node(provider_id="fake://a"),
            node(provider_id="fake://b"),
            True,
            id="provider-id-changed",
        ),
        pytest.param(node(), node(addresses=("10.0.0.1",)), True, id="addresses-set-kccm"),
        pytest.param(
            node(addresses=("10.0.0.1",)),
            node(addresses=("10.0.0.2",)),
            True,
            id="address-changed-kccm",
        ),
        pytest.param(node(), node(ready="False"), False, id="readiness-change-ignored"),
        pytest.param(node(), node(taints=[CA_TAINT]), False, id="autoscaler-taint-ignored"),
        pytest.param(node(), node(deleting=True), False, id="deletion-timestamp-ignored"),
        pytest.param(node(), node(labels={"other": "x"}), False, id="other-label-ignored"),
        pytest.param(node(), node(), False, id="resync-same-node"),
    ],
)
def test_should_sync_updated_node(old: dict[str, Any], new: dict[str, Any], sync: bool) -> None:
    assert should_sync_updated_node(old, new) is sync


# -- TestNodesNotEqual ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "equal"),
    [
        pytest.param([], [], True, id="both-empty"),
        pytest.param([node("a")], [node("a")], True, id="same-name"),
        pytest.param([node("a")], [node("a"), node("b")], False, id="count-differs"),
        pytest.param([node("a")], [node("b")], False, id="name-differs"),
        pytest.param(
            [node("a", provider_id="p1")],
            [node("a", provider_id="p2")],
            False,
            id="provider-id-differs",
        ),
        pytest.param(
            [node("a", ready="True")], [node("a", ready="False")], True, id="readiness-ignored"
        ),
        pytest.param([node("a", labels={"x": "1"})], [node("a")], True, id="labels-ignored-here"),
        pytest.param(
            [node("a")], [node("a", addresses=("10.0.0.1",))], False, id="addresses-differ-kccm"
        ),
    ],
)
def test_nodes_sufficiently_equal(
    old: list[dict[str, Any]], new: list[dict[str, Any]], equal: bool
) -> None:
    assert nodes_sufficiently_equal(old, new) is equal


def test_loggable_node_names_stop_at_twenty() -> None:
    nodes = [node(f"n{i}") for i in range(23)]
    first_twenty_sorted = sorted(f"n{i}" for i in range(20))  # Go sets.String.List() sorts
    assert first_twenty_sorted[:3] == ["n0", "n1", "n10"]
    assert loggable_node_names(nodes) == [*first_twenty_sorted, "<3 more>"]
    assert loggable_node_names(list(reversed(nodes[:20]))) == first_twenty_sorted
