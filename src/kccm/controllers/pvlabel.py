"""``pv-label-controller`` (alias ``pv-label``): zone/region labels on PersistentVolumes.

A legacy controller, **off by default** (:data:`ENABLED_BY_DEFAULT`). It mirrors the old
cloud-controller-manager ``PersistentVolumeLabelController`` (``pkg/controller/cloud/
pvlcontroller.go``), which asked the provider's ``PVLabeler`` for each new volume's labels
once and then removed its initializer ``pvlabel.kubernetes.io``. Initializers are gone from
Kubernetes, so kccm marks a volume done with the annotation
:data:`~kccm.api.wellknown.ANNOTATION_PV_LABELED` instead:

- a PV without the annotation (and not being deleted) is queued; the sync asks
  ``get_labels_for_volume`` (the provider decides which volume sources it supports and
  returns no labels for the others), then writes, in one merge patch guarded by the PV's
  resourceVersion, the returned labels the PV does not have yet (a label already present,
  whatever its value, is the user's and is never overwritten) plus the annotation;
- the annotation is written even when the provider returned no labels, so each PV costs at
  most one successful provider call; errors (including a Conflict from a concurrent writer)
  are retried with the default controller rate limiter;
- the legacy controller also added a zone ``nodeAffinity``; kccm does not, because
  ``spec.nodeAffinity`` cannot be added to a stored PV (the legacy one wrote it before the
  object became visible, through the initializer).

:func:`build` returns None (with a warning) when the provider has no PV labeler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kccm.api.wellknown import ANNOTATION_PV_LABELED
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedPVLabeler
from kccm.controllers.base import CloudController, ControllerContext
from kccm.kube.errors import NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import PERSISTENT_VOLUMES
from kccm.runtime.informers import EventHandler, Informer
from kccm.runtime.ratelimiters import default_controller_rate_limiter

__all__ = [
    "CONTROLLER_ALIAS",
    "CONTROLLER_NAME",
    "ENABLED_BY_DEFAULT",
    "QUEUE_NAME",
    "PVLabelController",
    "PVLabelControllerOptions",
    "build",
    "labels_to_add",
    "needs_labels",
]

_log = logging.getLogger(__name__)

CONTROLLER_NAME = "pv-label-controller"
CONTROLLER_ALIAS = "pv-label"
ENABLED_BY_DEFAULT = False
QUEUE_NAME = "pvLabels"


@dataclass
class PVLabelControllerOptions:
    """``workers``: concurrent PV syncs (the legacy controller ran 5)."""

    workers: int = 5


def needs_labels(pv: Mapping[str, Any]) -> bool:
    """Not yet done and not being deleted."""
    meta = pv.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    return ANNOTATION_PV_LABELED not in (meta.get("annotations") or {})


def labels_to_add(pv: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, str]:
    """The provider's labels the PV does not carry yet (existing keys are never overwritten)."""
    current = (pv.get("metadata") or {}).get("labels") or {}
    return {key: value for key, value in labels.items() if key not in current}


def build(
    context: ControllerContext, options: PVLabelControllerOptions | None = None
) -> PVLabelController | None:
    """None (logged) when the provider has no PV labeler, as upstream skips such a controller."""
    labeler = context.cloud.pv_labeler()
    if labeler is None:
        _log.warning("%s: the cloud provider has no PV labeler; not starting", CONTROLLER_NAME)
        return None
    return PVLabelController(context, labeler, options or PVLabelControllerOptions())


class PVLabelController(CloudController):
    """See the module docstring. ``sync(name)`` may be called directly (tests do)."""

    def __init__(
        self,
        context: ControllerContext,
        labeler: GatedPVLabeler,
        options: PVLabelControllerOptions,
    ) -> None:
        super().__init__(context, CONTROLLER_NAME, CONTROLLER_ALIAS, _log)
        self.options = options
        self.kube: KubeClient = context.kube
        self.labeler = labeler
        self.volumes: Informer = context.informers.informer(PERSISTENT_VOLUMES)
        self.queue = self.work_queue(
            QUEUE_NAME,
            default_controller_rate_limiter(clock=context.clock),
            self.sync,
            workers=options.workers,
        )
        self.wait_for_caches(self.volumes)
        self.volumes.add_event_handler(
            EventHandler(on_add=self._enqueue, on_update=lambda _, new: self._enqueue(new))
        )

    def _enqueue(self, pv: Obj) -> None:
        if needs_labels(pv):
            self.queue.add(str((pv.get("metadata") or {}).get("name", "")))

    async def sync(self, name: str) -> None:
        """Label one PV (cached copy; the patch's resourceVersion guards against staleness)."""
        pv = self.volumes.get(name)
        if pv is None or not needs_labels(pv):
            return
        labels = await self.labeler.get_labels_for_volume(pv, priority=Priority.NORMAL)
        metadata: dict[str, Any] = {
            "resourceVersion": pv["metadata"].get("resourceVersion"),
            "annotations": {ANNOTATION_PV_LABELED: "true"},
        }
        adding = labels_to_add(pv, labels)
        if adding:
            metadata["labels"] = adding
        skipped = sorted(set(labels) - set(adding))
        if skipped:
            _log.info("PV %s: keeping its own values of %s", name, ", ".join(skipped))
        try:
            await self.kube.patch(
                PERSISTENT_VOLUMES, name, {"metadata": metadata}, patch_type=PatchType.MERGE
            )
        except NotFound:
            return  # deleted meanwhile
        _log.info("PV %s labelled: %s", name, adding or "(provider returned no new labels)")
