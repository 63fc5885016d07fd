"""The service load-balancer controller's metrics (upstream ``controllers/service/metrics.go``)."""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ServiceControllerMetrics"]

_EXP_BUCKETS = tuple(float(2**i) for i in range(15))  # ExponentialBuckets(1, 2, 15)


class ServiceControllerMetrics:
    """Upstream's service controller metrics (ALPHA), registered once per registry, and
    kccm's ``kccm_service_draining_targets``."""

    _by_registry: weakref.WeakKeyDictionary[CollectorRegistry, ServiceControllerMetrics] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, registry: CollectorRegistry) -> None:
        self.loadbalancer_sync = Counter(
            "service_controller_loadbalancer_sync",
            "A metric counting the amount of times any load balancer has been configured, "
            "as an effect of service/node changes on the cluster",
            registry=registry,
        )
        self.nodesync_error = Counter(
            "service_controller_nodesync_error",
            "A metric counting the amount of times any load balancer has been configured "
            "and errored, as an effect of node changes on the cluster",
            registry=registry,
        )
        self.nodesync_latency = Histogram(
            "service_controller_nodesync_latency_seconds",
            "A metric measuring the latency for nodesync which updates loadbalancer hosts "
            "on cluster node updates.",
            registry=registry,
            buckets=_EXP_BUCKETS,
        )
        self.update_host_latency = Histogram(
            "service_controller_update_loadbalancer_host_latency_seconds",
            "A metric measuring the latency for updating each load balancer hosts.",
            registry=registry,
            buckets=_EXP_BUCKETS,
        )
        self.draining_targets = Gauge(
            "kccm_service_draining_targets",
            'kccm: Nodes their balancers keep draining now (docs/behaviour.md, "Draining a '
            "Node's targets\"), summed over Services.",
            registry=registry,
        )

    @classmethod
    def on(cls, registry: CollectorRegistry) -> ServiceControllerMetrics:
        metrics = cls._by_registry.get(registry)
        if metrics is None:
            metrics = cls._by_registry[registry] = cls(registry)
        return metrics
