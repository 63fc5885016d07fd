"""Deleting a Service's balancer (upstream ``ensureLoadBalancerDeleted`` and
``deleteLoadBalancer`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

A balancer OCCM/kccm made (its name starts with ``kube_service_``, or is the legacy
``a``+UID name: upstream leaves those behind) that no other Service
shares is deleted — with ``cascade`` by default, else monitors, pools, listeners and then the
balancer — after its floating IP, unless ``keep-floatingip`` or the floating IP was not made
by a cloud provider. A shared balancer, or one the user brought, loses only this Service's
listeners, pools and monitors and its tag. The Service's security group goes in every case,
first (see :func:`delete_for_service`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kccm.cloudprovider import Service
from kccm.providers.openstack.loadbalancer.floatingips import release_floating_ip
from kccm.providers.openstack.loadbalancer.listeners import listener_key, listener_map
from kccm.providers.openstack.loadbalancer.names import SERVICE_PREFIX, legacy_name
from kccm.providers.openstack.loadbalancer.neutron import Neutron
from kccm.providers.openstack.loadbalancer.octavia import ACTIVE, ERROR, LB, Octavia
from kccm.providers.openstack.loadbalancer.secgroups import ensure_security_group_deleted
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["delete_children", "delete_for_service", "delete_load_balancer"]

log = logging.getLogger(__name__)


def _service_listeners(octavia: Octavia, lb: LB, service: Service, conf: ServiceConfig) -> list[LB]:
    current = listener_map(octavia.listeners(str(lb["id"])))
    chosen = []
    for port in (service.get("spec") or {}).get("ports") or ():
        listener = current.get(listener_key(port, conf))
        if listener is not None and conf.lb_name in (listener.get("tags") or ()):
            chosen.append(listener)
    return chosen


def delete_children(octavia: Octavia, lb_id: str, listeners: Sequence[LB]) -> None:
    """The listeners' monitors, then their pools and the listeners."""
    pools = [octavia.pool_of_listener(lb_id, str(listener["id"])) for listener in listeners]
    for pool in pools:
        if pool is not None and pool.get("healthmonitor_id"):
            octavia.delete_health_monitor(lb_id, str(pool["healthmonitor_id"]))
    for listener, pool in zip(listeners, pools, strict=True):
        if pool is not None:
            octavia.delete_pool(lb_id, str(pool["id"]))
        octavia.delete_listener(lb_id, str(listener["id"]))


def delete_load_balancer(
    octavia: Octavia, lb: LB, service: Service, conf: ServiceConfig, whole: bool, cascade: bool
) -> None:
    """Upstream ``deleteLoadBalancer``."""
    lb_id = str(lb["id"])
    if whole and cascade:
        log.info("Deleting load balancer %s", lb_id)
        octavia.delete_load_balancer(lb_id, cascade=True)
        return
    listeners = (
        octavia.listeners(lb_id) if whole else _service_listeners(octavia, lb, service, conf)
    )
    delete_children(octavia, lb_id, listeners)
    if whole:
        octavia.delete_load_balancer(lb_id, cascade=False)


def delete_for_service(
    octavia: Octavia,
    neutron: Neutron,
    lb: LB | None,
    service: Service,
    conf: ServiceConfig,
    cascade: bool,
) -> None:
    """Upstream ``ensureLoadBalancerDeleted`` once the balancer is found (``None``: gone)."""
    if lb is None:
        ensure_security_group_deleted(neutron, service)  # kccm: a leftover group still goes
        return
    if lb.get("provisioning_status") not in (ACTIVE, ERROR):
        lb = octavia.wait_active(str(lb["id"]))  # upstream fails "immutable status" instead
    name = str(lb.get("name", ""))
    # kccm: the legacy a+UID name is this Service's too (upstream leaves such a balancer).
    owned = name.startswith(SERVICE_PREFIX) or name == legacy_name(service)
    tags = list(lb.get("tags") or ()) if conf.support_tags else []
    tagged = conf.lb_name in tags
    shared = any(t != conf.lb_name and t.startswith(SERVICE_PREFIX) for t in tags)
    whole = owned and not shared
    # kccm: the group goes first (upstream: last). The service controller only calls a
    # delete while get_load_balancer finds the balancer, so a group whose removal failed
    # after the balancer was gone would never be retried.
    ensure_security_group_deleted(neutron, service)
    if whole:
        release_floating_ip(neutron, conf, lb)
    delete_load_balancer(octavia, lb, service, conf, whole, cascade)
    if not whole and tagged:
        octavia.update_tags(lb, lambda now: without_tag(now, conf.lb_name))


def without_tag(tags: list[str], name: str) -> list[str] | None:
    """The tag list without ``name`` (``[""]`` for none left: an empty list would not
    change the tags); ``None`` when ``name`` is not there."""
    if name not in tags:
        return None
    return [t for t in tags if t != name] or [""]
