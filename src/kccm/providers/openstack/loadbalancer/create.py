"""A new balancer in one POST (upstream ``createOctaviaLoadBalancer`` in
``pkg/openstack/loadbalancer.go`` v1.36.0).

The body names the balancer, describes the Service, carries its tag (Octavia >= 2.5), the
provider, flavor and zone, and the VIP: ``port-id``, else (external Services) the class's
subnet and network, else the configured ones (for internal Services the annotations win over
the class, as upstream); ``spec.loadBalancerIP`` is the VIP address for internal and IPv6
Services. Unless ``provider-requires-serial-api-calls``, it is fully populated: each port's
listener with its default pool, the members and the health monitor. Then it waits for
``ACTIVE``; a balancer that went to ``ERROR`` is deleted and the sync fails, to be retried.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError, Node, Service
from kccm.providers.openstack.config_sections import LoadBalancerOpts
from kccm.providers.openstack.loadbalancer.listeners import build_listener
from kccm.providers.openstack.loadbalancer.members import build_members
from kccm.providers.openstack.loadbalancer.monitors import build_monitor
from kccm.providers.openstack.loadbalancer.names import (
    lb_description,
    listener_name,
    monitor_name,
    pool_name,
)
from kccm.providers.openstack.loadbalancer.octavia import ERROR, LB, Octavia, OctaviaWaitError
from kccm.providers.openstack.loadbalancer.pools import build_pool, refuse_unknown_method
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["create_body", "create_load_balancer"]

log = logging.getLogger(__name__)


def _vip(body: dict[str, Any], conf: ServiceConfig) -> None:
    port_id = conf.annotations.port_id
    if port_id:
        body["vip_port_id"] = port_id
        return
    # Upstream reads the class here through svcConf.configClassName, which checkService sets
    # for external Services only: an internal Service's VIP is getSubnetID/getNetworkID's
    # (annotation, then class, then [LoadBalancer]), an external one's the class's first.
    found = None if conf.internal else conf.lb_class
    subnet = found.subnet_id if found is not None and found.subnet_id else conf.subnet_id
    network = found.network_id if found is not None and found.network_id else conf.network_id
    if subnet:
        body["vip_subnet_id"] = subnet
    if network:
        body["vip_network_id"] = network


def _listeners(
    octavia: Octavia,
    service: Service,
    nodes: Sequence[Node],
    conf: ServiceConfig,
    opts: LoadBalancerOpts,
    name: str,
) -> list[dict[str, Any]]:
    result = []
    for index, port in enumerate((service.get("spec") or {}).get("ports") or ()):
        listener = build_listener(octavia, port, conf, listener_name(index, name))
        pool = build_pool(
            listener["protocol"], service, conf, opts.lb_method, pool_name(index, name)
        )
        members = build_members(octavia, port, nodes, conf)
        if members:
            pool["members"] = members
        if conf.enable_monitor:
            pool["healthmonitor"] = build_monitor(octavia, conf, port, monitor_name(index, name))
        listener["default_pool"] = pool
        result.append(listener)
    return result


def create_body(
    octavia: Octavia,
    name: str,
    cluster: str,
    service: Service,
    nodes: Sequence[Node],
    conf: ServiceConfig,
    opts: LoadBalancerOpts,
    description: str = "",
) -> dict[str, Any]:
    """The ``loadbalancer`` object upstream's ``loadbalancers.CreateOpts`` serialises to
    (``description``: kccm's, for a share group's balancer; else upstream's)."""
    body: dict[str, Any] = {
        "name": name,
        "description": description or lb_description(cluster, service),
    }
    if opts.lb_provider:
        body["provider"] = opts.lb_provider
    if conf.support_tags:
        body["tags"] = [conf.lb_name]
    if conf.flavor_id:
        body["flavor_id"] = conf.flavor_id
    if conf.availability_zone:
        body["availability_zone"] = conf.availability_zone
    _vip(body, conf)
    address = str((service.get("spec") or {}).get("loadBalancerIP") or "")
    if address and (conf.internal or conf.ip_family == "IPv6"):
        body["vip_address"] = address
    if not opts.provider_requires_serial_api_calls:
        # Children are named after the Service (its own balancer's name; a share group's
        # balancer has another).
        children = conf.lb_name or name
        body["listeners"] = _listeners(octavia, service, nodes, conf, opts, children)
    return body


def create_load_balancer(
    octavia: Octavia,
    name: str,
    cluster: str,
    service: Service,
    nodes: Sequence[Node],
    conf: ServiceConfig,
    opts: LoadBalancerOpts,
    description: str = "",
) -> LB:
    """Create, wait for ACTIVE; ERROR -> delete it (cascade) and fail. An ``lb-method``
    Octavia would refuse for the new pools is refused first
    (:func:`.pools.refuse_unknown_method`)."""
    refuse_unknown_method(conf)
    body = create_body(octavia, name, cluster, service, nodes, conf, opts, description)
    log.info("Creating loadbalancer %s", name)
    created = octavia.create_load_balancer(body)
    if not conf.member_subnet_id:
        conf.member_subnet_id = str(created.get("vip_subnet_id") or "")
    lb_id = str(created.get("id"))
    try:
        return octavia.wait_active(lb_id)
    except OctaviaWaitError as err:
        if err.lb is None or err.lb.get("provisioning_status") != ERROR:
            raise
        try:
            octavia.delete_load_balancer(lb_id, cascade=True)
        except CloudProviderError as cleanup:
            raise CloudProviderError(
                f"loadbalancer {lb_id} is in ERROR state and there was an error when removing "
                f"it: {cleanup}"
            ) from err
        raise CloudProviderError(
            f"loadbalancer {lb_id} has gone into ERROR state, please check Octavia for details. "
            "Load balancer was deleted and its creation will be retried"
        ) from err
