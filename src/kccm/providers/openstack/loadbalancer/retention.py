"""The openstack provider's address retention (kccm's
:class:`~kccm.cloudprovider.interface.AddressRetainer`, docs/behaviour.md "Keeping a
balancer's address"): the balancer's floating IP.

Keeping rewrites the floating IP's description to :func:`retained_description` (owner
``namespace/name`` and cluster) before upstream's delete; that description no longer carries
upstream's "created by a cloud provider" mark, so the delete leaves the floating IP, as
``keep-floatingip`` does (which keeps working unchanged). A Service of the same
namespace/name carrying ``service.kccm.io/retain-address: "true"`` and asking for no address
gets it back (one floating IP listing, only for Services carrying kccm's annotation); one
asking for it in ``spec.loadBalancerIP`` gets it as upstream adopts any free floating IP. In
both cases the description is set back to upstream's, so a later plain delete releases it as
upstream would.
"""

from __future__ import annotations

from collections.abc import Sequence

from kccm.cloudprovider import RetainedAddress, Service
from kccm.cloudprovider.retention import retention_of
from kccm.providers.openstack.loadbalancer.names import fip_description, service_key
from kccm.providers.openstack.loadbalancer.neutron import Neutron, Obj

__all__ = ["RETAINED_MARK", "adopt_kept", "kept", "retained_description", "unmark"]

RETAINED_MARK = "kccm retained address of"


def retained_description(cluster_name: str, owner: str) -> str:
    return f"{RETAINED_MARK} {owner} from cluster {cluster_name}"


def _owner(fip: Obj, cluster_name: str) -> str | None:
    """The owner a retained floating IP of this cluster names, else None."""
    text = str(fip.get("description") or "")
    suffix = f" from cluster {cluster_name}"
    if not (text.startswith(RETAINED_MARK + " ") and text.endswith(suffix)):
        return None
    return text[len(RETAINED_MARK) + 1 : -len(suffix)]


def as_retained(fip: Obj, cluster_name: str) -> RetainedAddress:
    return RetainedAddress(
        address=str(fip.get("floating_ip_address", "")),
        owner=_owner(fip, cluster_name) or "",
        id=str(fip.get("id", "")),
        detail="floating IP description",
    )


def kept(neutron: Neutron, cluster_name: str, owner: str = "") -> list[Obj]:
    """Retained floating IPs of this cluster attached to nothing (of ``owner`` if given)."""
    found = []
    for fip in neutron.floating_ips():
        who = _owner(fip, cluster_name)
        if who is not None and not fip.get("port_id") and (not owner or who == owner):
            found.append(fip)
    return found


def mark(neutron: Neutron, cluster_name: str, service: Service, fip: Obj) -> Obj:
    body = {"floatingip": {"description": retained_description(cluster_name, service_key(service))}}
    return neutron.update_floating_ip(str(fip.get("id")), body)


def unmark(neutron: Neutron, cluster_name: str, service: Service, fip: Obj) -> None:
    """A retained floating IP taken back: upstream's description again."""
    if _owner(fip, cluster_name) is not None:
        body = {"floatingip": {"description": fip_description(cluster_name, service)}}
        neutron.update_floating_ip(str(fip.get("id")), body)


def adopt_kept(neutron: Neutron, cluster_name: str, service: Service, port_id: str) -> Obj | None:
    """For a Service asking for retention (its annotation): its own kept floating IP,
    attached to ``port_id`` and unmarked; None (and no call) for any other Service."""
    if not retention_of(service, False).keep:
        return None
    mine: Sequence[Obj] = kept(neutron, cluster_name, service_key(service))
    if not mine:
        return None
    fip = neutron.set_floating_ip_port(str(mine[0].get("id")), port_id)
    unmark(neutron, cluster_name, service, mine[0])
    return fip
