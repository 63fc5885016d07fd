"""The openstack provider's draining state (kccm's
:class:`~kccm.cloudprovider.interface.TargetDrainer`, docs/behaviour.md "Draining a Node's
targets"): a draining Node's pool member gets ``weight`` 0, which Octavia's amphora (HAProxy)
reads as "no new connections, established ones kept"; when the drain time has passed the
plain update removes the member. A Node whose member a pool does not hold is never added
(:mod:`.members`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from kccm.cloudprovider import LoadBalancerStatus, Node, Service, node_name
from kccm.providers.openstack.loadbalancer.members import DRAINING

__all__ = ["OctaviaDraining"]


@contextlib.contextmanager
def _draining(nodes: Sequence[Node]) -> Iterator[None]:
    token = DRAINING.set(frozenset(node_name(n) for n in nodes))
    try:
        yield
    finally:
        DRAINING.reset(token)


class OctaviaDraining:
    """TargetDrainer over pool member weights (mixed into the LoadBalancer)."""

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        raise NotImplementedError  # the LoadBalancer's own ensure

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        raise NotImplementedError  # the LoadBalancer's own update

    def ensure_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> LoadBalancerStatus:
        with _draining(draining):
            return self.ensure_load_balancer(cluster_name, service, [*nodes, *draining])

    def update_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> None:
        with _draining(draining):
            self.update_load_balancer(cluster_name, service, [*nodes, *draining])
