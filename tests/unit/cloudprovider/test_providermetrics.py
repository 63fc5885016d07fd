"""A provider's own metric families reach the daemon's registry only through the optional
``register_metrics`` capability."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from kccm.cloudprovider.providermetrics import register_provider_metrics


class WithMetrics:
    def __init__(self) -> None:
        self.hits = Counter("provider_hits", "hits", registry=None)

    def register_metrics(self, registry: CollectorRegistry) -> None:
        registry.register(self.hits)


class WithoutMetrics:
    pass


def test_a_provider_with_metrics_registers_them() -> None:
    registry, cloud = CollectorRegistry(), WithMetrics()
    assert register_provider_metrics(cloud, registry)
    cloud.hits.inc()
    assert "provider_hits_total 1.0" in generate_latest(registry).decode()


def test_a_provider_without_is_left_alone() -> None:
    registry = CollectorRegistry()
    assert not register_provider_metrics(WithoutMetrics(), registry)
    assert generate_latest(registry).decode() == ""
