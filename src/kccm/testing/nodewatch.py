"""Await a state of a Node that may last only a moment, from a watch.

Polling ``GET`` for an intermediate state races the controllers: kube-controller-manager marks a
silent Node ``Ready=Unknown`` and kccm may delete it before the next poll, which then sees
``404`` and never the state it waits for. A watch from a resourceVersion taken before the
action delivers every state in order, the last one in the ``DELETED`` event included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kccm.kube.interface import KubeClient, Obj, WatchEventType
from kccm.kube.resources import NODES

__all__ = ["first_node_state", "ready_condition", "ready_unknown"]


def ready_condition(node: Obj) -> dict[str, Any]:
    """The Node's ``Ready`` condition (empty when it has none)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def ready_unknown(node: Obj) -> bool:
    """kube-controller-manager marked the Node: its kubelet stopped posting status."""
    ready = ready_condition(node)
    return ready.get("status") == "Unknown" and ready.get("reason") == "NodeStatusUnknown"


async def first_node_state(
    kube: KubeClient, name: str, resource_version: str, matches: Callable[[Obj], bool]
) -> Obj:
    """The first state of Node ``name`` after ``resource_version`` that ``matches`` (its last
    state, when it is deleted, included); ``LookupError`` when it was deleted before one did.
    Unbounded: the caller bounds it (``asyncio.timeout``)."""
    version = resource_version
    selector = f"metadata.name={name}"
    while True:  # a watch ends after its timeout: resume from the last version seen
        async for event in kube.watch(
            NODES, resource_version=version, field_selector=selector, timeout_seconds=60
        ):
            version = str(event.object.get("metadata", {}).get("resourceVersion") or version)
            if event.type is WatchEventType.BOOKMARK or _name(event.object) != name:
                continue  # (an in-memory client may not apply the field selector)
            if matches(event.object):
                return event.object
            if event.type is WatchEventType.DELETED:
                raise LookupError(f"Node {name} was deleted before the awaited state")


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
