"""The Warning a Service with a target-node selector and ``externalTrafficPolicy: Local``
gets when its endpoints run on Nodes its balancer does not target.

With ``Local`` only the Nodes running an endpoint answer the balancer's health check, so an
endpoint on a Node the selector leaves out receives no traffic from the balancer (and a
selection holding no endpoint serves nothing). After each ensure or host update of such a
Service the controller reads its EndpointSlices (``kubernetes.io/service-name=<name>``, one
list call, only for these Services: kccm keeps no EndpointSlice informer) and records
``EndpointsOutsideTargetNodes`` when the Nodes outside the selection changed since the last
time it said so. A failed read is logged and skipped (the Warning is advice, not a sync step).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR
from kccm.controllers.service_hosts import service_ref
from kccm.controllers.service_nodes import NodeSetSnapshot
from kccm.controllers.service_predicates import service_key
from kccm.kube.interface import KubeClient
from kccm.kube.resources import ENDPOINT_SLICES
from kccm.runtime.events import EVENT_TYPE_WARNING, EventRecorder

__all__ = ["LABEL_SERVICE_NAME", "REASON", "LocalEndpointsCheck", "endpoint_nodes"]

LABEL_SERVICE_NAME = "kubernetes.io/service-name"
REASON = "EndpointsOutsideTargetNodes"
MAX_NAMES = 20

_log = logging.getLogger("kccm.controllers.service")


def endpoint_nodes(slices: Iterable[Mapping[str, Any]]) -> set[str]:
    """The Nodes running an endpoint that is not known to be unready."""
    found: set[str] = set()
    for piece in slices:
        for endpoint in piece.get("endpoints") or ():
            ready = (endpoint.get("conditions") or {}).get("ready")
            if endpoint.get("nodeName") and ready is not False:
                found.add(str(endpoint["nodeName"]))
    return found


def _local(service: Mapping[str, Any]) -> bool:
    return (service.get("spec") or {}).get("externalTrafficPolicy") == "Local"


class LocalEndpointsCheck:
    """See the module docstring; :meth:`check` after each ensure and host update."""

    def __init__(self, kube: KubeClient, recorder: EventRecorder) -> None:
        self.kube = kube
        self.recorder = recorder
        self._said: dict[str, tuple[str, ...]] = {}

    async def check(self, service: Mapping[str, Any], nodes: NodeSetSnapshot) -> None:
        key = service_key(service)
        if nodes.basis is None or not _local(service):  # no selection, or not Local
            self._said.pop(key, None)
            return
        meta = service.get("metadata") or {}
        try:
            found = await self.kube.list(
                ENDPOINT_SLICES,
                namespace=meta.get("namespace"),
                label_selector=f"{LABEL_SERVICE_NAME}={meta.get('name', '')}",
            )
        except Exception as err:  # advice only: never fails the sync
            _log.info("reading the EndpointSlices of %s failed: %s", key, err)
            return
        outside = tuple(sorted(endpoint_nodes(found.items) - set(nodes.identities)))
        if outside == self._said.get(key, ()):
            return
        self._said[key] = outside
        if outside:
            self.recorder.event(
                service_ref(service), EVENT_TYPE_WARNING, REASON, _message(service, outside)
            )

    def forget(self, key: str) -> None:
        self._said.pop(key, None)


def _message(service: Mapping[str, Any], outside: tuple[str, ...]) -> str:
    selector = ((service.get("metadata") or {}).get("annotations") or {}).get(
        ANNOTATION_TARGET_NODE_SELECTOR, ""
    )
    names = ", ".join(outside[:MAX_NAMES])
    if len(outside) > MAX_NAMES:
        names += f" and {len(outside) - MAX_NAMES} more"
    return (
        f"externalTrafficPolicy is Local and endpoints run on Nodes the load balancer does not "
        f"target ({names}; annotation {ANNOTATION_TARGET_NODE_SELECTOR}={selector}): "
        "the balancer sends them no traffic"
    )
