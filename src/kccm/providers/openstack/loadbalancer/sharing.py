"""The openstack provider's shared balancers (kccm's
:class:`~kccm.cloudprovider.sharing.BalancerSharer`, docs/behaviour.md "Sharing one balancer",
docs/providers/openstack.md "Share groups").

A share group ``(namespace, group)`` is one Octavia balancer named
``kube_service_<cluster>_<namespace>_<group>.share`` (:func:`group_balancer_name`; a Service
name never holds a ``.``, so no Service's own balancer has that name) and found again by that
name, also after it was deleted behind kccm's back and made again: OCCM's
``load-balancer-id`` sharing cannot do that, as the ID it follows changes.

Each member uses OCCM's shared-balancer path (upstream ``ensureOctaviaLoadBalancer``,
``checkListenerPorts``, ``deleteOctaviaListeners`` and ``ensureLoadBalancerDeleted`` in
``pkg/openstack/loadbalancer.go`` v1.36.0): its listeners, pools and monitors carry its own
name (``kube_service_<cluster>_<namespace>_<name>``) as a tag, the balancer lists every member's
name in its tags, and a listener tagged by another Service is never changed or removed. The
balancer's tag is written before the listeners, so a member with listeners is always found.
Unlike ``load-balancer-id`` a group has no owner Service: no ``max-shared-lb`` limit, one
floating IP made for the group (its description names the group, with upstream's "created by
a cloud provider" mark), and the last member's delete removes the balancer and that floating
IP (unless its ``keep-floatingip`` says to keep it); a group balancer made again takes back
the group's floating IP left unattached. No annotation is written back onto the Service.

OCCM refuses internal Services on a shared balancer; so do groups, with an error naming the
annotation. A group member carrying ``load-balancer-id`` gets a Warning: the ID is not
followed; this Service's listeners on that balancer are removed (its own balancer, from before
it joined, is deleted as on a Service's deletion).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    BalancerView,
    CloudProviderError,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    RetainedAddress,
    Service,
    ShareGroup,
)
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.cloudprovider.sharing import share_group_of
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.providers.openstack.loadbalancer.annotations import LBAnnotationError
from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers, with_tag
from kccm.providers.openstack.loadbalancer.create import create_load_balancer
from kccm.providers.openstack.loadbalancer.delete import delete_for_service
from kccm.providers.openstack.loadbalancer.describe import balancer_view
from kccm.providers.openstack.loadbalancer.floatingips import ensure_floating_ip
from kccm.providers.openstack.loadbalancer.lookup import by_id, by_name
from kccm.providers.openstack.loadbalancer.names import (
    FIP_DESCRIPTION_MARK,
    SERVICE_PREFIX,
    cut255,
    fip_description,
    load_balancer_name,
    service_key,
)
from kccm.providers.openstack.loadbalancer.nodes import filter_nodes
from kccm.providers.openstack.loadbalancer.octavia import ACTIVE, LB
from kccm.providers.openstack.loadbalancer.secgroups import (
    ensure_security_group,
    ensure_security_group_deleted,
)
from kccm.providers.openstack.loadbalancer.shareddelete import delete_member
from kccm.providers.openstack.loadbalancer.svcconf import (
    ServiceConfig,
    config_for_delete,
    config_for_ensure,
    config_for_update,
)

__all__ = [
    "GROUP_SUFFIX",
    "REASON_LB_ID_IGNORED",
    "SETTINGS",
    "OctaviaSharing",
    "group_balancer_name",
    "group_of_description",
]

log = logging.getLogger(__name__)

GROUP_SUFFIX = ".share"
REASON_LB_ID_IGNORED = "LoadBalancerIDIgnored"

SETTINGS = (
    ann.INTERNAL,
    ann.CLASS,
    ann.FLOATING_NETWORK_ID,
    ann.FLOATING_SUBNET,
    ann.FLOATING_SUBNET_ID,
    ann.FLOATING_SUBNET_TAGS,
    ann.NETWORK_ID,
    ann.SUBNET_ID,
    ann.PORT_ID,
    ann.FLAVOR_ID,
    ann.AVAILABILITY_ZONE,
)
"""The annotations that shape the balancer itself (its VIP, floating IP, flavor and zone),
which a group's Services must agree on. What hangs under a listener (source ranges as its
``allowed_cidrs``, timeouts, health monitors, ``lb-method``, TLS) may differ."""


def group_balancer_name(cluster_name: str, group: ShareGroup) -> str:
    """``kube_service_<cluster>_<namespace>_<group>.share``."""
    return cut255(f"{SERVICE_PREFIX}{cluster_name}_{group.namespace}_{group.name}{GROUP_SUFFIX}")


def group_of_description(description: str, namespace: str) -> ShareGroup | None:
    """The group in ``namespace`` whose floating IP has ``description`` (upstream's mark,
    ``<namespace>/<group>.share``, the cluster), else ``None``."""
    head = f"{FIP_DESCRIPTION_MARK} {namespace}/"
    if not description.startswith(head):
        return None
    rest = description[len(head) :]
    name, sep, _ = rest.partition(f"{GROUP_SUFFIX} from cluster ")
    if not sep or not name or "/" in name:
        return None
    return ShareGroup(namespace, name)


def _group_record(group: ShareGroup, service: Service) -> Service:
    """The group as the floating-IP helpers read a Service: its key and the address asked for
    (so the floating IP is described as the group's, and no Service's retention applies)."""
    spec = service.get("spec") or {}
    return {
        "metadata": {"namespace": group.namespace, "name": f"{group.name}{GROUP_SUFFIX}"},
        "spec": {"loadBalancerIP": spec.get("loadBalancerIP") or ""},
    }


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


def _annotations(service: Service) -> Mapping[str, Any]:
    return (service.get("metadata") or {}).get("annotations") or {}


class OctaviaSharing(OctaviaLoadBalancers):
    """:class:`OctaviaLoadBalancers` with share groups (plain ``def`` methods, run in the
    framework's thread pool; the service controller runs one call of a group at a time)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.joined: dict[str, ShareGroup] = {}
        """The group of each Service (``namespace/name``) this process last ensured in one;
        a Service found in none or another on its next ensure or delete has left it
        (:meth:`_left`)."""

    def sharing_settings(self, service: Service) -> Mapping[str, str]:
        """The balancer-level annotations the Service sets (:data:`SETTINGS`) and the address
        it asks for (one floating IP per group)."""
        found = _annotations(service)
        settings = {key: str(found[key]) for key in SETTINGS if key in found}
        address = str((service.get("spec") or {}).get("loadBalancerIP") or "")
        if address:
            settings["spec.loadBalancerIP"] = address
        return settings

    # -- reads -------------------------------------------------------------------------------

    def _group_balancer(self, cluster_name: str, group: ShareGroup) -> LB | None:
        return by_name(self.octavia, group_balancer_name(cluster_name, group), "")

    def get_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        """The group's address, and whether the balancer carries this Service's tag."""
        lb = self._group_balancer(cluster_name, group)
        if lb is None:
            return None, False
        mine = load_balancer_name(cluster_name, service) in (lb.get("tags") or ())
        port_id = str(lb.get("vip_port_id") or "")
        fip = self.neutron.floating_ip_of_port(port_id) if port_id else None
        address = str(fip.get("floating_ip_address")) if fip else str(lb.get("vip_address", ""))
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(ip=address)]), mine

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """``kccm explain``: for a Service of a group, the group's balancer (every member's
        listeners); else upstream's own balancer."""
        try:
            group = share_group_of(service)
        except InvalidServiceConfig:
            group = None
        if group is None:
            return super().describe_load_balancer(cluster_name, service)
        lb = self._group_balancer(cluster_name, group)
        return None if lb is None else balancer_view(self.octavia, lb)

    # -- ensure ------------------------------------------------------------------------------

    def ensure_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        with self.metrics.reconcile("loadbalancer_ensure"):
            conf = config_for_ensure(
                service, nodes, self.opts, self.classes, self.octavia, self.neutron, self.keymanager
            )
            conf.lb_name = load_balancer_name(cluster_name, service)
            _refuse_unshareable(conf, group)
            self._left(cluster_name, service, group)
            members = filter_nodes(nodes, conf.node_selectors)
            if conf.lb_id:
                self._leave_annotated(cluster_name, group, service, conf)
            lb, created = self._find_or_create_group(cluster_name, group, service, members, conf)
            with self.locks.hold(str(lb["id"])):
                status = self._ensure_member(
                    lb, created, cluster_name, group, service, members, conf
                )
            self.joined[service_key(service)] = group
            return status

    def _find_or_create_group(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        members: Sequence[Node],
        conf: ServiceConfig,
    ) -> tuple[LB, bool]:
        lb = self._group_balancer(cluster_name, group)
        if lb is not None:
            return lb, False
        name = group_balancer_name(cluster_name, group)
        description = f"Kubernetes share group {group} from cluster {cluster_name}"
        made = create_load_balancer(
            self.octavia, name, cluster_name, service, members, conf, self.opts, description
        )
        return made, True

    def _ensure_member(
        self,
        lb: LB,
        created: bool,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        members: Sequence[Node],
        conf: ServiceConfig,
    ) -> LoadBalancerStatus:
        """The member's part, holding the balancer's lock: its tag first, then its
        listeners, then the group's floating IP and the Service's security group."""
        if lb.get("provisioning_status") != ACTIVE:
            lb = self.octavia.wait_active(str(lb["id"]))
        lb = self.octavia.update_tags(lb, lambda tags: with_tag(tags, conf.lb_name))
        listeners = self.octavia.listeners(str(lb["id"]))
        if not created or self.opts.provider_requires_serial_api_calls:
            self._ensure_children(lb, listeners, False, service, members, conf)
        address = str(lb.get("vip_address", ""))
        if not _is_ipv6(address):  # an IPv6 VIP has no floating IP (upstream's rule)
            record = _group_record(group, service)
            if created:
                self._adopt_group_fip(cluster_name, record, lb)
            address = ensure_floating_ip(self.neutron, cluster_name, record, lb, conf, True)
        if self.opts.manage_security_groups:
            ensure_security_group(
                self.neutron, cluster_name, service, members, conf, self.opts.lb_provider
            )
        else:
            ensure_security_group_deleted(self.neutron, service)
        return self._status(service, conf, address)

    def _adopt_group_fip(self, cluster_name: str, record: Service, lb: LB) -> None:
        """A group balancer made again (deleted behind kccm's back): the group's floating
        IP left unattached then is attached again, so the group keeps its address."""
        port_id = str(lb.get("vip_port_id") or "")
        if not port_id or (record.get("spec") or {}).get("loadBalancerIP"):
            return
        wanted = fip_description(cluster_name, record)
        for fip in self.neutron.floating_ips():
            if fip.get("description") == wanted and not fip.get("port_id"):
                log.info("Share group balancer %s takes back %s", lb["id"], fip.get("id"))
                self.neutron.set_floating_ip_port(str(fip["id"]), port_id)
                return

    def _leave_annotated(
        self, cluster_name: str, group: ShareGroup, service: Service, conf: ServiceConfig
    ) -> None:
        """``load-balancer-id`` on a group member: a Warning; this Service leaves that
        balancer as on its deletion (its own one goes, another's keeps the rest)."""
        warn_service(
            REASON_LB_ID_IGNORED,
            f"Service {service_key(service)} is in share group {group.name}: annotation "
            f"{ann.LB_ID}={conf.lb_id} is not followed (the group's balancer "
            f"{group_balancer_name(cluster_name, group)} is used); remove the annotation",
        )
        with self.locks.hold(conf.lb_id):
            lb = by_id(self.octavia, conf.lb_id)
            if lb is None or str(lb.get("name")) == group_balancer_name(cluster_name, group):
                return
            tags = lb.get("tags") or ()
            if conf.lb_name not in tags and lb.get("name") != conf.lb_name:
                return  # nothing of this Service's there
            log.info("Service %s leaves balancer %s for its group", service_key(service), lb["id"])
            delete_for_service(
                self.octavia, self.neutron, lb, service, conf, self.opts.cascade_delete
            )

    # -- a Service that left its group ------------------------------------------------------

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        """A Service of no group: first out of the group it was in (:meth:`_left`)."""
        self._left(cluster_name, service)
        return super().ensure_load_balancer(cluster_name, service, nodes)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        self._left(cluster_name, service)
        super().ensure_load_balancer_deleted(cluster_name, service)

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        self._left(cluster_name, service)
        return super().ensure_load_balancer_deleted_keeping_address(cluster_name, service)

    def _left(self, cluster_name: str, service: Service, now: ShareGroup | None = None) -> None:
        """A Service this process ensured in a group and now sees in none, or in another
        (its annotation removed or changed; ``now``: the group it is in): its listeners,
        pools, monitors and tag leave that group's balancer, as on its delete (the last
        member's take the balancer and floating IP with them); no call for any other
        Service. Known from :attr:`joined`, or after a restart from the floating IP the
        Service is published on (:meth:`_recalled`)."""
        key = service_key(service)
        group = self.joined.pop(key, None) if key in self.joined else self._recalled(service, now)
        if group is None or group == now:
            if group is not None:
                self.joined[key] = group
            return
        conf = config_for_delete(service, self.opts, self.octavia)
        conf.lb_name = load_balancer_name(cluster_name, service)
        try:
            found = self._group_balancer(cluster_name, group)
            if found is None:
                return
            log.info("Service %s left share group %s", key, group)
            with self.locks.hold(str(found["id"])):
                lb = by_id(self.octavia, str(found["id"]))
                if lb is not None and conf.lb_name in (lb.get("tags") or ()):
                    delete_member(self.octavia, self.neutron, lb, conf, self.opts.cascade_delete)
        except Exception:
            self.joined.setdefault(key, group)  # tried again with the next sync
            raise

    def _recalled(self, service: Service, now: ShareGroup | None) -> ShareGroup | None:
        """The group a Service not in :attr:`joined` was in (this process did not ensure it:
        a restart), read from the floating IP it is published on, whose description names
        the group. Only a Service published on an IP and without ``load-balancer-id`` (never
        written for a group member; always for a Service of its own balancer) costs the one
        floating IP read; ``None`` for every other."""
        if ann.LB_ID in _annotations(service):
            return None
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
        ip = str(ingress[0].get("ip") or "") if ingress else ""
        if not ip:
            return None
        namespace = str((service.get("metadata") or {}).get("namespace") or "")
        for fip in self.neutron.floating_ips(floating_ip_address=ip):
            found = group_of_description(str(fip.get("description") or ""), namespace)
            if found is not None:
                return found
        return None

    # -- update ------------------------------------------------------------------------------

    def update_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> None:
        with self.metrics.reconcile("loadbalancer_update"):
            conf = config_for_update(
                service, nodes, self.opts, self.classes, self.octavia, self.neutron
            )
            conf.lb_name = load_balancer_name(cluster_name, service)
            members = filter_nodes(nodes, conf.node_selectors)
            lb = self._group_balancer(cluster_name, group)
            if lb is None:
                raise CloudProviderError(
                    f"load balancer of share group {group} for Service {service_key(service)} "
                    "not found"
                )
            if lb.get("provisioning_status") != ACTIVE:
                lb = self.octavia.wait_active(str(lb["id"]))
            self._update_pools(lb, service, members, conf)
            if self.opts.manage_security_groups:
                ensure_security_group(
                    self.neutron, cluster_name, service, members, conf, self.opts.lb_provider
                )

    # -- delete ------------------------------------------------------------------------------

    def ensure_shared_load_balancer_deleted(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> None:
        self.joined.pop(service_key(service), None)
        with self.metrics.reconcile("loadbalancer_delete"):
            conf = config_for_delete(service, self.opts, self.octavia)
            conf.lb_name = load_balancer_name(cluster_name, service)
            found = self._group_balancer(cluster_name, group)
            if found is None:
                ensure_security_group_deleted(self.neutron, service)
                return
            with self.locks.hold(str(found["id"])):
                lb = by_id(self.octavia, str(found["id"]))
                ensure_security_group_deleted(self.neutron, service)
                if lb is not None:
                    delete_member(self.octavia, self.neutron, lb, conf, self.opts.cascade_delete)


def _refuse_unshareable(conf: ServiceConfig, group: ShareGroup) -> None:
    """OCCM's rules for a shared balancer: never an internal Service, and only with tags."""
    if conf.internal:
        raise LBAnnotationError(
            f"share group {group.name}: an internal Service cannot share a load balancer "
            f"(annotation {ann.INTERNAL}, or internal-lb in the cloud config)",
            key=ann.INTERNAL,
        )
    if not conf.support_tags:
        raise CloudProviderError(
            f"share group {group.name}: shared load balancers need the tag feature of the cloud "
            "load balancer service (Octavia API 2.5 or later)"
        )
