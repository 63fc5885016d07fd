"""Nodes and Services through kccm.kube on the real apiserver: create, every patch type,
watch, delete."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.interface import PatchType, WatchEventType
from kccm.kube.projection import NODE_PROJECTION
from kccm.kube.resources import NODES, SERVICES, Resource
from kccm.runtime.informers import slim_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


def _node(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "taints": [
                {
                    "key": "node.cloudprovider.kubernetes.io/uninitialized",
                    "value": "true",
                    "effect": "NoSchedule",
                }
            ]
        },
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]},
    }


def _service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": False,
            "ports": [{"port": 80, "protocol": "TCP"}],
        },
    }


def _patches(
    name: str, namespace: str | None, kind: str, api_version: str
) -> list[tuple[PatchType, Any, dict[str, str]]]:
    """(patch type, body, labels expected afterwards) applied in order."""
    apply_body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "labels": {"applied": "yes"}},
    }
    if namespace:
        apply_body["metadata"]["namespace"] = namespace
    return [
        (PatchType.STRATEGIC, {"metadata": {"labels": {"a": "1"}}}, {"a": "1"}),
        (PatchType.MERGE, {"metadata": {"labels": {"b": "2", "a": None}}}, {"b": "2"}),
        (
            PatchType.JSON,
            [{"op": "add", "path": "/metadata/labels/c", "value": "3"}],
            {"b": "2", "c": "3"},
        ),
        (PatchType.APPLY, apply_body, {"b": "2", "c": "3", "applied": "yes"}),
    ]


@pytest.mark.parametrize(
    ("resource", "make"),
    [pytest.param(NODES, _node, id="node"), pytest.param(SERVICES, _service, id="service")],
)
async def test_create_patch_watch_delete(
    resource: Resource,
    make: Any,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    name = unique_name(resource.plural[:-1])
    ns = kube_namespace if resource.namespaced else None
    kube_cleanup.add(resource, name, ns)
    start = await kube.list(resource, namespace=ns)
    created = await kube.create(resource, make(name, kube_namespace))
    for patch_type, body, labels in _patches(name, ns, resource.kind, resource.api_version):
        patched = await kube.patch(
            resource, name, body, patch_type=patch_type, namespace=ns, field_manager="kccm-test"
        )
        assert patched["metadata"].get("labels") == labels, patch_type
    assert await kube.delete(resource, name, namespace=ns) is None

    seen: list[WatchEventType] = []
    async with asyncio.timeout(60):
        async for event in kube.watch(
            resource, resource_version=start.resource_version, namespace=ns
        ):
            if event.object["metadata"]["name"] == name:
                seen.append(event.type)
            if event.type is WatchEventType.DELETED and seen[-1:] == [WatchEventType.DELETED]:
                break
    assert seen == [WatchEventType.ADDED] + [WatchEventType.MODIFIED] * 4 + [WatchEventType.DELETED]
    assert created["metadata"]["uid"]


async def test_projected_node_lists_and_watches_are_the_slimmed_nodes(
    kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """The daemon's client decodes Node lists and watches through NODE_PROJECTION: on the real
    apiserver (managedFields and all) that is exactly slim_node of the whole object."""
    projecting = KubeApiClient(kube.config, qps=0, burst=0, projections={NODES: NODE_PROJECTION})
    name = unique_name("projected")
    kube_cleanup.add(NODES, name)
    try:
        start = await kube.list(NODES)
        await kube.create(NODES, _node(name, ""))
        status = {
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "images": [{"names": [f"registry/image:{i}"], "sizeBytes": i} for i in range(20)],
                "nodeInfo": {"kubeletVersion": "v1.36.3", "machineID": "m"},
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            }
        }
        whole = await kube.patch(NODES, name, status, subresource="status")
        assert whole["metadata"]["managedFields"]
        listed = {n["metadata"]["name"]: n for n in (await projecting.list(NODES)).items}
        unprojected = {n["metadata"]["name"]: n for n in (await kube.list(NODES)).items}
        assert listed[name] == slim_node(unprojected[name])  # list items carry no kind
        async with asyncio.timeout(60):
            async for event in projecting.watch(NODES, resource_version=start.resource_version):
                if event.object["metadata"]["name"] == name and event.type.value == "MODIFIED":
                    assert event.object == slim_node(copy.deepcopy(whole))
                    break
    finally:
        await projecting.close()
