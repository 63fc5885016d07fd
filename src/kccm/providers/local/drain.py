"""The local provider's draining state (kccm's
:class:`~kccm.cloudprovider.interface.TargetDrainer`, docs/behaviour.md "Draining a Node's
targets").

A draining backend stays in the balancer's backend list with ``"draining": true``: the data
plane sends it no new connection (TCP) and no new UDP session, and keeps the flows it already
forwards to it (it keeps them when a backend leaves the list too: the proxy never cuts an
established flow). A draining Node the row does not hold as a backend now is not added, so a
Node removed before a restart stays removed. Rows without draining backends are written
exactly as before (no ``draining`` key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import LoadBalancerStatus, Node, Service, default_load_balancer_name
from kccm.providers.local.balancers import LocalLoadBalancers
from kccm.providers.local.desired import backends_of

__all__ = ["LocalDraining"]


class LocalDraining(LocalLoadBalancers):
    """TargetDrainer over the state file's backend lists."""

    def ensure_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> LoadBalancerStatus:
        return self._ensure(service, nodes, self._with_draining(service, nodes, draining))

    def update_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> None:
        self._update(service, self._with_draining(service, nodes, draining))

    def _with_draining(
        self, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> tuple[Mapping[str, Any], ...]:
        """The serving backends, then each draining Node the row holds as a backend now,
        marked ``draining``; sorted by node as :func:`backends_of` sorts."""
        self._read("find_load_balancer")
        current = self.store.find_load_balancer(default_load_balancer_name(service))
        held = {str(b.get("node")) for b in current.backends} if current is not None else set()
        serving = self._backends_of(nodes)
        names = {b["node"] for b in serving}
        kept = [
            {**backend, "draining": True}
            for backend in backends_of(draining)
            if backend["node"] in held and backend["node"] not in names
        ]
        return tuple(sorted([*serving, *kept], key=lambda b: str(b["node"])))
