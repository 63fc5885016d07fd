"""The gated twin of :class:`~kccm.cloudprovider.sharing.BalancerSharer`: each call through the
call gate, as :mod:`kccm.cloudprovider.gated` does for the other Protocols."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kccm.cloudprovider.gate import CallGate, Priority
from kccm.cloudprovider.gated import _Gated
from kccm.cloudprovider.sharing import BalancerSharer, ShareGroup
from kccm.cloudprovider.types import LoadBalancerStatus, Node, Service

__all__ = ["GatedBalancerSharer"]

_P = Priority.NORMAL


class GatedBalancerSharer(_Gated):
    protocols = (BalancerSharer,)

    def __init__(self, impl: BalancerSharer, gate: CallGate) -> None:
        super().__init__(gate)
        self.impl = impl

    def sharing_settings(self, service: Service) -> Mapping[str, str]:
        return self.impl.sharing_settings(service)

    async def get_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, *, priority: Priority = _P
    ) -> tuple[LoadBalancerStatus | None, bool]:
        return await self._call(
            "get_shared_load_balancer",
            self.impl.get_shared_load_balancer,
            cluster_name,
            group,
            service,
            priority=priority,
        )

    async def ensure_shared_load_balancer(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        nodes: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> LoadBalancerStatus:
        return await self._call(
            "ensure_shared_load_balancer",
            self.impl.ensure_shared_load_balancer,
            cluster_name,
            group,
            service,
            nodes,
            priority=priority,
        )

    async def update_shared_load_balancer(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        nodes: Sequence[Node],
        *,
        priority: Priority = _P,
    ) -> None:
        await self._call(
            "update_shared_load_balancer",
            self.impl.update_shared_load_balancer,
            cluster_name,
            group,
            service,
            nodes,
            priority=priority,
        )

    async def ensure_shared_load_balancer_deleted(
        self, cluster_name: str, group: ShareGroup, service: Service, *, priority: Priority = _P
    ) -> None:
        await self._call(
            "ensure_shared_load_balancer_deleted",
            self.impl.ensure_shared_load_balancer_deleted,
            cluster_name,
            group,
            service,
            priority=priority,
        )
