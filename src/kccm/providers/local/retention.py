"""The local provider's address retention (kccm's
:class:`~kccm.cloudprovider.interface.AddressRetainer`, docs/behaviour.md "Keeping a
balancer's address").

The VIP's claim in ``ip_claims`` is the address: its ``owner`` column already names the
Service (``namespace/name``) and ``retain`` marks it kept, exactly what the provider's own
``local.kccm.io/retain-ip`` annotation does, so both ask for the same thing and
``kccm addresses`` lists and releases claims either one kept. A retained claim goes back to a
Service of the same owner (the store's claim by owner) or to one asking for the VIP in
``spec.loadBalancerIP`` (the store hands over a retained claim no balancer uses).
"""

from __future__ import annotations

from collections.abc import Sequence

from kccm.cloudprovider import RetainedAddress, Service
from kccm.providers.local.balancers import LocalLoadBalancers
from kccm.providers.local.store import IPClaim

__all__ = ["LocalRetention"]

MARK = "ip_claims row, retain=1"


def _retained(claim: IPClaim) -> RetainedAddress:
    return RetainedAddress(address=claim.ip, owner=claim.owner, detail=MARK)


class LocalRetention(LocalLoadBalancers):
    """AddressRetainer over the state file's VIP claims."""

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        return [_retained(claim) for claim in self._delete(service, keep=True)]

    def list_retained_addresses(self, cluster_name: str) -> Sequence[RetainedAddress]:
        """Retained claims whose owner has no balancer now."""
        self._read("list_ip_claims")
        claims = self.store.list_ip_claims()
        self._read("list_load_balancers")
        owners = {lb.service for lb in self.store.list_load_balancers()}
        return [_retained(c) for c in claims if c.retain and c.owner not in owners]

    def release_retained_address(self, cluster_name: str, address: str) -> bool:
        if address not in {kept.address for kept in self.list_retained_addresses(cluster_name)}:
            return False
        self._write("release_ip")
        return self.store.release_ip(address)
