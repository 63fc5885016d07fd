"""The exact shape of the strategic-merge patches upstream's ``servicehelper.PatchService``
sends for the load-balancer controller (:func:`finalizer_patch`, :func:`status_patch`), when
the status needs one (:func:`load_balancer_status_equal`), the removal of what an earlier
kccm left on Services (:func:`legacy_annotations_patch`), and the writes themselves
(:class:`ServiceWrites`). Objects are JSON-shaped mappings and are never modified here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kccm.api.wellknown import ANNOTATION_LB_SPEC_HASH
from kccm.cloudprovider.types import LoadBalancerStatus
from kccm.controllers.service_marks import ServiceMarks
from kccm.kube.errors import NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import SERVICES

__all__ = [
    "LEGACY_ANNOTATIONS",
    "ServiceSyncError",
    "ServiceWrites",
    "finalizer_patch",
    "legacy_annotations_patch",
    "load_balancer_status_equal",
    "status_patch",
]

# -- what an earlier kccm left on Services ----------------------------------------------------

LEGACY_ANNOTATIONS = frozenset({ANNOTATION_LB_SPEC_HASH})
"""Annotations an earlier kccm wrote on Services (the load-balancer spec hash, issue 10).
kccm writes none now: they are left out of
:func:`~kccm.controllers.service_predicates.needs_update` (their removal is no reason to sync)
and removed by the next patch kccm sends anyway (:func:`legacy_annotations_patch`)."""


def legacy_annotations_patch(service: Mapping[str, Any]) -> dict[str, Any]:
    """The ``metadata`` part of a patch removing the :data:`LEGACY_ANNOTATIONS` the service
    still carries (``{}`` when it carries none)."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    present = sorted(LEGACY_ANNOTATIONS & set(annotations))
    if not present:
        return {}
    return {"annotations": dict.fromkeys(present)}


# -- the patches PatchService sends -----------------------------------------------------------


def load_balancer_status_equal(previous: Mapping[str, Any], new: LoadBalancerStatus) -> bool:
    """Semantic equality of ``.ingress`` only (ip, hostname, ipMode, ports), as upstream
    ``LoadBalancerStatusEqual``; an absent list equals an empty one."""
    return LoadBalancerStatus.from_dict(previous).ingress == new.ingress


def finalizer_patch(old: Sequence[str], new: Sequence[str]) -> dict[str, Any]:
    """The strategic-merge patch a two-way diff of ``metadata.finalizers`` produces
    (patch strategy ``merge`` on a list of strings), as upstream ``PatchService`` sends it.

    From none to some: the list itself. From some to none: ``null``. Otherwise the added
    values, a ``$deleteFromPrimitiveList`` of the removed ones and the new order.
    """
    if not old:
        return {"metadata": {"finalizers": list(new)}}
    if not new:
        return {"metadata": {"finalizers": None}}
    meta: dict[str, Any] = {"$setElementOrder/finalizers": list(new)}
    added = [value for value in new if value not in old]
    removed = [value for value in old if value not in new]
    if added:
        meta["finalizers"] = added
    if removed:
        meta["$deleteFromPrimitiveList/finalizers"] = removed
    return {"metadata": meta}


def status_patch(new: LoadBalancerStatus) -> dict[str, Any]:
    """The strategic-merge patch setting ``status.loadBalancer`` to ``new``: the ingress list
    is atomic, so it is replaced whole; an empty status removes it (``null``)."""
    ingress = new.to_dict().get("ingress")
    return {"status": {"loadBalancer": {"ingress": ingress}}}


class ServiceSyncError(Exception):
    """A sync step failed; the message is upstream's wording. Raised ``from`` the cause so a
    ``RetryError`` underneath is found by the controller loop."""


class ServiceWrites:
    """The service controller's writes (upstream ``addFinalizer``, ``removeFinalizer``,
    ``patchStatus``), each a strategic-merge patch of the status subresource; the finalizer
    and the labels are the provider's when it names them (:class:`ServiceMarks`)."""

    def __init__(self, kube: KubeClient, marks: ServiceMarks | None = None) -> None:
        self.kube = kube
        self.marks = marks or ServiceMarks()

    async def add_finalizer(self, service: Obj) -> None:
        finalizer = self.marks.finalizer(service)
        old = list(service["metadata"].get("finalizers") or [])
        if finalizer in old:
            return
        await self.patch_service(service, finalizer_patch(old, [*old, finalizer]))

    async def remove_finalizer(self, service: Obj) -> None:
        """Removes the controller's finalizers and, in the same patch, the provider's labels."""
        held = self.marks.held(service)
        if not held:
            return
        old = list(service["metadata"].get("finalizers") or [])
        patch = finalizer_patch(old, [f for f in old if f not in held])
        labels = self.marks.labels_to_remove(service)
        if labels:
            patch["metadata"]["labels"] = labels
        await self.patch_service(service, patch)

    async def set_labels(self, service: Obj) -> None:
        """After a successful ensure: the provider's labels, only those that changed."""
        labels = self.marks.labels_to_set(service)
        if not labels:
            return
        try:
            await self.patch_service(service, {"metadata": {"labels": labels}})
        except Exception as err:
            raise ServiceSyncError(f"failed to set the Service's labels: {err}") from err

    async def patch_status(
        self, service: Obj, previous: Mapping[str, Any], new: LoadBalancerStatus
    ) -> None:
        """Upstream ``patchStatus``: only when the ingress differs."""
        if load_balancer_status_equal(previous, new):
            return
        patch = status_patch(new)
        try:
            await self.patch_service(service, patch)
        except NotFound:
            pass  # the service went away right after its finalizer was removed
        except Exception as err:
            raise ServiceSyncError(f"failed to update load balancer status: {err}") from err

    async def patch_service(self, service: Obj, patch: dict[str, Any]) -> None:
        """Upstream ``PatchService``: a strategic-merge patch of the status subresource.

        kccm: a leftover annotation of an earlier kccm (the spec hash) rides along and is
        removed, so it goes with the next write kccm makes anyway, never with one of its own."""
        meta = service["metadata"]
        leftover = legacy_annotations_patch(service)
        if leftover:
            patch = {**patch, "metadata": {**patch.get("metadata", {}), **leftover}}
        await self.kube.patch(
            SERVICES,
            meta["name"],
            patch,
            patch_type=PatchType.STRATEGIC,
            namespace=meta.get("namespace"),
            subresource="status",
        )
