"""The azure provider's ``LoadBalancer`` (cloud-provider-azure v1.36.5
``azure_loadbalancer.go`` ``GetLoadBalancer``, ``EnsureLoadBalancer``/``reconcileService``,
``UpdateLoadBalancer``, ``EnsureLoadBalancerDeleted``).

One balancer per cluster and kind, shared by every Service: ``<cluster>`` (or the config's
``loadBalancerName``) for public Services and ``<cluster>-internal`` for internal ones. An
ensure makes, in upstream's order: the public IP, the balancer (the Service's frontend,
probes and rules merged in by name), the pool members, the security group rules, the Service
taken off the other kind's balancer, the public IPs it no longer needs released.

Two Services changed at once never lose each other's parts: every write of a shared
resource (balancer, security group) is a read-compare-write with ``If-Match``
(:func:`~.armapi.read_modify_write`), and writes of one balancer or of the security group from
this process are serialised by a lock per resource, so a 412 is left for writers elsewhere.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from kccm.cloudprovider import (
    BalancerView,
    ClusterView,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    StillProvisioning,
    default_load_balancer_name,
)
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.providers.azure.loadbalancer import annotations as A
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations, read_annotations
from kccm.providers.azure.loadbalancer.armapi import (
    ATTEMPTS,
    ArmApi,
    PreconditionFailed,
    read_modify_write,
)
from kccm.providers.azure.loadbalancer.describe import balancer_view
from kccm.providers.azure.loadbalancer.frontends import (
    PublicIPs,
    internal_frontend,
    public_frontend,
    release_public_ips,
)
from kccm.providers.azure.loadbalancer.lbmerge import (
    apply_service,
    ensure_pool,
    ensure_tags,
    new_balancer,
    owned_frontends,
    remove_service,
)
from kccm.providers.azure.loadbalancer.lbrules import Json, expected_rules
from kccm.providers.azure.loadbalancer.names import LBSettings
from kccm.providers.azure.loadbalancer.nsgretain import (
    EnsuredDestinations,
    retained_destinations,
)
from kccm.providers.azure.loadbalancer.pools import PoolMembers, exclusion, pool_member_ids
from kccm.providers.azure.loadbalancer.retention import (
    PublicIPRetention,
    choose_service_pip,
    is_kept,
)
from kccm.providers.azure.loadbalancer.securitygroup import (
    node_addresses,
    reconcile_security_group,
)

__all__ = ["AzureLoadBalancers"]

log = logging.getLogger(__name__)


class AzureLoadBalancers(PublicIPRetention):
    """Service load balancers on Azure, as upstream's cloud-controller-manager makes them;
    address retention (:mod:`.retention`) on top."""

    def __init__(
        self,
        arm: ArmApi,
        settings: LBSettings,
        zones: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        """``zones``: the region's availability zones (the provider reads them at start,
        upstream's ``getRegionZonesBackoff``); new Standard public IPs and internal frontends
        get them."""
        self.arm = arm
        self.settings = settings
        self._zones = zones or (lambda: self._region_zones)
        self._region_zones: tuple[str, ...] = ()
        self.pools = PoolMembers(arm, settings)
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._view: ClusterView | None = None
        self._ensured = EnsuredDestinations()

    def use_zones(self, zones: Sequence[str]) -> None:
        """The region's zones, once the provider has read them (``syncRegionZonesMap``)."""
        self._region_zones = tuple(zones)

    def use_cluster_view(self, view: ClusterView) -> None:
        """Every Service and Node of the cluster: the security group's retain pass
        (:mod:`.nsgretain`) runs only with it."""
        self._view = view

    @property
    def cluster_view(self) -> ClusterView | None:
        return self._view

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(key.lower(), threading.Lock())
        with lock:
            yield

    # -- reads ------------------------------------------------------------------------------

    def backend_node_exclusion(self, service: Service) -> Callable[[Node], str | None]:
        """For ``kccm explain``: why a Node stays out of the pool (no cloud call)."""
        settings = self.settings
        return lambda node: exclusion(node, settings)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        """``GetLoadBalancerName``: ``cloudprovider.DefaultLoadBalancerName``."""
        return default_load_balancer_name(service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        """The Service's frontend on either balancer; exists also when only its public IP
        does (``existsPip``)."""
        ann = read_annotations(service, lenient=True)
        for internal in (ann.internal, not ann.internal):
            lb = self.arm.get(self.settings.lb_path(self._lb_name(cluster_name, internal)))
            status = self._status(lb, service, ann, internal) if lb is not None else None
            if status is not None:
                return status, True
        if ann.internal:
            return None, False
        pips = PublicIPs(self.arm, self.settings, ann)
        try:
            name = choose_service_pip(self.settings, cluster_name, service, ann, pips.all())[0]
        except InvalidServiceConfig:
            return None, False
        pip = pips.find(name)
        return None, pip is not None and not is_kept(pip, cluster_name)

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """For ``kccm explain``: the Service's rules on its balancer and the pool's members."""
        ann = read_annotations(service, lenient=True)
        for internal in (ann.internal, not ann.internal):
            lb = self.arm.get(self.settings.lb_path(self._lb_name(cluster_name, internal)))
            if lb is not None and owned_frontends(lb, service):
                addresses = [a for a in self._frontend_addresses(lb, service, internal) if a]
                return balancer_view(lb, service, cluster_name, ",".join(addresses))
        return None

    def _lb_name(self, cluster_name: str, internal: bool) -> str:
        return self.settings.balancer_name(cluster_name, internal)

    def _status(
        self, lb: Json, service: Service, ann: ServiceAnnotations, internal: bool
    ) -> LoadBalancerStatus | None:
        """``getServiceLoadBalancerStatus``: the frontend's address, then the additional
        public IPs."""
        addresses = [a for a in self._frontend_addresses(lb, service, internal) if a]
        if not addresses:
            return None
        ingress = [LoadBalancerIngress(ip=ip) for ip in [*addresses, *ann.additional_public_ips]]
        return LoadBalancerStatus(ingress=ingress)

    def _frontend_addresses(self, lb: Json, service: Service, internal: bool) -> list[str]:
        found: list[str] = []
        for fip in owned_frontends(lb, service):
            props = fip.get("properties") or {}
            if internal:
                found.append(str(props.get("privateIPAddress") or ""))
                continue
            pip_id = (props.get("publicIPAddress") or {}).get("id")
            pip = self.arm.get(str(pip_id)) if pip_id else None
            found.append(str(((pip or {}).get("properties") or {}).get("ipAddress") or ""))
        return found

    # -- ensure -----------------------------------------------------------------------------

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        if self.settings.unsupported:
            key, reason = self.settings.unsupported[0]
            raise InvalidServiceConfig(key, f"cloud config {key}: {reason}")
        ann = read_annotations(service)
        families = (service.get("spec") or {}).get("ipFamilies") or ()
        if any(str(family) != "IPv4" for family in families):
            raise InvalidServiceConfig(
                "spec.ipFamilies", "kccm's azure balancer is IPv4 only (no IPv6 or dual-stack)"
            )
        if ann.text(A.LB_MODE) is not None and self.settings.standard:
            warn_service(
                "IgnoredAnnotation",
                f"single standard load balancer doesn't work with annotation {A.LB_MODE}, "
                "would ignore it",
            )
        internal = ann.internal
        lb_name = self._lb_name(cluster_name, internal)
        pips = PublicIPs(self.arm, self.settings, ann)
        zones = list(self._zones()) if self.settings.standard else []
        if internal:
            frontend = internal_frontend(self.arm, self.settings, service, ann)
            if zones:
                frontend["zones"] = zones
        else:
            frontend = public_frontend(pips, cluster_name, service, ann, zones)[0]
        with self._locked(lb_name):
            lb = self._write_balancer(cluster_name, lb_name, service, ann, frontend)
            pool_id = self.settings.lb_child_id(lb_name, "backendAddressPools", cluster_name)
            if self.pools.reconcile(lb, cluster_name, pool_id, nodes):
                lb = self.arm.get(self.settings.lb_path(lb_name)) or lb
        status = self._status(lb, service, ann, internal)
        if status is None:
            raise StillProvisioning(f"load balancer {lb_name}: the frontend has no address yet")
        addresses = [item.ip for item in status.ingress]
        dsts = node_addresses(nodes) if ann.disable_floating_ip else addresses
        self._ensured.record(service, dsts)
        with self._locked(self.settings.nsg_path()):
            retain = retained_destinations(self._view, addresses, self._ensured)
            reconcile_security_group(
                self.arm, self.settings, service, ann, dsts, want_lb=True, retain=retain
            )
        self._remove_from(cluster_name, service, not internal)
        release_public_ips(pips, cluster_name, service, ann, want_lb=True)
        return status

    def _write_balancer(
        self,
        cluster_name: str,
        lb_name: str,
        service: Service,
        ann: ServiceAnnotations,
        frontend: Json,
    ) -> Json:
        settings = self.settings
        frontend_id = settings.lb_child_id(lb_name, "frontendIPConfigurations", frontend["name"])
        pool_id = settings.lb_child_id(lb_name, "backendAddressPools", cluster_name)
        expected = expected_rules(
            service, ann, settings, lb_name=lb_name, frontend_id=frontend_id, pool_id=pool_id
        )

        def change(current: Json | None) -> Json | None:
            lb = copy.deepcopy(current) if current is not None else new_balancer(settings, lb_name)
            changed = current is None
            changed = ensure_pool(lb, cluster_name) or changed
            changed = apply_service(lb, service, frontend, expected) or changed
            changed = ensure_tags(lb, settings) or changed
            return lb if changed else None

        lb, _ = read_modify_write(self.arm, settings.lb_path(lb_name), change)
        assert lb is not None  # written or read
        return lb

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """``UpdateLoadBalancer``: the whole ensure, when the Service has a balancer."""
        if self.get_load_balancer(cluster_name, service)[1]:
            self.ensure_load_balancer(cluster_name, service, nodes)

    # -- delete -----------------------------------------------------------------------------

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        ann = read_annotations(service, lenient=True)
        addresses: list[str] = []
        for internal in (ann.internal, not ann.internal):
            lb = self.arm.get(self.settings.lb_path(self._lb_name(cluster_name, internal)))
            if lb is not None:
                addresses += [a for a in self._frontend_addresses(lb, service, internal) if a]
        dsts = [*addresses, *ann.additional_public_ips]
        self._ensured.forget(service)
        with self._locked(self.settings.nsg_path()):
            retain = retained_destinations(self._view, dsts, self._ensured)
            reconcile_security_group(
                self.arm, self.settings, service, ann, dsts, want_lb=False, retain=retain
            )
        for internal in (ann.internal, not ann.internal):
            self._remove_from(cluster_name, service, internal)
        pips = PublicIPs(self.arm, self.settings, ann)
        release_public_ips(pips, cluster_name, service, ann, want_lb=False)

    def _remove_from(self, cluster_name: str, service: Service, internal: bool) -> None:
        """The Service off one balancer; a balancer left without frontends is deleted, its
        scale sets out of its pool first (``cleanOrphanedLoadBalancer``,
        ``safeDeleteLoadBalancer``)."""
        lb_name = self._lb_name(cluster_name, internal)
        path = self.settings.lb_path(lb_name)
        with self._locked(lb_name):
            for _ in range(ATTEMPTS):
                current = self.arm.get(path)
                if current is None:
                    return
                lb = copy.deepcopy(current)
                if not remove_service(lb, service):
                    return
                if (lb.get("properties") or {}).get("frontendIPConfigurations"):
                    try:
                        self.arm.put(path, lb, if_match=current.get("etag"))
                    except PreconditionFailed:
                        continue
                    return
                self._delete_balancer(cluster_name, lb_name, current)
                return
            raise PreconditionFailed(f"{path}: still changing after {ATTEMPTS} attempts")

    def _delete_balancer(self, cluster_name: str, lb_name: str, lb: Json) -> None:
        """``safeDeleteLoadBalancer``: scale set VMs and models leave the pool first (ARM
        refuses otherwise); interfaces are left to ARM, which drops their references to a
        deleted balancer's pools (upstream empties the pool list for availability sets)."""
        pool_id = self.settings.lb_child_id(lb_name, "backendAddressPools", cluster_name)
        members = [
            m for m in pool_member_ids(lb, cluster_name) if "/virtualmachinescalesets/" in m.lower()
        ]
        if members:
            self.pools.leave(members, pool_id, scale_sets=True)
        log.info("azure: deleting load balancer %s (no frontends left)", lb_name)
        self.arm.delete(self.settings.lb_path(lb_name))
