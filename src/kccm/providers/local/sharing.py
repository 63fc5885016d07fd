"""The local provider's shared balancers (kccm's
:class:`~kccm.cloudprovider.sharing.BalancerSharer`, docs/behaviour.md "Sharing one balancer").

One VIP, several Services: the group's VIP is one ``ip_claims`` row owned by
``share:<namespace>/<group>``, and each Service of the group keeps its own ``load_balancers``
row (its ports, backends, health check and source ranges) with that VIP. The data plane
already listens per (VIP, protocol, port), so each Service's ports are its own listeners, and
the row records who owns them. Deleting a Service deletes its row only; the claim goes with
the last row that uses it, in the same transaction. A Service joining a group gives up its own
VIP; one leaving gets a VIP of its own again (an unused group claim is freed then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kccm.cloudprovider import LoadBalancerStatus, Node, Service, ShareGroup
from kccm.providers.local.balancers import LocalLoadBalancers
from kccm.providers.local.desired import spec_of
from kccm.providers.local.store import SHARE_CLAIM_PREFIX

__all__ = ["LocalSharing", "group_claimant"]


def group_claimant(group: ShareGroup) -> str:
    """The ``ip_claims.owner`` of ``group``'s VIP."""
    return f"{SHARE_CLAIM_PREFIX}{group}"


class LocalSharing(LocalLoadBalancers):
    """BalancerSharer over the state file's claims and rows."""

    def sharing_settings(self, service: Service) -> Mapping[str, str]:
        """The VIP a Service asks for: one VIP per group, so they must agree. Source ranges,
        health checks and affinity are per listener here, so they may differ."""
        requested = str(spec_of(service).get("loadBalancerIP") or "")
        return {"spec.loadBalancerIP": requested} if requested else {}

    def get_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        return self.get_load_balancer(cluster_name, service)

    def ensure_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        return self._ensure(
            service, nodes, self._backends_of(nodes), claimant=group_claimant(group)
        )

    def update_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> None:
        self._update(service, self._backends_of(nodes))

    def ensure_shared_load_balancer_deleted(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> None:
        self._delete(service, keep=False, claimant=group_claimant(group))
