"""Pure helpers of the service controller, as upstream's tables: TestNeedsCleanup,
TestNeedsUpdate, Test_respectsPredicates, Test_shouldSyncUpdatedNode, TestNodesNotEqual,
the finalizer / status patch shapes of PatchService and LoadBalancerStatusEqual."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from kccm.api.wellknown import ANNOTATION_LB_SPEC_HASH, FINALIZER_LB_CLEANUP
from kccm.cloudprovider.types import LoadBalancerIngress, LoadBalancerStatus, PortStatus
from kccm.controllers.service_helpers import (
    EMPTY_NODE_SET,
    LEGACY_ANNOTATIONS,
    STABLE_NODE_SET_PREDICATES,
    BackendNodeSet,
    finalizer_patch,
    legacy_annotations_patch,
    load_balancer_status_equal,
    loggable_node_names,
    needs_cleanup,
    needs_update,
    nodes_sufficiently_equal,
    parse_go_bool,
    respects_predicates,
    should_sync_updated_node,
    status_patch,
    wants_load_balancer,
)

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
CA_TAINT = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}


def svc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "metadata": {"name": "s", "namespace": "default", "uid": "uid-1"},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "externalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
        },
    }
    base["spec"].update(spec)
    return base


def with_meta(service: dict[str, Any], **meta: Any) -> dict[str, Any]:
    changed = copy.deepcopy(service)
    changed["metadata"].update(meta)
    return changed


def node(
    name: str = "n1",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    provider_id: str = "",
    deleting: bool = False,
    ready: str = "True",
    addresses: tuple[str, ...] = (),
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"taints": taints or []}
    if provider_id:
        spec["providerID"] = provider_id
    return {
        "metadata": meta,
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": ready}],
            "addresses": [{"type": "InternalIP", "address": a} for a in addresses],
        },
    }


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


# -- TestNeedsUpdate ----------------------------------------------------------------------------

BASE = svc()
TWO_PORTS = [
    {"name": "a", "protocol": "TCP", "port": 80, "targetPort": 80},
    {"name": "b", "protocol": "TCP", "port": 81, "targetPort": 81},
]


@pytest.mark.parametrize(
    ("old", "new", "update", "logged"),
    [
        pytest.param(
            svc(type="ClusterIP"), svc(type="NodePort"), False, None, id="neither-wants-an-lb"
        ),
        pytest.param(
            svc(type="ClusterIP"),
            BASE,
            True,
            "Service default/s wants load balancer changed from ClusterIP to LoadBalancer",
            id="type-changed-to-loadbalancer",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerClass="x.io/lb"),
            True,
            "Service default/s wants load balancer changed from LoadBalancer to LoadBalancer",
            id="class-set-changes-eligibility",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerSourceRanges=["10.0.0.0/8"]),
            True,
            "Service default/s LoadBalancerSourceRanges changed from [] to [10.0.0.0/8]",
            id="source-ranges-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "UDP", "port": 80, "targetPort": 8080}]),
            True,
            None,
            id="port-protocol-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "web", "protocol": "TCP", "port": 80, "targetPort": 8080}]),
            True,
            None,
            id="port-name-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "TCP", "port": 81, "targetPort": 8080}]),
            True,
            None,
            id="port-number-changed",
        ),
        pytest.param(
            BASE,
            svc(
                ports=[
                    {
                        "name": "http",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                        "nodePort": 30001,
                    }
                ]
            ),
            True,
            None,
            id="node-port-changed",
        ),
        pytest.param(
            BASE,
            svc(ports=[{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 9090}]),
            True,
            None,
            id="target-port-changed",
        ),
        pytest.param(
            BASE,
            svc(
                ports=[
                    {
                        "name": "http",
                        "protocol": "TCP",
                        "port": 80,
                        "targetPort": 8080,
                        "appProtocol": "http",
                    }
                ]
            ),
            True,
            None,
            id="app-protocol-changed",
        ),
        pytest.param(
            svc(ports=TWO_PORTS),
            svc(ports=list(reversed(TWO_PORTS))),
            True,
            None,
            id="ports-reordered-is-a-change",
        ),
        pytest.param(BASE, svc(ports=TWO_PORTS), True, None, id="port-added"),
        pytest.param(BASE, svc(sessionAffinity="ClientIP"), True, None, id="session-affinity"),
        pytest.param(
            BASE,
            svc(sessionAffinityConfig={"clientIP": {"timeoutSeconds": 10}}),
            True,
            None,
            id="session-affinity-config",
        ),
        pytest.param(
            BASE,
            svc(loadBalancerIP="1.2.3.4"),
            True,
            "Service default/s LoadBalancerIP changed from  to 1.2.3.4",
            id="load-balancer-ip-changed",
        ),
        pytest.param(
            BASE,
            svc(externalIPs=["1.1.1.1"]),
            True,
            "Service default/s ExternalIPs' count changed from 0 to 1",
            id="external-ip-added",
        ),
        pytest.param(
            svc(externalIPs=["1.1.1.1"]),
            svc(externalIPs=["2.2.2.2"]),
            True,
            "Service default/s ExternalIPs[0] changed from 1.1.1.1 to 2.2.2.2",
            id="external-ip-replaced",
        ),
        pytest.param(
            BASE,
            with_meta(BASE, annotations={"a": "b"}),
            True,
            None,
            id="annotation-added",
        ),
        pytest.param(
            with_meta(BASE, annotations={"a": "b"}),
            with_meta(BASE, annotations={"a": "c"}),
            True,
            None,
            id="annotation-value-changed",
        ),
        pytest.param(
            BASE,
            with_meta(BASE, uid="uid-2"),
            True,
            "Service default/s UID changed from uid-1 to uid-2",
            id="uid-changed",
        ),
        pytest.param(
            BASE,
            svc(externalTrafficPolicy="Local"),
            True,
            "Service default/s ExternalTrafficPolicy changed from Cluster to Local",
            id="external-traffic-policy-changed",
        ),
        pytest.param(
            BASE,
            svc(healthCheckNodePort=30123),
            True,
            "Service default/s HealthCheckNodePort changed from 0 to 30123",
            id="health-check-node-port-changed",
        ),
        pytest.param(
            BASE,
            svc(ipFamilies=["IPv4", "IPv6"]),
            True,
            "Service default/s IPFamilies' count changed from 1 to 2",
            id="ip-families-count-changed",
        ),
        pytest.param(
            BASE, svc(ipFamilies=["IPv6"]), False, None, id="ip-family-swap-same-count-no-update"
        ),
        pytest.param(
            BASE, with_meta(BASE, labels={"a": "b"}), False, None, id="labels-do-not-count"
        ),
        pytest.param(
            BASE,
            with_meta(BASE, finalizers=[FINALIZER_LB_CLEANUP]),
            False,
            None,
            id="finalizers-do-not-count",
        ),
        pytest.param(
            BASE, svc(internalTrafficPolicy="Local"), False, None, id="itp-does-not-count"
        ),
        pytest.param(
            BASE,
            svc(allocateLoadBalancerNodePorts=False),
            False,
            None,
            id="allocate-node-ports-does-not-count",
        ),
        pytest.param(
            BASE,
            {**BASE, "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}},
            False,
            None,
            id="status-does-not-count",
        ),
        pytest.param(BASE, copy.deepcopy(BASE), False, None, id="resync-of-same-object"),
    ],
)
def test_needs_update(
    old: dict[str, Any],
    new: dict[str, Any],
    update: bool,
    logged: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """v0.36.3 records no Event here: the reasons upstream logs at V(2) are debug logs."""
    with caplog.at_level(logging.DEBUG, logger="kccm.controllers.service_helpers"):
        assert needs_update(old, new) is update
    assert [r.getMessage() for r in caplog.records] == ([] if logged is None else [logged])


@pytest.mark.parametrize(
    ("old", "new", "update"),
    [
        pytest.param(
            with_meta(BASE, annotations={"a": "b"}),
            with_meta(BASE, annotations={"a": "b", "kccm/hash": "x"}),
            False,
            id="ignored-annotation-added",
        ),
        pytest.param(
            with_meta(BASE, annotations={"a": "b", "kccm/hash": "x"}),
            with_meta(BASE, annotations={"a": "c", "kccm/hash": "y"}),
            True,
            id="other-annotation-still-counts",
        ),
    ],
)
def test_needs_update_ignores_the_given_annotations(
    old: dict[str, Any], new: dict[str, Any], update: bool
) -> None:
    assert needs_update(old, new, ignored_annotations={"kccm/hash"}) is update


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


def test_parse_go_bool_rejects_what_go_rejects() -> None:
    for value in ("", "yes", "no", "tRuE", " true", "2"):
        with pytest.raises(ValueError, match="invalid syntax"):
            parse_go_bool(value)


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
