"""The cluster as the daemon's caches see it, for a provider that needs every Service and Node.

Upstream providers read the shared informers' listers for this (cloud-provider-azure v1.36.5
``pkg/provider/azure_loadbalancer_accesscontrol.go`` ``listAvailableSecurityGroupDestinations``
lists every Service and Node). kccm hands a provider that asks for it (a
:class:`ClusterViewUser`, looked up on the cloud like upstream's ``InformerUser``) a typed,
read-only :class:`ClusterView` over those caches, once per leadership term, before any
controller starts. Not a provider call: no cloud is asked, nothing goes through the call gate.

The view is read from the provider's worker threads; what it returns are the caches' shared
objects: never change them. Before its caches have synced a view may be partial: a provider
must not act on an absence it sees then (:meth:`ClusterView.has_synced`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from kccm.cloudprovider.types import Node, Service

__all__ = ["ClusterView", "ClusterViewUser", "as_cluster_view_user"]


@runtime_checkable
class ClusterView(Protocol):
    """Every Service and every Node the daemon's caches hold now."""

    def services(self) -> Sequence[Service]:
        """Every Service of every namespace (any type), with its status."""
        ...

    def nodes(self) -> Sequence[Node]:
        """Every Node, slimmed as the Node cache keeps them (labels and addresses kept)."""
        ...

    def has_synced(self) -> bool:
        """True once both caches hold a complete first list."""
        ...


@runtime_checkable
class ClusterViewUser(Protocol):
    """Optional, on the provider (:class:`~kccm.cloudprovider.interface.Interface`): it wants
    the :class:`ClusterView`."""

    def set_cluster_view(self, view: ClusterView) -> None:
        """Receive the view (again on each new leadership term), before controllers start."""
        ...


def as_cluster_view_user(cloud: object) -> ClusterViewUser | None:
    """The cloud as a :class:`ClusterViewUser`, or ``None``."""
    return cloud if isinstance(cloud, ClusterViewUser) else None
