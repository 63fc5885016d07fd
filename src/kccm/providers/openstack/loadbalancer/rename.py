"""A changed ``--cluster-name``: the balancer a Service's ``load-balancer-id`` names is renamed,
children first (upstream ``pkg/openstack/loadbalancer_rename.go`` v1.36.0:
``lbHasOldClusterName``, ``replaceClusterName``, ``renameLoadBalancer``)."""

from __future__ import annotations

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.loadbalancer.names import (
    LISTENER_PREFIX,
    MONITOR_PREFIX,
    POOL_PREFIX,
    SERVICE_PREFIX,
    cluster_name_of,
    cut255,
)
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia

__all__ = ["has_old_cluster_name", "rename_load_balancer", "replace_cluster_name"]


def has_old_cluster_name(lb: LB, cluster: str) -> bool:
    """Upstream ``lbHasOldClusterName``: an OCCM name with another cluster in it."""
    name = str(lb.get("name", ""))
    return name.startswith(SERVICE_PREFIX) and cluster_name_of(name) != cluster


def replace_cluster_name(old: str, new: str, name: str) -> str:
    """Upstream ``replaceClusterName``."""
    found = name.startswith(SERVICE_PREFIX)
    rest = name.removeprefix(SERVICE_PREFIX).replace(old, new, 1)
    return cut255(SERVICE_PREFIX + rest if found else rest)


def _retag(tags: list[str], cluster: str) -> list[str]:
    result = []
    for tag in tags:
        old = cluster_name_of(tag)
        result.append(replace_cluster_name(old, cluster, tag) if old and old != cluster else tag)
    return result


def _rename_pool(octavia: Octavia, lb_id: str, pool: LB, cluster: str) -> str:
    """The pool (and its monitor first); returns the pool's old cluster name, which upstream
    then uses for the listener too."""
    old = cluster_name_of(str(pool.get("name", "")), f"{POOL_PREFIX}[0-9]+_")
    if old == cluster:
        return old
    monitor_id = str(pool.get("healthmonitor_id") or "")
    if monitor_id:
        monitor = octavia.health_monitor(monitor_id)
        name = str(monitor.get("name", ""))
        old_monitor = cluster_name_of(name, f"{MONITOR_PREFIX}[0-9]+_")
        if old_monitor != cluster:
            new_name = replace_cluster_name(old_monitor, cluster, name)
            octavia.update_health_monitor(lb_id, monitor_id, {"name": new_name})
    new_pool = replace_cluster_name(old, cluster, str(pool.get("name", "")))
    octavia.update_pool(lb_id, str(pool["id"]), {"name": new_pool})
    return old


def rename_load_balancer(octavia: Octavia, lb: LB, lb_name: str, cluster: str) -> LB:
    """Upstream ``renameLoadBalancer``: listeners (with their pool and monitor), then the
    balancer's name and tags."""
    lb_id = str(lb["id"])
    for listener in octavia.listeners(lb_id):
        name = str(listener.get("name", ""))
        if not name.startswith(LISTENER_PREFIX):
            continue
        old = cluster_name_of(name, f"{LISTENER_PREFIX}[0-9]+_")
        if old == cluster:
            continue
        pool = octavia.pool_of_listener(lb_id, str(listener["id"]))
        if pool is None:
            raise CloudProviderError(f"no pool found for listener {listener['id']}")
        old = _rename_pool(octavia, lb_id, pool, cluster)
        changes = {
            "name": replace_cluster_name(old, cluster, name),
            "tags": _retag(list(listener.get("tags") or ()), cluster),
        }
        octavia.update_listener(lb_id, str(listener["id"]), changes)
    return octavia.update_tags(lb, lambda tags: _retag(tags, cluster), name=lb_name)
