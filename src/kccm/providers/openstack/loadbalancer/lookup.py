"""Finding a Service's balancer (upstream ``getLoadbalancerByName`` in
``pkg/openstack/loadbalancer.go`` and ``GetLoadbalancerByID`` in
``pkg/util/openstack/loadbalancer.go`` v1.36.0).

By name, then by the legacy name (``a`` + UID) when nothing has the new one; balancers being
deleted (``DELETED``, ``PENDING_DELETE``) do not count; two candidates are an error.
"""

from __future__ import annotations

from kccm.cloudprovider import CloudProviderError, Service
from kccm.providers.openstack.api import OpenStackNotFound
from kccm.providers.openstack.loadbalancer.names import legacy_name, load_balancer_name
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia

__all__ = ["by_id", "by_name", "find_for_service"]

_GONE = frozenset({"DELETED", "PENDING_DELETE"})


def by_name(octavia: Octavia, name: str, legacy: str) -> LB | None:
    """Upstream ``getLoadbalancerByName`` (``None`` for its ``ErrNotFound``)."""
    found = octavia.list_load_balancers(name=name)
    if not found and legacy:
        found = octavia.list_load_balancers(name=legacy)
    valid = [lb for lb in found if lb.get("provisioning_status") not in _GONE]
    if len(valid) > 1:
        raise CloudProviderError(f"multiple load balancers named {name!r} or {legacy!r}")
    return valid[0] if valid else None


def by_id(octavia: Octavia, lb_id: str) -> LB | None:
    try:
        return octavia.get_load_balancer(lb_id)
    except OpenStackNotFound:
        return None


def find_for_service(octavia: Octavia, cluster: str, service: Service, lb_id: str) -> LB | None:
    """The balancer of ``lb_id`` (the ``load-balancer-id`` annotation), else by name (upstream
    ``GetLoadBalancer`` and ``ensureLoadBalancerDeleted``)."""
    if lb_id:
        return by_id(octavia, lb_id)
    return by_name(octavia, load_balancer_name(cluster, service), legacy_name(service))
