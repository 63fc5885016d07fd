"""NODE_PROJECTION decodes a Node into exactly what the slimmed informer cache keeps, and
KubeApiClient's watch decoding keeps an ERROR event's Status whole under a projection."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from kccm.kube.client import _watch_event
from kccm.kube.errors import Gone
from kccm.kube.interface import WatchEventType
from kccm.kube.projection import NODE_PROJECTION
from kccm.runtime.informers import slim_node

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def kubelet_node(name: str, **extra_meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": "u-1",
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-26T10:00:00Z",
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", LAST_APPLIED: "{...}"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"kind": "Machine", "name": "m", "uid": "m-1"}],
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
            **extra_meta,
        },
        "spec": {"podCIDR": "10.244.1.0/24", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
            "capacity": {"cpu": "4"},
            "allocatable": {"cpu": "4"},
            "images": [{"names": [f"registry/image:{i}"], "sizeBytes": i} for i in range(50)],
            "nodeInfo": {"kubeletVersion": "v1.36.3"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(kubelet_node("n1"), id="kubelet-shaped"),
        pytest.param(
            kubelet_node(
                "n2",
                deletionTimestamp="2026-11-26T11:00:00Z",
                deletionGracePeriodSeconds=0,
                generateName="n-",
            ),
            id="being-deleted",
        ),
        pytest.param({"metadata": {"name": "bare"}}, id="no-spec-no-status"),
        pytest.param({"metadata": {"name": "s"}, "status": {"images": []}}, id="status-only-bulk"),
    ],
)
def test_a_projected_node_is_the_slimmed_node(node: dict[str, Any]) -> None:
    projected = NODE_PROJECTION.item(msgspec.json.encode(node))
    assert slim_node(copy.deepcopy(projected)) == projected  # nothing left for the cache to drop
    assert projected == slim_node(copy.deepcopy(node))


def test_a_page_keeps_items_and_list_metadata() -> None:
    page = {
        "kind": "NodeList",
        "metadata": {"resourceVersion": "7", "continue": "tok"},
        "items": [kubelet_node("a"), kubelet_node("b")],
    }
    items, meta = NODE_PROJECTION.page(msgspec.json.encode(page))
    assert meta == {"resourceVersion": "7", "continue": "tok"}
    assert items == [slim_node(copy.deepcopy(n)) for n in page["items"]]


def test_a_projected_watch_event_and_an_error_event() -> None:
    line = msgspec.json.encode({"type": "MODIFIED", "object": kubelet_node("n1")})
    event = _watch_event(line, NODE_PROJECTION)
    assert event.type is WatchEventType.MODIFIED
    assert event.object == slim_node(kubelet_node("n1"))
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    error = msgspec.json.encode({"type": "ERROR", "object": status})
    with pytest.raises(Gone, match="too old"):
        _watch_event(error, NODE_PROJECTION)
