"""The shared informers' caches as a provider's :class:`~kccm.cloudprovider.ClusterView`."""

from __future__ import annotations

from kccm.cloudprovider import ClusterView, Node, Service
from kccm.kube.resources import NODES, SERVICES
from kccm.runtime.informers import Informer, SharedInformerFactory

__all__ = ["InformerClusterView", "informer_cluster_view"]


class InformerClusterView:
    """Every Service and Node of the Service and Node informers. ``items()`` copies the
    cache's list of (shared, never changed in place) objects, so a worker thread may read it
    while the loop applies watch events."""

    def __init__(self, services: Informer, nodes: Informer) -> None:
        self._services = services
        self._nodes = nodes

    def services(self) -> list[Service]:
        return list(self._services.items())

    def nodes(self) -> list[Node]:
        return list(self._nodes.items())

    def has_synced(self) -> bool:
        return self._services.has_synced() and self._nodes.has_synced()


def informer_cluster_view(factory: SharedInformerFactory) -> ClusterView | None:
    """A view over the factory's cluster-wide Service and Node informers, or ``None`` when a
    controller did not ask for both (no watch is started for the view alone)."""
    services, nodes = factory.find(SERVICES), factory.find(NODES)
    if services is None or nodes is None:
        return None
    return InformerClusterView(services, nodes)
