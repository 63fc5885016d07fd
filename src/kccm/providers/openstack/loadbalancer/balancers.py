"""Service load balancers through Octavia, with floating IPs (upstream ``LbaasV2`` in
``pkg/openstack/loadbalancer.go`` v1.36.0: ``GetLoadBalancer``, ``GetLoadBalancerName``,
``ensureOctaviaLoadBalancer``, ``updateOctaviaLoadBalancer``, ``ensureLoadBalancerDeleted``).

One balancer per Service, ``kube_service_<cluster>_<namespace>_<name>`` (the legacy
``a``+UID name is still found), tagged with that name, created fully populated in one POST
and waited for. Ensure and update are read-compare-write: they read the balancer, its
listeners, pools, members, monitors and floating IP, compare them with what the Service and
the nodes ask for (:mod:`.svcconf`, with the annotations read once by :mod:`.annotations`)
and write only the difference, so an unchanged Service costs no mutating call and anything
removed behind kccm's back is made again. The
``load-balancer-id`` and ``load-balancer-address`` annotations are written back through the
:class:`~.servicepatch.ServicePatcher`, exactly when upstream writes them. An ensure or a
delete holds its balancer's lock (:mod:`.locks`) from the read its decisions rest on to its
last write, so Services sharing a balancer take turns.

Differences from upstream (docs/providers/openstack.md): a balancer in ``PENDING_*`` is
waited for instead of failing the sync; an annotation value upstream cannot parse gives
upstream's default too, but with a ``Warning`` Event naming it (:mod:`.annotations`); an
``lb-method`` Octavia does not know is refused before any write only where a pool would be
made (on a pool that exists it is upstream's Warning and the sync goes on, :mod:`.pools`); a
``load-balancer-id`` whose balancer is gone is looked up by name (and made again) instead of
failing for ever.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from kccm.cloudprovider import (
    BalancerView,
    CloudProviderError,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    NodeExclusion,
    RetainedAddress,
    Service,
)
from kccm.providers.openstack.api import OpenStackAPI
from kccm.providers.openstack.config_sections import LoadBalancerOpts, OpenStackConfig
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer import events as ev
from kccm.providers.openstack.loadbalancer.annotations import read_annotations
from kccm.providers.openstack.loadbalancer.classes import Classes
from kccm.providers.openstack.loadbalancer.create import create_load_balancer
from kccm.providers.openstack.loadbalancer.delete import delete_for_service
from kccm.providers.openstack.loadbalancer.describe import balancer_view
from kccm.providers.openstack.loadbalancer.drain import OctaviaDraining
from kccm.providers.openstack.loadbalancer.events import occm_event
from kccm.providers.openstack.loadbalancer.floatingips import ensure_floating_ip
from kccm.providers.openstack.loadbalancer.keymanager import KeyManager
from kccm.providers.openstack.loadbalancer.listeners import (
    check_listener_ports,
    delete_service_listeners,
    ensure_listener,
    listener_key,
    listener_map,
)
from kccm.providers.openstack.loadbalancer.locks import BalancerLocks
from kccm.providers.openstack.loadbalancer.lookup import by_id, by_name, find_for_service
from kccm.providers.openstack.loadbalancer.monitors import ensure_monitor
from kccm.providers.openstack.loadbalancer.names import (
    SERVICE_PREFIX,
    legacy_name,
    listener_name,
    load_balancer_name,
    monitor_name,
    pool_name,
    service_key,
)
from kccm.providers.openstack.loadbalancer.neutron import Neutron, Obj
from kccm.providers.openstack.loadbalancer.nodes import filter_nodes, node_exclusion
from kccm.providers.openstack.loadbalancer.octavia import ACTIVE, LB, Octavia
from kccm.providers.openstack.loadbalancer.pools import ensure_pool
from kccm.providers.openstack.loadbalancer.rename import has_old_cluster_name, rename_load_balancer
from kccm.providers.openstack.loadbalancer.retention import as_retained, kept, mark
from kccm.providers.openstack.loadbalancer.secgroups import (
    ensure_security_group,
    ensure_security_group_deleted,
)
from kccm.providers.openstack.loadbalancer.servicepatch import ServicePatcher, annotation_patch
from kccm.providers.openstack.loadbalancer.svcconf import (
    ServiceConfig,
    config_for_delete,
    config_for_ensure,
    config_for_update,
)
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["OctaviaLoadBalancers"]

log = logging.getLogger(__name__)


def _ports(service: Service) -> Sequence[Mapping[str, Any]]:
    return (service.get("spec") or {}).get("ports") or ()


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


class OctaviaLoadBalancers(OctaviaDraining):
    """kccm's :class:`~kccm.cloudprovider.LoadBalancer` for OpenStack (plain ``def`` methods:
    the framework runs them in its thread pool)."""

    def __init__(
        self,
        api: OpenStackAPI,
        config: OpenStackConfig,
        clock: Clock = REAL_CLOCK,
        patcher: ServicePatcher | None = None,
    ) -> None:
        self.opts: LoadBalancerOpts = config.load_balancer
        self.classes: Classes = config.load_balancer_classes
        self.octavia = Octavia(api, clock, self.opts.lb_provider)
        self.neutron = Neutron(api)
        self.keymanager = KeyManager(api, self.opts.container_store)
        self.metrics = api.metrics
        self.patcher = patcher
        self.locks = BalancerLocks(clock=clock, on_waited=self.metrics.waited)
        """Ensures and deletes of one balancer take turns (:mod:`.locks`); the wait is left out
        of the reconcile duration metric."""

    def set_service_patcher(self, patcher: ServicePatcher | None) -> None:
        """Where the ``load-balancer-id``/``-address`` annotations go (``initialize``)."""
        self.patcher = patcher

    # -- reads -------------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        """Upstream ``GetLoadBalancerName``."""
        return load_balancer_name(cluster_name, service)

    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        """BackendNodeSelector: Nodes the node selector leaves out of the pools."""
        return node_exclusion(read_annotations(service), self.opts.node_selector)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        """Upstream ``GetLoadBalancer``: the VIP port's floating IP, else the VIP."""
        lb = find_for_service(self.octavia, cluster_name, service, read_annotations(service).lb_id)
        if lb is None:
            return None, False
        port_id = str(lb.get("vip_port_id") or "")
        if not port_id:
            return LoadBalancerStatus(), True
        fip = self.neutron.floating_ip_of_port(port_id)
        address = str(fip.get("floating_ip_address")) if fip else str(lb.get("vip_address", ""))
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=address)]), True

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """kccm's optional describe (``kccm explain``): the balancer, its listeners and the
        health of their members from Octavia's status tree (:mod:`.describe`)."""
        lb = find_for_service(self.octavia, cluster_name, service, read_annotations(service).lb_id)
        return None if lb is None else balancer_view(self.octavia, lb)

    # -- ensure ------------------------------------------------------------------------------

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """Upstream ``EnsureLoadBalancer``; the annotations are patched even on failure."""
        with self.metrics.reconcile("loadbalancer_ensure"):
            written: dict[str, str] = {}
            try:
                status = self._ensure(cluster_name, service, nodes, written)
            except Exception:
                try:
                    self._patch(service, written)
                except Exception as err:  # the ensure's own error is the one to report
                    log.warning(
                        "Service %s: annotations not written: %s", service_key(service), err
                    )
                raise
            self._patch(service, written)
            return status

    def _patch(self, service: Service, written: Mapping[str, str]) -> None:
        changed = annotation_patch(service, written)
        if changed and self.patcher is not None:
            self.patcher.patch_annotations(service, changed)

    def _existing_by_id(
        self, conf: ServiceConfig, cluster: str, service: Service
    ) -> tuple[LB | None, bool]:
        """The annotated balancer and whether this Service owns it (upstream's shared-LB
        checks); ``None`` when it is gone."""
        lb = by_id(self.octavia, conf.lb_id)
        if lb is None:
            log.warning(
                "load balancer %s of Service %s is gone; looking it up by name",
                conf.lb_id,
                service_key(service),
            )
            return None, True
        if has_old_cluster_name(lb, cluster):
            occm_event(
                ev.RENAME,
                f"Loadbalancer {lb['id']} has a name of {lb.get('name')} with incorrect "
                f"cluster-name component. Renaming it to {conf.lb_name}.",
            )
            lb = rename_load_balancer(self.octavia, lb, conf.lb_name, cluster)
        owner = lb.get("name") == conf.lb_name
        if not conf.support_tags and not owner:
            raise CloudProviderError(
                "shared load balancer is only supported with the tag feature in the cloud load "
                "balancer service"
            )
        if conf.support_tags and not owner:
            tags = list(lb.get("tags") or ())
            shared = sum(1 for t in tags if t.startswith(SERVICE_PREFIX))
            if conf.lb_name not in tags and shared + 1 > self.opts.max_shared_lb:
                raise CloudProviderError(
                    f"load balancer {lb['id']} already shared with {shared} Services"
                )
            if conf.internal:
                raise CloudProviderError("internal Service cannot share a load balancer")
        return lb, owner

    def _find_or_create(
        self, conf: ServiceConfig, cluster: str, service: Service, nodes: Sequence[Node]
    ) -> tuple[LB, bool, bool]:
        """(balancer, owner, created)."""
        if conf.lb_id:
            lb, owner = self._existing_by_id(conf, cluster, service)
            if lb is not None:
                return lb, owner, False
        lb = by_name(self.octavia, conf.lb_name, legacy_name(service))
        if lb is not None:
            return lb, True, False
        return (
            create_load_balancer(
                self.octavia, conf.lb_name, cluster, service, nodes, conf, self.opts
            ),
            True,
            True,
        )

    def _turn(self, turn: ExitStack, locked: str, lb: LB | None) -> LB | None:
        """``lb`` as read while holding its lock: as found when ``locked`` (the lock held
        before the lookup, the ``load-balancer-id``) is its ID, else read again once its
        lock is held (``None``: it went meanwhile)."""
        if lb is None or str(lb["id"]) == locked:
            return lb
        turn.enter_context(self.locks.hold(str(lb["id"])))
        return by_id(self.octavia, str(lb["id"]))

    def _ensure(
        self, cluster: str, service: Service, nodes: Sequence[Node], written: dict[str, str]
    ) -> LoadBalancerStatus:
        conf = config_for_ensure(
            service, nodes, self.opts, self.classes, self.octavia, self.neutron, self.keymanager
        )
        members = filter_nodes(nodes, conf.node_selectors)
        conf.lb_name = load_balancer_name(cluster, service)
        with ExitStack() as turn:
            if conf.lb_id:
                turn.enter_context(self.locks.hold(conf.lb_id))
            found, owner, created = self._find_or_create(conf, cluster, service, members)
            lb = found if created else self._turn(turn, conf.lb_id, found)
            if lb is None:
                raise CloudProviderError(f"load balancer {found['id']} went away; trying again")
            return self._ensure_found(lb, owner, created, cluster, service, members, conf, written)

    def _ensure_found(
        self,
        lb: LB,
        owner: bool,
        created: bool,
        cluster: str,
        service: Service,
        members: Sequence[Node],
        conf: ServiceConfig,
        written: dict[str, str],
    ) -> LoadBalancerStatus:
        """The rest of upstream ``ensureOctaviaLoadBalancer``, holding the balancer's lock."""
        written[ann.LB_ID] = str(lb["id"])
        if lb.get("provisioning_status") != ACTIVE:
            lb = self.octavia.wait_active(str(lb["id"]))
        listeners = self.octavia.listeners(str(lb["id"]))  # upstream reads them even after create
        if not created or self.opts.provider_requires_serial_api_calls:
            self._ensure_children(lb, listeners, owner, service, members, conf)
        address = str(lb.get("vip_address", ""))
        if _is_ipv6(address):
            occm_event(
                ev.FLOATING_IP_SKIPPED,
                f"Floating IP not supported for IPv6 Service {service_key(service)}. Using IPv6 "
                f"address instead {address}.",
            )
        else:
            address = ensure_floating_ip(self.neutron, cluster, service, lb, conf, owner)
        written[ann.ADDRESS] = address
        if conf.support_tags:
            self.octavia.update_tags(lb, lambda tags: with_tag(tags, conf.lb_name))
        status = self._status(service, conf, address)
        if self.opts.manage_security_groups:
            ensure_security_group(
                self.neutron, cluster, service, members, conf, self.opts.lb_provider
            )
        else:
            ensure_security_group_deleted(self.neutron, service)
        return status

    def _ensure_children(
        self,
        lb: LB,
        leftovers: list[LB],
        owner: bool,
        service: Service,
        nodes: Sequence[Node],
        conf: ServiceConfig,
    ) -> None:
        """The listener loop of upstream ``ensureOctaviaLoadBalancer``."""
        lb_id = str(lb["id"])
        current = listener_map(leftovers)
        check_listener_ports(_ports(service), current, owner, conf.lb_name)
        for index, port in enumerate(_ports(service)):
            listener = ensure_listener(
                self.octavia, lb_id, listener_name(index, conf.lb_name), current, port, conf
            )
            pool = ensure_pool(
                self.octavia,
                lb_id,
                pool_name(index, conf.lb_name),
                listener,
                service,
                port,
                nodes,
                conf,
                self.opts.lb_method,
                self.opts.provider_requires_serial_api_calls,
            )
            ensure_monitor(self.octavia, lb_id, monitor_name(index, conf.lb_name), pool, port, conf)
            leftovers = [item for item in leftovers if item.get("id") != listener.get("id")]
        delete_service_listeners(self.octavia, lb_id, leftovers, owner, conf.lb_name)

    def _status(self, service: Service, conf: ServiceConfig, address: str) -> LoadBalancerStatus:
        """Upstream ``createLoadBalancerStatus``."""
        hostname = conf.annotations.hostname
        if hostname:
            return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=hostname)])
        mode = "VIP"
        if conf.proxy_protocol is not None:
            if self.opts.enable_ingress_hostname:
                name = f"{address}.{self.opts.ingress_hostname_suffix}"
                return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=name)])
            mode = "Proxy"
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=address, ip_mode=mode)])

    # -- update ------------------------------------------------------------------------------

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        """Upstream ``UpdateLoadBalancer``: pools, members and monitors of the existing
        listeners (and the security group)."""
        with self.metrics.reconcile("loadbalancer_update"):
            self._update(cluster_name, service, nodes)

    def _update(self, cluster_name: str, service: Service, nodes: Sequence[Node]) -> None:
        """Upstream ``updateOctaviaLoadBalancer``."""
        conf = config_for_update(
            service, nodes, self.opts, self.classes, self.octavia, self.neutron
        )
        members = filter_nodes(nodes, conf.node_selectors)
        conf.lb_name = load_balancer_name(cluster_name, service)
        lb = find_for_service(self.octavia, cluster_name, service, conf.lb_id)
        if lb is None:
            raise CloudProviderError(f"load balancer for Service {service_key(service)} not found")
        if lb.get("provisioning_status") != ACTIVE:
            lb = self.octavia.wait_active(str(lb["id"]))
        self._update_pools(lb, service, members, conf)
        if self.opts.manage_security_groups:
            ensure_security_group(
                self.neutron, cluster_name, service, members, conf, self.opts.lb_provider
            )

    def _update_pools(
        self, lb: LB, service: Service, members: Sequence[Node], conf: ServiceConfig
    ) -> None:
        """The port loop of ``updateOctaviaLoadBalancer`` (names from the balancer's name)."""
        lb_id, lb_name = str(lb["id"]), str(lb.get("name", ""))
        current = listener_map(self.octavia.listeners(lb_id))
        for index, port in enumerate(_ports(service)):
            listener = current.get(listener_key(port, conf))
            if listener is None:
                raise CloudProviderError(
                    f"loadbalancer {lb_id} does not contain required listener for port "
                    f"{port.get('port')} and protocol {port.get('protocol', 'TCP')}"
                )
            pool = ensure_pool(
                self.octavia,
                lb_id,
                pool_name(index, lb_name),
                listener,
                service,
                port,
                members,
                conf,
                self.opts.lb_method,
                self.opts.provider_requires_serial_api_calls,
            )
            ensure_monitor(self.octavia, lb_id, monitor_name(index, lb_name), pool, port, conf)

    # -- delete ------------------------------------------------------------------------------

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        """Upstream ``EnsureLoadBalancerDeleted``."""
        with self.metrics.reconcile("loadbalancer_delete"):
            self._delete(cluster_name, service)

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        """kccm: the floating IP marked retained (:mod:`.retention`), then the delete."""
        with self.metrics.reconcile("loadbalancer_delete"):
            return self._delete(cluster_name, service, keep=True)

    def list_retained_addresses(self, cluster_name: str) -> Sequence[RetainedAddress]:
        return [as_retained(f, cluster_name) for f in kept(self.neutron, cluster_name)]

    def release_retained_address(self, cluster_name: str, address: str) -> bool:
        for fip in kept(self.neutron, cluster_name):
            if address in (fip.get("id"), fip.get("floating_ip_address")):
                self.neutron.delete_floating_ip(str(fip.get("id")))
                return True
        return False

    def _delete(
        self, cluster_name: str, service: Service, *, keep: bool = False
    ) -> list[RetainedAddress]:
        """Upstream ``ensureLoadBalancerDeleted``."""
        conf = config_for_delete(service, self.opts, self.octavia)
        conf.lb_name = load_balancer_name(cluster_name, service)
        with ExitStack() as turn:
            if conf.lb_id:
                turn.enter_context(self.locks.hold(conf.lb_id))
            found = find_for_service(self.octavia, cluster_name, service, conf.lb_id)
            lb = self._turn(turn, conf.lb_id, found)
            fip = self._kept_fip(cluster_name, service, lb) if keep else None
            delete_for_service(
                self.octavia, self.neutron, lb, service, conf, self.opts.cascade_delete
            )
        return [] if fip is None else [as_retained(fip, cluster_name)]

    def _kept_fip(self, cluster_name: str, service: Service, lb: LB | None) -> Obj | None:
        port_id = str((lb or {}).get("vip_port_id") or "")
        fip = self.neutron.floating_ip_of_port(port_id) if port_id else None
        return None if fip is None else mark(self.neutron, cluster_name, service, fip)


def with_tag(tags: list[str], name: str) -> list[str] | None:
    """Upstream's "add LB name to load balancer tags" (``None``: it is there already)."""
    return None if name in tags else [*tags, name]
