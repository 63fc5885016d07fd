"""The finalizer and labels the service controller writes on a Service it balances: the
generic finalizer and no label, or what the provider's
:class:`~kccm.cloudprovider.marks.ServiceMarker` names (docs/behaviour.md, "A provider's marks
on Services"). Objects are JSON-shaped mappings and are never modified here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.marks import ServiceMarker, as_service_marker

__all__ = ["ServiceMarks"]


def _meta(service: Mapping[str, Any]) -> Mapping[str, Any]:
    return service.get("metadata") or {}


class ServiceMarks:
    """Which finalizer a Service gets, which of its finalizers are the controller's to remove,
    and the label patches (the ``metadata.labels`` part of a strategic-merge patch)."""

    def __init__(self, marker: ServiceMarker | None = None) -> None:
        self.marker = marker

    @classmethod
    def of(cls, load_balancer: object) -> ServiceMarks:
        return cls(as_service_marker(load_balancer))

    def finalizer(self, service: Mapping[str, Any]) -> str:
        """The finalizer added before an ensure."""
        if self.marker is None:
            return FINALIZER_LB_CLEANUP
        return self.marker.service_finalizer(service)

    def held(self, service: Mapping[str, Any]) -> list[str]:
        """The Service's finalizers the controller removes once the balancer is gone: its
        own, and the generic one (left by upstream's controller or a kccm without marks)."""
        ours = {FINALIZER_LB_CLEANUP, self.finalizer(service)}
        return [f for f in _meta(service).get("finalizers") or () if f in ours]

    def labels_to_set(self, service: Mapping[str, Any]) -> dict[str, Any]:
        """The labels whose value differs from the one wanted after an ensure (``{}``: none)."""
        if self.marker is None:
            return {}
        current = _meta(service).get("labels") or {}
        wanted = self.marker.service_labels(service)
        return {k: v for k, v in sorted(wanted.items()) if current.get(k) != v}

    def labels_to_remove(self, service: Mapping[str, Any]) -> dict[str, Any]:
        """``{key: None}`` for each of the provider's label keys the Service carries."""
        if self.marker is None:
            return {}
        current = _meta(service).get("labels") or {}
        return {k: None for k in sorted(self.marker.service_label_keys()) if k in current}
