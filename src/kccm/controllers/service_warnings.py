"""The provider's warnings about a Service, recorded as Warning Events on it.

:class:`ReportingBalancer` is the gated load balancer the service controller calls: around
each ``ensure_load_balancer``, ``update_load_balancer`` (and their draining variants) and
``ensure_load_balancer_deleted`` it collects what the provider reported with
:func:`~kccm.cloudprovider.servicewarnings.warn_service` and records each as a ``Warning``
Event on the Service, whether the call succeeded or failed, before the controller's own
Events for that call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.cloudprovider.types import LoadBalancerStatus, Node, Service
from kccm.controllers.service_hosts import service_ref
from kccm.runtime.events import EVENT_TYPE_WARNING, EventRecorder

__all__ = ["ReportingBalancer"]

_P = Priority.NORMAL


class ReportingBalancer(GatedLoadBalancer):
    """``balancer``'s calls, with the provider's warnings recorded by ``recorder``."""

    def __init__(self, balancer: GatedLoadBalancer, recorder: EventRecorder) -> None:
        super().__init__(balancer.impl, balancer.gate)
        self.recorder = recorder

    @contextmanager
    def _reporting(self, service: Service) -> Iterator[None]:
        with collect_service_warnings() as warnings:
            try:
                yield
            finally:
                for warning in warnings:
                    self.recorder.event(
                        service_ref(service), EVENT_TYPE_WARNING, warning.reason, warning.message
                    )

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], *, priority: Priority = _P
    ) -> LoadBalancerStatus:
        with self._reporting(service):
            return await super().ensure_load_balancer(
                cluster_name, service, nodes, priority=priority
            )

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], *, priority: Priority = _P
    ) -> None:
        with self._reporting(service):
            await super().update_load_balancer(cluster_name, service, nodes, priority=priority)

    async def ensure_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> LoadBalancerStatus:
        with self._reporting(service):
            return await super().ensure_load_balancer_draining(
                cluster_name, service, nodes, draining, priority=priority
            )

    async def update_load_balancer_draining(
        self,
        cluster_name: str,
        service: Service,
        nodes: Sequence[Node],
        draining: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> None:
        with self._reporting(service):
            await super().update_load_balancer_draining(
                cluster_name, service, nodes, draining, priority=priority
            )

    async def ensure_load_balancer_deleted(
        self, cluster_name: str, service: Service, *, priority: Priority = _P
    ) -> None:
        with self._reporting(service):
            await super().ensure_load_balancer_deleted(cluster_name, service, priority=priority)
