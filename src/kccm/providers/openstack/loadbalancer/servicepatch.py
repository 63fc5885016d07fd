"""Writing ``loadbalancer.openstack.org/load-balancer-id`` and ``-address`` back onto the
Service, as OCCM does (upstream ``servicePatcher`` in
``pkg/openstack/loadbalancer_service_patcher.go`` v1.36.0 and the deferred
``patcher.Patch`` in ``ensureOctaviaLoadBalancer``).

The framework passes providers read-only Services and has no channel for annotations, so the
balancer code takes a :class:`ServicePatcher`: called at the end of every ensure (also a
failed one, as upstream's ``defer``) with the annotations that changed, never when none did.
:class:`KubeServicePatcher` sends them as one strategic-merge patch of ``metadata.annotations``
with a client from the framework's ``ControllerClientBuilder`` (the provider's
``initialize`` builds it; provider methods run in worker threads, so the patch is handed to
the event loop the client lives on).

One difference in the request, none in the result: OCCM patches the Service itself
(``util.PatchService``), which needs ``patch`` on ``services``; kccm sends the same
annotations through the ``status`` subresource, as its service controller sends the
finalizer (the Service status strategy keeps metadata changes), so the shipped RBAC
(``services/status: patch`` only, docs/deploy.md) stays as it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from kccm.cloudprovider import Service
from kccm.kube.resources import SERVICES

__all__ = ["PATCH_TIMEOUT", "KubeServicePatcher", "ServicePatcher", "annotation_patch"]

log = logging.getLogger(__name__)

PATCH_TIMEOUT = 30.0


class ServicePatcher(Protocol):
    def patch_annotations(self, service: Service, annotations: Mapping[str, str]) -> None:
        """Set ``annotations`` on the Service (only those; others are left alone)."""
        ...


def annotation_patch(service: Service, wanted: Mapping[str, str]) -> dict[str, str]:
    """The annotations in ``wanted`` the Service does not carry with that value yet."""
    current: Mapping[str, Any] = (service.get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in wanted.items() if current.get(k) != v}


class KubeServicePatcher:
    """A :class:`ServicePatcher` over a kccm ``KubeApiClient`` on ``loop``."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def patch_annotations(self, service: Service, annotations: Mapping[str, str]) -> None:
        meta = service.get("metadata") or {}
        body = {"metadata": {"annotations": dict(annotations)}}
        call = self._client.patch(
            SERVICES,
            meta.get("name"),
            body,
            namespace=meta.get("namespace"),
            subresource="status",
        )
        future = asyncio.run_coroutine_threadsafe(call, self._loop)
        future.result(PATCH_TIMEOUT)
        log.info(
            "Patched Service %s/%s annotations %s",
            meta.get("namespace"),
            meta.get("name"),
            sorted(annotations),
        )
