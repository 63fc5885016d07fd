"""A provider's own Prometheus metrics on the daemon's ``/metrics``.

Some providers replace a cloud controller manager whose metrics users already scrape (the
openstack provider: OCCM's ``openstack_api_*`` and ``cloudprovider_openstack_reconcile_*``).
Such a provider implements the optional :class:`MetricsRegistrant` capability; the daemon calls
:func:`register_provider_metrics` once, with its registry, after the provider is made.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from prometheus_client import CollectorRegistry

__all__ = ["MetricsRegistrant", "register_provider_metrics"]


@runtime_checkable
class MetricsRegistrant(Protocol):
    """Optional provider capability: metric families of its own."""

    def register_metrics(self, registry: CollectorRegistry) -> None:
        """Register the provider's collectors on ``registry`` (called once per registry)."""
        ...


def register_provider_metrics(cloud: object, registry: CollectorRegistry) -> bool:
    """Let ``cloud`` register its metrics on ``registry`` when it has any; returns whether it
    had."""
    if not isinstance(cloud, MetricsRegistrant):
        return False
    cloud.register_metrics(registry)
    return True
