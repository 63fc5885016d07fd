"""A member of a share group leaving its group's balancer (:mod:`.sharing`): OCCM's shared
delete (upstream ``ensureLoadBalancerDeleted`` and ``deleteLoadBalancer`` in
``pkg/openstack/loadbalancer.go`` v1.36.0) with the group's reference count.

The balancer goes, with its floating IP (:func:`.floatingips.release_floating_ip`: only one a
cloud provider made, and not under ``keep-floatingip``), when this Service is its last user:
no other Service's name among the balancer's tags and no listener that is not this
Service's. Otherwise only the listeners tagged with this Service's name go (with their pools
and monitors, whatever ports the Service has now), then its tag on the balancer.
"""

from __future__ import annotations

import logging

from kccm.providers.openstack.loadbalancer.delete import delete_children, without_tag
from kccm.providers.openstack.loadbalancer.floatingips import release_floating_ip
from kccm.providers.openstack.loadbalancer.names import SERVICE_PREFIX
from kccm.providers.openstack.loadbalancer.neutron import Neutron
from kccm.providers.openstack.loadbalancer.octavia import ACTIVE, ERROR, LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["delete_member", "is_last_member"]

log = logging.getLogger(__name__)


def is_last_member(lb: LB, listeners: list[LB], lb_name: str) -> bool:
    """Whether the Service named ``lb_name`` is the last user of the group balancer ``lb``."""
    others = [t for t in lb.get("tags") or () if t != lb_name and t.startswith(SERVICE_PREFIX)]
    foreign = [li for li in listeners if lb_name not in (li.get("tags") or ())]
    return not others and not foreign


def delete_member(
    octavia: Octavia, neutron: Neutron, lb: LB, conf: ServiceConfig, cascade: bool
) -> None:
    """This Service's listeners, pools and monitors, its tag; the balancer and its floating
    IP with the last member. Idempotent."""
    if lb.get("provisioning_status") not in (ACTIVE, ERROR):
        lb = octavia.wait_active(str(lb["id"]))
    lb_id = str(lb["id"])
    listeners = octavia.listeners(lb_id)
    if is_last_member(lb, listeners, conf.lb_name):
        log.info("Last Service of share group balancer %s left: deleting it", lb_id)
        release_floating_ip(neutron, conf, lb)
        if cascade:
            octavia.delete_load_balancer(lb_id, cascade=True)
        else:
            delete_children(octavia, lb_id, listeners)
            octavia.delete_load_balancer(lb_id, cascade=False)
        return
    mine = [li for li in listeners if conf.lb_name in (li.get("tags") or ())]
    delete_children(octavia, lb_id, mine)
    octavia.update_tags(lb, lambda now: without_tag(now, conf.lb_name))
