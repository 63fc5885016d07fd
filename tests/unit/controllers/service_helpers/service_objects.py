"""Service and Node builders shared by the service controller's pure-helper tests."""

from __future__ import annotations

import copy
from typing import Any

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


BASE = svc()
