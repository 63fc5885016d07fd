"""A Service's endpoints for a provider that asks for them
(:class:`~kccm.cloudprovider.EndpointsUser`; docs/behaviour.md, "Endpoints for a provider").

Only then does the service controller cache EndpointSlices (one cluster-wide informer; list and
watch). Each slice event recomputes the endpoints of its Service (``kubernetes.io/service-name``
label) as :class:`~kccm.cloudprovider.ServiceEndpoint` records; when they differ from before and
the provider's ``uses_endpoints`` says the Service's members follow them, the Service is synced
(upstream cloud-provider-alibaba-cloud v2.14.0 ``pkg/controller/service/clbv1/
event_handler.go``: an EndpointSlice create, delete or endpoints/ports update re-queues its
Service). The provider reads them with :meth:`EndpointSliceIndex.read` from its worker threads:
each Service's tuple is replaced whole, never changed in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kccm.cloudprovider import EndpointsUser, Service, ServiceEndpoint
from kccm.controllers.service_predicates import service_key
from kccm.kube.interface import Obj
from kccm.kube.resources import ENDPOINT_SLICES
from kccm.runtime.informers import EventHandler, Informer, SharedInformerFactory, object_key

__all__ = ["EndpointSliceIndex", "merge_endpoints", "slice_endpoints"]

LABEL_SERVICE_NAME = "kubernetes.io/service-name"

_log = logging.getLogger("kccm.controllers.service")

Endpoints = tuple[ServiceEndpoint, ...]


def _owner(piece: Mapping[str, Any]) -> str | None:
    """The ``namespace/name`` of the Service a slice belongs to, or None."""
    meta = piece.get("metadata") or {}
    name = (meta.get("labels") or {}).get(LABEL_SERVICE_NAME)
    return f"{meta.get('namespace') or ''}/{name}" if name else None


def _ports(piece: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    return tuple(
        (str(p.get("name") or ""), int(p["port"]))
        for p in piece.get("ports") or ()
        if p.get("port") is not None
    )


def slice_endpoints(piece: Mapping[str, Any]) -> Endpoints:
    """One slice's endpoints: not terminating, one record per address (FQDN slices: none)."""
    if piece.get("addressType") == "FQDN":
        return ()
    ports = _ports(piece)
    found: list[ServiceEndpoint] = []
    for endpoint in piece.get("endpoints") or ():
        conditions = endpoint.get("conditions") or {}
        if conditions.get("terminating") is True:
            continue
        ref = endpoint.get("targetRef") or {}
        pod = str(ref.get("name") or "") if ref.get("kind") == "Pod" else ""
        ready = conditions.get("ready") is not False
        node = str(endpoint.get("nodeName") or "")
        found += [
            ServiceEndpoint(str(a), node, ready, ports, pod)
            for a in endpoint.get("addresses") or ()
        ]
    return tuple(found)


def merge_endpoints(pieces: Iterable[Endpoints]) -> Endpoints:
    """The endpoints of several slices, one per address (ready wins), sorted by address."""
    merged: dict[str, ServiceEndpoint] = {}
    for endpoints in pieces:
        for endpoint in endpoints:
            seen = merged.get(endpoint.address)
            if seen is None or (endpoint.ready and not seen.ready):
                merged[endpoint.address] = endpoint
    return tuple(merged[a] for a in sorted(merged))


class EndpointSliceIndex:
    """Every Service's endpoints from the EndpointSlice informer; ``changed(key)`` runs (on
    the event loop) when a Service's endpoints differ from what they were."""

    def __init__(self, informer: Informer, changed: Callable[[str], None]) -> None:
        self.informer = informer
        self._changed = changed
        self._slices: dict[str, tuple[str, Endpoints]] = {}
        """Slice key -> (its Service's key, its endpoints)."""
        self._members: dict[str, dict[str, Endpoints]] = {}
        """Service key -> {slice key: endpoints}."""
        self._merged: dict[str, Endpoints] = {}
        informer.add_event_handler(
            EventHandler(
                on_add=self._apply,
                on_update=lambda _old, new: self._apply(new),
                on_delete=self._forget,
            )
        )

    @classmethod
    def serving(
        cls,
        informers: SharedInformerFactory,
        balancer: object,
        services: Informer,
        wants: Callable[[Obj], bool],
        enqueue: Callable[[str], None],
    ) -> EndpointSliceIndex | None:
        """The index a provider's ``balancer`` asks for (handed its reader), or None: then no
        EndpointSlice is listed or watched."""
        if not isinstance(balancer, EndpointsUser):
            return None
        user = balancer

        def changed(key: str) -> None:
            service = services.get(key)
            if service is not None and wants(service) and user.uses_endpoints(service):
                _log.debug("endpoints of %s changed: syncing it", key)
                enqueue(key)

        index = cls(informers.informer(ENDPOINT_SLICES), changed)
        user.set_endpoints_reader(index.read)
        return index

    def read(self, service: Service) -> Endpoints:
        """The Service's endpoints now (thread-safe: one dict read)."""
        return self._merged.get(service_key(service), ())

    def _apply(self, piece: Obj) -> None:
        key, owner = object_key(piece), _owner(piece)
        before = self._slices.get(key)
        if before is not None and before[0] != owner:  # relabelled: it left its Service
            self._forget(piece)
        if owner is not None:
            self._slices[key] = (owner, slice_endpoints(piece))
            self._members.setdefault(owner, {})[key] = self._slices[key][1]
            self._recompute(owner)

    def _forget(self, piece: Obj) -> None:
        key = object_key(piece)
        gone = self._slices.pop(key, None)
        if gone is not None:
            self._members.get(gone[0], {}).pop(key, None)
            self._recompute(gone[0])

    def _recompute(self, owner: str) -> None:
        pieces = self._members.get(owner) or {}
        merged = merge_endpoints(pieces[k] for k in sorted(pieces))
        if not pieces:
            self._members.pop(owner, None)
        if merged == self._merged.get(owner, ()):
            return
        if merged:
            self._merged[owner] = merged
        else:
            self._merged.pop(owner, None)
        self._changed(owner)
