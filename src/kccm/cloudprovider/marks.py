"""What the service controller writes on a Service it balances (kccm, not upstream;
docs/behaviour.md, "A provider's marks on Services").

By default a balanced Service carries the generic finalizer
``service.kubernetes.io/load-balancer-cleanup`` and no label, as upstream's service controller
leaves it. A cloud whose own manager marks Services otherwise (its own finalizer, labels that
tooling reads) lets kccm be dropped in for that manager, and that manager put back, by
implementing :class:`ServiceMarker` on its LoadBalancer. Its methods are cheap and make no
cloud call: the controller calls them on its event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol, cast, runtime_checkable

from kccm.cloudprovider.types import Service

__all__ = ["ServiceMarker", "as_service_marker"]


@runtime_checkable
class ServiceMarker(Protocol):
    """Optional, on the LoadBalancer implementation: the finalizer the service controller adds
    to a Service before ensuring its balancer and removes once the balancer is deleted (in
    place of the generic one, which it still removes from a Service that carries it), and the
    labels it sets after each successful ensure and removes with the finalizer."""

    def service_finalizer(self, service: Service) -> str:
        """The finalizer for this Service (may depend on it, e.g. on its balancer kind)."""
        ...

    def service_labels(self, service: Service) -> Mapping[str, str]:
        """The labels the Service must carry after a successful ensure (called right after
        it): each is written only when its value differs."""
        ...

    def service_label_keys(self) -> Collection[str]:
        """Every label key the controller removes from a Service whose balancer is gone."""
        ...


def as_service_marker(load_balancer: object) -> ServiceMarker | None:
    """The LoadBalancer implementation as a :class:`ServiceMarker`, or ``None``."""
    names = ("service_finalizer", "service_labels", "service_label_keys")
    if all(callable(getattr(load_balancer, name, None)) for name in names):
        return cast(ServiceMarker, load_balancer)
    return None
