"""Which destinations the cluster's managed security rules may keep: upstream's retain pass
(cloud-provider-azure v1.36.5 ``pkg/provider/azure_loadbalancer.go`` ``reconcileSecurityGroup``,
its last step; ``pkg/provider/azure_loadbalancer_accesscontrol.go``
``listAvailableSecurityGroupDestinations``; ``pkg/provider/loadbalancer/accesscontrol.go``
``RetainSecurityGroup``; ``pkg/provider/securitygroup/securitygroup.go``
``RetainDestinationFromRules``).

Every reconcile of the security group (ensure, update, delete) ends by dropping, from each
managed rule (:func:`~.nsgrules.RuleHelper.retain_destinations`), every destination that is
none of: an ingress IP in the status of any Service, an address of any Service's
``azure-additional-public-ips``, an InternalIP of a Node the provider manages (not labelled
``kubernetes.azure.com/managed=false``), this Service's own balancer and additional IPs. So a
destination left by a Service deleted while no controller ran, or by a Node that left, goes at
the next reconcile of any Service; a rule left with no destination goes with it.

kccm keeps more in two cases: without a synced cluster view (a
provider used outside the daemon, or before the caches' first list) the pass is skipped, as an
empty view would prune every other Service's address; and the destinations this process put
in the group for a Service that still exists are kept even while that Service's status does
not show them yet (its status is written after the ensure returns, and the cache follows the
write later), where upstream's pass may take a concurrently ensured Service's address out.
And one where kccm keeps less: upstream skips a rule when the count of its destinations found
among the kept ones (with repeats: the Service's own address is listed twice, as its balancer
address and from its status) equals its count of destinations, so a rule with the Service's
address and exactly one stale address keeps both there; kccm compares sets and drops it.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterable, Iterator, Sequence

from kccm.cloudprovider import ClusterView, Node, Service
from kccm.cloudprovider.annotations import annotations_of
from kccm.providers.azure.loadbalancer.annotations import ADDITIONAL_PUBLIC_IPS

__all__ = ["EnsuredDestinations", "available_destinations", "retained_destinations"]

MANAGED_LABEL = "kubernetes.azure.com/managed"


def _address(text: object) -> str | None:
    """``netip.ParseAddr(text).String()``, or None when it does not parse."""
    try:
        return str(ipaddress.ip_address(str(text)))
    except ValueError:
        return None


def _additional_ips(service: Service) -> list[str]:
    """``loadbalancer.AdditionalPublicIPs``: all the annotation's addresses, or none when one
    does not parse (upstream drops the error and the list)."""
    text = annotations_of(service).get(ADDITIONAL_PUBLIC_IPS)
    if text is None:
        return []
    found = [_address(item) for item in str(text).strip().split(",")]
    return [] if None in found else [item for item in found if item is not None]


def _ingress_ips(service: Service) -> Iterator[str]:
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    for item in ingress:
        address = _address((item or {}).get("ip", ""))
        if address is not None:
            yield address


def _managed(node: Node) -> bool:
    """``isNodeManagedByCloudProvider``: no ``kubernetes.azure.com/managed=false`` label."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return str(labels.get(MANAGED_LABEL, "")).lower() != "false"


def _internal_ips(node: Node) -> Iterator[str]:
    for item in (node.get("status") or {}).get("addresses") or ():
        if item.get("type") == "InternalIP":
            address = _address(item.get("address", ""))
            if address is not None:
                yield address


def available_destinations(services: Iterable[Service], nodes: Iterable[Node]) -> set[str]:
    """``listAvailableSecurityGroupDestinations``."""
    found: set[str] = set()
    for service in services:
        found.update(_additional_ips(service))
        found.update(_ingress_ips(service))
    for node in nodes:
        if _managed(node):
            found.update(_internal_ips(node))
    return found


def _uid(service: Service) -> str:
    return str((service.get("metadata") or {}).get("uid") or "")


class EnsuredDestinations:
    """The destinations this process last put in the group for each Service (by UID)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_uid: dict[str, frozenset[str]] = {}

    def record(self, service: Service, destinations: Iterable[str]) -> None:
        with self._lock:
            self._by_uid[_uid(service)] = frozenset(destinations)

    def forget(self, service: Service) -> None:
        with self._lock:
            self._by_uid.pop(_uid(service), None)

    def of_existing(self, services: Sequence[Service]) -> set[str]:
        """Those of Services still in ``services``; the others are forgotten."""
        present = {_uid(service) for service in services}
        with self._lock:
            for uid in [uid for uid in self._by_uid if uid not in present]:
                del self._by_uid[uid]
            return {dst for dsts in self._by_uid.values() for dst in dsts}


def retained_destinations(
    view: ClusterView | None, own: Sequence[str], ensured: EnsuredDestinations
) -> frozenset[str] | None:
    """What the managed rules keep (see the module docstring); None: skip the pass."""
    if view is None or not view.has_synced():
        return None
    services = view.services()
    found = available_destinations(services, view.nodes())
    found.update(address for address in map(_address, own) if address is not None)
    found.update(ensured.of_existing(services))
    return frozenset(found)
