"""The local provider's LoadBalancer: VIP claims and ``load_balancers`` rows, read-compare-write."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    LoadBalancerStatus,
    Node,
    Service,
    default_load_balancer_name,
)
from kccm.providers.local.backendsets import NodeBackends
from kccm.providers.local.base import LocalBase
from kccm.providers.local.compare import (
    backends_are_current,
    balancer_is_current,
    nothing_to_delete,
)
from kccm.providers.local.config import LocalCloudConfig
from kccm.providers.local.desired import (
    LocalInvalidService,
    LocalLoadBalancerError,
    LocalPoolExhausted,
    backends_of,
    desired_load_balancer,
    retains_ip,
    service_key_of,
    spec_of,
    status_of,
)
from kccm.providers.local.store import (
    IPClaim,
    IPUnavailable,
    LocalStore,
    PoolExhausted,
)

__all__ = ["LocalLoadBalancers"]

_log = logging.getLogger(__name__)


def _wrote(operation: str, balancer: str, outcome: str) -> None:
    """A debug line (``-v=4``, or ``--vmodule=balancers=4``) once a balancer's write has
    returned (committed): which process changed which balancer, when. Several daemons may
    share one state file (leader election picks the one that acts), so their logs are the
    ledger of who wrote what (``bench/chaos.py`` checks that only the leader did)."""
    _log.debug("state file write %s %s %s", operation, balancer, outcome)


class LocalLoadBalancers(LocalBase):
    """LoadBalancer: a VIP per Service from the pool and the row the data plane serves."""

    def __init__(self, store: LocalStore, config: LocalCloudConfig | None = None) -> None:
        super().__init__(store, config)
        self._backends_of = NodeBackends(backends_of)
        """:func:`backends_of`, once per node-set version (the service controller's tuple)."""

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        self._read("find_load_balancer")
        record = self.store.find_load_balancer(default_load_balancer_name(service))
        return (status_of(record), True) if record is not None else (None, False)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Read the row and the claim; write (claim and row, one transaction) only when they
        differ from what the Service, the nodes and the config ask for."""
        return self._ensure(service, nodes, self._backends_of(nodes))

    def _ensure(
        self,
        service: Service,
        nodes: Sequence[Node],
        backends: Sequence[Mapping[str, Any]],
        *,
        claimant: str | None = None,
    ) -> LoadBalancerStatus:
        """``claimant``: who claims the VIP (a share group, :mod:`.sharing`); the Service
        itself by default."""
        desired = desired_load_balancer(
            service,
            nodes,
            health_check_mode=self.config.global_.health_check_mode,
            backends=backends,
        )
        requested = str(spec_of(service).get("loadBalancerIP") or "") or None
        retain = claimant is None and retains_ip(service)
        self._read("describe_load_balancer")
        current, claims = self.store.describe_load_balancer(
            desired.name, claimant or desired.service
        )
        if balancer_is_current(current, claims, desired, requested_ip=requested, retain=retain):
            assert current is not None
            return status_of(current)
        self._write("put_load_balancer")
        try:
            record = self.store.ensure_load_balancer(
                desired,
                candidates=self.pool.addresses,
                requested_ip=requested,
                in_pool=self.pool.__contains__,
                retain=retain,
                claimant=claimant,
            )
        except PoolExhausted as err:
            raise LocalPoolExhausted(f"{err} (pool {self.pool})") from err
        except IPUnavailable as err:
            raise LocalInvalidService("spec.loadBalancerIP", f"{err} (pool {self.pool})") from err
        _wrote("put_load_balancer", record.name, f"generation={record.generation}")
        return status_of(record)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Read the row; rewrite its backends only when they differ."""
        self._update(service, self._backends_of(nodes))

    def _update(self, service: Service, backends: Sequence[Mapping[str, Any]]) -> None:
        name = default_load_balancer_name(service)
        self._read("find_load_balancer")
        current = self.store.find_load_balancer(name)
        if current is not None and backends_are_current(current, backends):
            return
        if current is not None:
            self._write("update_backends")
        if current is None or (updated := self.store.update_backends(name, backends)) is None:
            raise LocalLoadBalancerError(
                f"load balancer {name} of {service_key_of(service)} is gone"
            )
        _wrote("update_backends", name, f"generation={updated.generation}")

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        self._delete(service, keep=retains_ip(service))

    def _delete(
        self, service: Service, *, keep: bool, claimant: str | None = None
    ) -> list[IPClaim]:
        """Delete the Service's row; free its claim unless ``keep`` (then it is marked
        retained) or another row uses it (a share group's, ``claimant``). Returns the claims
        the Service (or its group) held."""
        name, owner = default_load_balancer_name(service), claimant or service_key_of(service)
        self._read("describe_load_balancer")
        current, claims = self.store.describe_load_balancer(name, owner)
        if nothing_to_delete(current, claims, keep_claim=keep, shared=claimant is not None):
            return claims
        self._write("delete_load_balancer")
        deleted = self.store.delete_load_balancer(name, owner, keep_claim=keep)
        _wrote("delete_load_balancer", name, f"deleted={deleted}")
        return claims
