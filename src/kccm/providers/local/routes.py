"""The local provider's Routes: the ``routes`` table."""

from __future__ import annotations

from collections.abc import Sequence

from kccm.cloudprovider import (
    Route,
)
from kccm.providers.local.base import LocalBase
from kccm.providers.local.store import (
    RouteRecord,
)

__all__ = ["LocalRoutes"]


class LocalRoutes(LocalBase):
    """Routes over the ``routes`` table."""

    def list_routes(self, cluster_name: str) -> Sequence[Route]:
        self._read("list_routes")
        return [
            Route(
                name=r.name,
                target_node=r.target_node,
                destination_cidr=r.destination_cidr,
                blackhole=r.blackhole,
            )
            for r in self.store.list_routes(cluster_name)
        ]

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        self._write("put_route")
        self.store.put_route(
            RouteRecord(
                name=f"{cluster_name}-{name_hint}-{route.destination_cidr}",
                cluster=cluster_name,
                target_node=route.target_node,
                destination_cidr=route.destination_cidr,
            )
        )

    def delete_route(self, cluster_name: str, route: Route) -> None:
        self._write("delete_route")
        self.store.delete_route(cluster_name, route.target_node, route.destination_cidr)
