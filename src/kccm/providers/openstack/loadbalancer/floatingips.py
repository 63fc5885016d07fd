"""The floating IP in front of a balancer's VIP (upstream ``ensureFloatingIP``,
``deleteFIPIfCreatedByProvider``, ``createFloatingIP``, ``updateFloatingIP`` in
``pkg/openstack/loadbalancer.go`` v1.36.0).

1. A floating IP already on the VIP port is used (an internal Service detaches it and deletes
   it when kccm/OCCM made it, unless ``keep-floatingip``).
2. ``spec.loadBalancerIP`` names an existing, unattached floating IP: it is attached.
3. Otherwise one is created on the floating network (on the first matching subnet that has
   room, when a subnet pattern or tags are configured), with the description upstream looks
   for before deleting one.
Without a floating network the VIP address is published (upstream's "forcing to ensure an
internal load balancer service" warning).

One deliberate difference: detaching sends ``port_id: null``. Upstream's
``updateFloatingIP(fip, nil)`` goes through gophercloud's ``UpdateOpts{PortID: nil}``, whose
``omitempty`` drops the field: the PUT is ``{"floatingip": {}}`` and the floating IP stays
attached (and the PUT is sent again on every sync).
"""

from __future__ import annotations

import logging
from typing import Any

from kccm.cloudprovider import CloudProviderError, Service
from kccm.providers.openstack.api import OpenStackError
from kccm.providers.openstack.loadbalancer.events import FORCED_INTERNAL, occm_event
from kccm.providers.openstack.loadbalancer.names import (
    FIP_DESCRIPTION_MARK,
    fip_description,
    service_key,
)
from kccm.providers.openstack.loadbalancer.neutron import Neutron, Obj
from kccm.providers.openstack.loadbalancer.retention import adopt_kept, unmark
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["delete_fip_if_created_by_provider", "ensure_floating_ip", "release_floating_ip"]

log = logging.getLogger(__name__)


def _load_balancer_ip(service: Service) -> str:
    return str((service.get("spec") or {}).get("loadBalancerIP") or "")


def delete_fip_if_created_by_provider(neutron: Neutron, fip: Obj) -> bool:
    """Upstream ``deleteFIPIfCreatedByProvider``: delete it only if its description says a
    cloud provider created it; whether it was deleted."""
    if FIP_DESCRIPTION_MARK not in str(fip.get("description") or ""):
        return False
    log.info("Deleting floating IP %s", fip.get("floating_ip_address"))
    neutron.delete_floating_ip(str(fip.get("id")))
    return True


def _internal(neutron: Neutron, conf: ServiceConfig, fip: Obj | None) -> None:
    """An internal owner Service: the floating IP goes (deleted if ours, else detached)."""
    if fip is None:
        return
    deleted = False
    if not conf.annotations.keep_floating_ip.get(False):
        deleted = delete_fip_if_created_by_provider(neutron, fip)
    if not deleted:
        neutron.set_floating_ip_port(str(fip.get("id")), None)


def _adopt_requested(neutron: Neutron, address: str, port_id: str) -> Obj | None:
    """Second attempt: the floating IP ``spec.loadBalancerIP`` names, if it exists."""
    try:
        existing = neutron.floating_ips(floating_ip_address=address)
    except OpenStackError as err:
        raise CloudProviderError(
            f"failed when trying to get existing floating IP {address}, error: {err}"
        ) from err
    if not existing:
        return None
    fip = existing[0]
    if fip.get("port_id"):
        raise CloudProviderError(f"floating IP {address} is not available")
    return neutron.set_floating_ip_port(str(fip.get("id")), port_id)


def _create_on_matching_subnet(neutron: Neutron, conf: ServiceConfig, body: dict[str, Any]) -> Obj:
    spec = conf.public_subnet
    assert spec is not None
    candidates = spec.select(neutron.subnets(**spec.list_params(conf.public_network_id)))
    if not candidates:
        raise CloudProviderError(
            f"no subnet matching {spec} found for network {conf.public_network_id}"
        )
    last: Exception | None = None
    for subnet in candidates:
        try:
            return neutron.create_floating_ip({**body, "subnet_id": subnet.get("id")})
        except OpenStackError as err:
            log.info("cannot use subnet %s: %s", subnet.get("name"), err)
            last = err
    raise CloudProviderError(
        f"no free subnet matching {str(spec)!r} found for network {conf.public_network_id} "
        f"(last error {last})"
    )


def _create(
    neutron: Neutron, cluster: str, service: Service, conf: ServiceConfig, port_id: str
) -> Obj:
    """Third attempt: a new floating IP on the floating network."""
    address = _load_balancer_ip(service)
    body: dict[str, Any] = {
        "floating_network_id": conf.public_network_id,
        "port_id": port_id,
        "description": fip_description(cluster, service),
    }
    if not address and conf.public_subnet is not None and conf.public_subnet.matcher_configured():
        return _create_on_matching_subnet(neutron, conf, body)
    if conf.public_subnet is not None and conf.public_subnet.subnet_id:
        body["subnet_id"] = conf.public_subnet.subnet_id
    if address:
        body["floating_ip_address"] = address
    try:
        return neutron.create_floating_ip(body)
    except OpenStackError as err:
        raise CloudProviderError(f"error creating LB floatingip: {err}") from err


def ensure_floating_ip(
    neutron: Neutron, cluster: str, service: Service, lb: Obj, conf: ServiceConfig, owner: bool
) -> str:
    """Upstream ``ensureFloatingIP``: the address to publish."""
    port_id = str(lb.get("vip_port_id") or "")
    fip = neutron.floating_ip_of_port(port_id) if port_id else None
    if conf.internal and owner:
        _internal(neutron, conf, fip)
        return str(lb.get("vip_address", ""))
    if fip is None and not owner:
        raise CloudProviderError(
            "cannot attach a floating IP to a load balancer for a shared Service "
            f"{service_key(service)}, only owner Service can do that"
        )
    address = _load_balancer_ip(service)
    if fip is None and address:
        fip = _adopt_requested(neutron, address, port_id)
        if fip is not None:
            unmark(neutron, cluster, service, fip)
    if fip is None and not address:
        fip = adopt_kept(neutron, cluster, service, port_id)
    if fip is None:
        if conf.public_network_id:
            fip = _create(neutron, cluster, service, conf, port_id)
        else:
            occm_event(
                FORCED_INTERNAL,
                f"Floating network configuration not provided for Service {service_key(service)}"
                ", forcing to ensure an internal load balancer service",
            )
    if fip is not None:
        return str(fip.get("floating_ip_address", ""))
    return str(lb.get("vip_address", ""))


def release_floating_ip(neutron: Neutron, conf: ServiceConfig, lb: Obj) -> None:
    """The floating IP part of upstream ``ensureLoadBalancerDeleted``: delete the VIP port's
    floating IP if a cloud provider made it, unless ``keep-floatingip`` (a floating IP the
    user brought stays, attached to nothing once the port is gone)."""
    if conf.annotations.keep_floating_ip.get(False):
        return  # a value upstream cannot parse is false there too: deleted
    port_id = str(lb.get("vip_port_id") or "")
    if not port_id:
        return
    fip = neutron.floating_ip_of_port(port_id)
    if fip is not None:
        delete_fip_if_created_by_provider(neutron, fip)
