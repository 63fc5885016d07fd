"""Typed decoding of list pages and watch events: only the fields kccm keeps are built.

A kubelet's Node is about 10 KiB of JSON, most of it ``status.images``, ``nodeInfo``,
capacity and ``managedFields``, which the informer cache drops right after decoding
(:func:`kccm.runtime.informers.slim_node`). Building those dicts and strings first was most
of the cost of a Node list at 10,000 Nodes and of each Node watch event during initialisation.
msgspec skips the fields a typed schema does not declare without building them, so
:data:`NODE_PROJECTION` decodes a Node into exactly what the slimmed cache holds:
``apiVersion``, ``kind``, every ``metadata`` field but ``managedFields`` (and kubectl's
last-applied annotation), ``spec``, and the
status ``addresses``, ``conditions`` and ``phase``. The result is the same plain dict
(``slim_node`` of it changes nothing), about five times faster.

:class:`~kccm.kube.client.KubeApiClient` applies a projection to the lists, watches, gets and
patch answers of the resources it is given one for (the daemon: Nodes, which it only ever
patches: no projected object is ever written back whole); other answers stay whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from kccm.kube.interface import Obj

__all__ = ["LAST_APPLIED", "NODE_DROPPED", "NODE_KEPT", "NODE_PROJECTION", "Projection"]

_UNSET: Any = msgspec.UNSET
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""Dropped from every cached object: kubectl's copy of the whole object."""
_T = TypeVar("_T")

NODE_KEPT: tuple[str, ...] = (
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status.addresses",
    "status.conditions",
    "status.phase",
)
"""What a Node handed to a provider holds (``metadata`` but :data:`NODE_DROPPED`'s entries).
The provider contract (:mod:`kccm.cloudprovider.interface`) and docs/writing-a-provider.md
list the same fields; ``tests/unit/kube/test_node_fields_doc.py`` holds the three together."""

NODE_DROPPED: tuple[str, ...] = (
    "metadata.managedFields",
    f'metadata.annotations["{LAST_APPLIED}"]',
    "status.allocatable",
    "status.capacity",
    "status.config",
    "status.daemonEndpoints",
    "status.features",
    "status.images",
    "status.nodeInfo",
    "status.runtimeHandlers",
    "status.volumesAttached",
    "status.volumesInUse",
)
"""What a kubelet writes that no provider receives: dropped by :data:`NODE_PROJECTION` and by
the informer's :func:`~kccm.runtime.informers.slim_node` alike (the projection also drops any
``status`` field not in :data:`NODE_KEPT`)."""


class _ObjectMeta(msgspec.Struct):
    """ObjectMeta without ``managedFields``."""

    name: Any = _UNSET
    generateName: Any = _UNSET
    namespace: Any = _UNSET
    selfLink: Any = _UNSET
    uid: Any = _UNSET
    resourceVersion: Any = _UNSET
    generation: Any = _UNSET
    creationTimestamp: Any = _UNSET
    deletionTimestamp: Any = _UNSET
    deletionGracePeriodSeconds: Any = _UNSET
    labels: Any = _UNSET
    annotations: Any = _UNSET
    ownerReferences: Any = _UNSET
    finalizers: Any = _UNSET


class _NodeStatus(msgspec.Struct):
    addresses: Any = _UNSET
    conditions: Any = _UNSET
    phase: Any = _UNSET


class _Node(msgspec.Struct):
    apiVersion: Any = _UNSET
    kind: Any = _UNSET
    metadata: _ObjectMeta | None = None
    spec: Any = _UNSET
    status: _NodeStatus | None = None


class _NodePage(msgspec.Struct):
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    items: list[_Node] | None = None


class _Event(msgspec.Struct):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"{}")


def _fields(struct: msgspec.Struct) -> dict[str, Any]:
    return {
        name: value
        for name in struct.__struct_fields__
        if (value := getattr(struct, name)) is not _UNSET
    }


def _node(node: _Node) -> Obj:
    obj: Obj = {}
    if node.apiVersion is not _UNSET:
        obj["apiVersion"] = node.apiVersion
    if node.kind is not _UNSET:
        obj["kind"] = node.kind
    if node.metadata is not None:
        obj["metadata"] = meta = _fields(node.metadata)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    if node.spec is not _UNSET:
        obj["spec"] = node.spec
    if node.status is not None:
        obj["status"] = _fields(node.status)
    return obj


class Projection(Generic[_T]):
    """How to decode one resource's list pages and watch event objects: ``item`` the typed
    schema of one object, ``page`` that of a list answer (``metadata``, ``items`` of
    ``item``), ``to_obj`` the plain dict of a decoded ``item``."""

    def __init__(self, item: type[_T], page: type[Any], to_obj: Callable[[_T], Obj]) -> None:
        self._to_obj = to_obj
        self._item: msgspec.json.Decoder[_T] = msgspec.json.Decoder(item)
        self._page: msgspec.json.Decoder[Any] = msgspec.json.Decoder(page)
        self._event = msgspec.json.Decoder(_Event)

    def page(self, body: bytes) -> tuple[list[Obj], dict[str, Any]]:
        """A list answer's items and its list ``metadata``."""
        page = self._page.decode(body)
        return [self._to_obj(item) for item in page.items or ()], page.metadata

    def event(self, line: bytes) -> tuple[str, msgspec.Raw]:
        """A watch line's type and its object, still encoded (see :meth:`item`)."""
        event = self._event.decode(line)
        return event.type, event.object

    def item(self, raw: bytes | msgspec.Raw) -> Obj:
        return self._to_obj(self._item.decode(raw))


NODE_PROJECTION: Projection[_Node] = Projection(_Node, _NodePage, _node)
"""Nodes as the slimmed informer cache keeps them (see the module docstring)."""
