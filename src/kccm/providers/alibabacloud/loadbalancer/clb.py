"""The classic load balancer (CLB, formerly SLB) of a ``LoadBalancer`` Service: the
``LoadBalancer`` capability of the ``alibabacloud`` provider (docs/providers/alibabacloud.md,
"Load balancers").

As upstream's ``clbv1`` reconciler (``pkg/controller/service/clbv1/model_applier.go``
``Apply``, v2.14.0): find the balancer (by the ``loadbalancer-id`` annotation, else by the tag
``kubernetes.do.not.delete=<default name>``, else by the default name: ``Find`` and
``pkg/provider/alibaba/slb/loadbalancer.go`` ``FindLoadBalancer``), create it when missing,
update what may change (``LoadBalancerManager.Update``), then its vServer groups and listeners
(:mod:`.members`); a reused balancer (``loadbalancer-id``) keeps its listeners unless
``loadbalancer-force-override-listeners`` is ``true``, and is never deleted. Every step reads
first and writes only what differs: a second ensure of an unchanged Service makes no
mutating call.

Backends are the cluster's nodes (ECS instances, ``buildClusterBackends``), on the port's
node port, weight 100. With ``externalTrafficPolicy: Local`` only the Nodes running a ready
endpoint, weighted by their endpoint count; with ENI backends
(``service.beta.kubernetes.io/backend-type: eni`` or the config's ``serviceBackendType: eni``)
the endpoints' own ENIs (:mod:`.endpoint_members`). Both read the Service's endpoints through
the framework's reader (:class:`~kccm.cloudprovider.EndpointsUser`); without one (a caller
outside the service controller) ENI is refused and ``Local`` gets every Node, with a Warning.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Collection, Mapping, Sequence

from kccm.cloudprovider import (
    BalancerView,
    EndpointsReader,
    ImplementedElsewhere,
    InvalidServiceConfig,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    ServiceEndpoint,
    default_load_balancer_name,
)
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.providers.alibabacloud.config import AlibabaConfig
from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.loadbalancer.annotations import PREFIX, refused, value
from kccm.providers.alibabacloud.loadbalancer.backends import group_wants, vgroup_ports
from kccm.providers.alibabacloud.loadbalancer.describe import describe
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import eni_ids
from kccm.providers.alibabacloud.loadbalancer.lookup import find_balancer
from kccm.providers.alibabacloud.loadbalancer.marks import AlibabaServiceMarks, needs_nlb
from kccm.providers.alibabacloud.loadbalancer.members import (
    GroupWant,
    Owner,
    delete_unused_vgroups,
    read_vgroups,
    sync_listeners,
    sync_vgroups,
)
from kccm.providers.alibabacloud.loadbalancer.slbapi import Balancer, Rpc, SlbApi
from kccm.providers.alibabacloud.loadbalancer.spec import (
    BACKEND_TYPE,
    CLUSTER_TAG,
    NAME_TAG,
    REUSE_TAG,
    BalancerSpec,
    build_spec,
    eni_backends,
)

__all__ = ["ClassicLoadBalancers"]

log = logging.getLogger(__name__)

MAX_TAGS = 10  # loadbalancer.go MaxLBTagNum
CLASS_ANNOTATION = "service.beta.kubernetes.io/class"  # helper.LoadBalancerClass
# what LoadBalancerManager.Update refuses to change, and the annotation that asks for it
IMMUTABLE = {
    "AddressType": f"{PREFIX}loadbalancer-address-type",
    "NetworkType": f"{PREFIX}loadbalancer-network-type",
    "MasterZoneId": f"{PREFIX}loadbalancer-master-zoneid",
    "SlaveZoneId": f"{PREFIX}loadbalancer-slave-zoneid",
    "ResourceGroupId": f"{PREFIX}loadbalancer-resource-group-id",
    "AddressIPVersion": f"{PREFIX}loadbalancer-ip-version",
    "Address": f"{PREFIX}loadbalancer-ip",
}
DEFAULT_CLUSTER_ID = "clusterid"  # base.CLUSTER_ID before the metadata is read


def _local(service: Service) -> bool:
    return (service.get("spec") or {}).get("externalTrafficPolicy") == "Local"


def _owner(service: Service, cluster_id: str) -> Owner:
    meta = service.get("metadata") or {}
    return Owner(str(meta.get("name") or ""), str(meta.get("namespace") or ""), cluster_id)


class ClassicLoadBalancers:
    """CLB for every ``LoadBalancer`` Service; methods are plain ``def`` (the framework runs
    them in its thread pool)."""

    def __init__(self, rpc: Rpc, config: AlibabaConfig, vpc_id: str) -> None:
        self.api = SlbApi(rpc)
        self.config = config
        self.vpc_id = vpc_id
        self.cluster_id = config.cluster_id or DEFAULT_CLUSTER_ID
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self._endpoints: EndpointsReader | None = None
        self.marks = AlibabaServiceMarks(lambda service: needs_nlb(service, config.gates))

    # the endpoints (kccm.cloudprovider.EndpointsUser)
    def uses_endpoints(self, service: Service) -> bool:
        """``Local`` and ENI Services: their members follow their endpoints."""
        return _local(service) or eni_backends(service, self.config.service_backend_type)

    def set_endpoints_reader(self, reader: EndpointsReader) -> None:
        self._endpoints = reader

    def _read_endpoints(self, spec: BalancerSpec, service: Service) -> Sequence[ServiceEndpoint]:
        if spec.members_from == "nodes" or self._endpoints is None:
            return ()
        return self._endpoints(service)

    def _eni_of(self, spec: BalancerSpec, endpoints: Sequence[ServiceEndpoint]) -> dict[str, str]:
        """``updateVServerGroupENIBackendID``: the ENI of each ready endpoint IP; the IPs
        without one are said in a Warning."""
        ips = sorted({e.address for e in endpoints if e.ready})
        if spec.members_from != "eni" or not ips:
            return {}
        found = eni_ids(self.api.rpc, self.vpc_id, ips)
        missing = [ip for ip in ips if ip not in found]
        if missing:
            warn_service(
                "SkipSyncBackends", f"Not sync pods [{','.join(missing)}] whose eni is invalid"
            )
        return found

    # upstream's finalizer and labels on the Service (ServiceMarker, :mod:`.marks`)
    def service_finalizer(self, service: Service) -> str:
        return self.marks.service_finalizer(service)

    def service_labels(self, service: Service) -> Mapping[str, str]:
        return self.marks.service_labels(service)

    def service_label_keys(self) -> Collection[str]:
        return self.marks.service_label_keys()

    # the lookup
    def _find(self, service: Service) -> Balancer | None:
        """``FindLoadBalancer``: by ID, else by the name tag, else by the default name."""
        return find_balancer(
            service,
            self.api.describe,
            lambda err: err.code.startswith("InvalidLoadBalancerId"),
            self.api.find,
            "loadbalances",  # sic: upstream's message
        )

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        found = self._find(service)
        if found is None:
            return None, False
        return self._status(service, found), True

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """kccm's ``describe_load_balancer`` (:mod:`.describe`)."""
        found = self._find(service)
        return None if found is None else describe(self.api, found)

    def _status(self, service: Service, balancer: Balancer) -> LoadBalancerStatus:
        """``updateServiceStatus``: the ``hostname`` annotation, else with
        ``external-ip-type: eip`` the balancer's EIPs (its address, with a Warning, when it has
        none), else its address."""
        hostname = value(service, "loadbalancer-hostname")
        if hostname:
            return LoadBalancerStatus(ingress=(LoadBalancerIngress(hostname=hostname),))
        if value(service, "loadbalancer-external-ip-type") == "eip":
            eips = self.api.eips(balancer.id)
            if eips:
                return LoadBalancerStatus(ingress=tuple(LoadBalancerIngress(ip=i) for i in eips))
            warn_service(
                "FailedSetEIPAddress",
                f"slb {balancer.id} has no eip, svc external ip cannot be set to eip address; "
                "set external ip to slb ip",
            )
        return LoadBalancerStatus(ingress=(LoadBalancerIngress(ip=balancer.address),))

    # ensure
    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        spec = self._spec(service)
        endpoints = self._read_endpoints(spec, service)
        wants = group_wants(service, spec, nodes, endpoints, self._eni_of(spec, endpoints))
        balancer = self._find(service)
        if balancer is not None and spec.preserve_on_delete:
            warn_service(
                "PreservedOnDelete",
                f"The lb [{balancer.id}] will be preserved after the service is deleted.",
            )
        if balancer is None:
            if spec.reuse_id:
                raise AlibabaError(f"alicloud: can not find loadbalancer {spec.reuse_id}")
            balancer = self._create(spec)
        tags = self.api.list_tags(balancer.id)
        if spec.reuse_id:
            self._check_reusable(service, balancer, tags)
        self._update(spec, balancer, tags)
        self._members(service, spec, balancer.id, wants)
        status = self._status(service, balancer)
        self.marks.ensured(service, balancer.id)
        return status

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self.ensure_load_balancer(cluster_name, service, nodes)

    def _handed_off(self, service: Service) -> None:
        """``NeedCLB`` / ``NeedNLB`` (``pkg/controller/helper/service_utils.go``): a Service for
        another controller (``service.beta.kubernetes.io/class``, ``tunnel-type``) is
        :class:`ImplementedElsewhere`; with the ``LoadBalancerTypeAnnotation`` gate a
        ``loadbalancer-type`` other than ``nlb`` (which :mod:`.router` sends to the NLB) is
        refused: neither controller serves it."""
        annotations = (service.get("metadata") or {}).get("annotations") or {}
        if annotations.get(CLASS_ANNOTATION) or f"{PREFIX}loadbalancer-tunnel-type" in annotations:
            raise ImplementedElsewhere("alibabacloud: the Service is another controller's")
        kind = annotations.get(f"{PREFIX}loadbalancer-type", "")
        if kind and self.config.gates.get("LoadBalancerTypeAnnotation"):
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-type",
                f"alibabacloud: {PREFIX}loadbalancer-type={kind!r}: neither CLB nor NLB "
                "(only 'nlb' is known)",
            )

    def _spec(self, service: Service) -> BalancerSpec:
        self._handed_off(service)
        eni = eni_backends(service, self.config.service_backend_type)
        if eni and self._endpoints is None:
            raise InvalidServiceConfig(
                BACKEND_TYPE,
                "alibabacloud: ENI backends (backend-type eni) need the Service's endpoints, "
                "which only the service controller gives; use the default ECS backends",
            )
        address_type = value(service, "loadbalancer-address-type") or "internet"
        if self.config.disable_public_slb and address_type == "internet":
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-address-type",
                "alibabacloud: create public address slb is not allowed (disablePublicSLB)",
            )
        for line in refused(service):
            warn_service("UnsupportedAnnotation", line)
        if (service.get("spec") or {}).get("loadBalancerSourceRanges"):
            warn_service(
                "UnsupportedSourceRanges",
                "alibabacloud: spec.loadBalancerSourceRanges is not applied to a CLB (as "
                f"upstream); use the {PREFIX}loadbalancer-acl-* annotations",
            )
        local = _local(service) and not eni
        if local and self._endpoints is None:
            warn_service(
                "UnsupportedTrafficPolicy",
                "alibabacloud: externalTrafficPolicy Local without the Service's endpoints "
                "(only the service controller gives them): every node is added with weight 100",
            )
        spec = build_spec(service, self.cluster_id, eni=eni)
        if eni or (local and self._endpoints is not None):
            spec.members_from = "eni" if eni else "local"
        return spec

    def _create(self, spec: BalancerSpec) -> Balancer:
        params = spec.create_params(
            self.vpc_id, self.config.vswitch_id, self.config.resource_group_id
        )
        with self._lock:
            token = self._tokens.setdefault(spec.default_name, uuid.uuid4().hex)
        lb_id, _ = self.api.create({**params, "ClientToken": token})
        log.info("alibabacloud: created CLB %s for %s", lb_id, spec.default_name)
        with self._lock:
            self._tokens.pop(spec.default_name, None)
        return self.api.describe(lb_id)

    @staticmethod
    def _check_reusable(service: Service, balancer: Balancer, tags: dict[str, str]) -> None:
        """``isLoadBalancerReusable``."""
        if NAME_TAG in tags or CLUSTER_TAG in tags:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-id",
                f"alicloud: the loadbalancer {balancer.id} can not be reused, can not reuse "
                "loadbalancer created by kubernetes.",
            )
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if ingress and not any(
            i.get("ip") == balancer.address or (i.get("hostname") and not i.get("ip"))
            for i in ingress
        ):
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-id",
                f"alicloud: the loadbalancer {balancer.id} can not be reused, service has been "
                f"associated with ip [{ingress[0].get('ip')}], cannot be bound to ip "
                f"[{balancer.address}]",
            )

    def _update(self, spec: BalancerSpec, lb: Balancer, tags: dict[str, str]) -> None:
        """``LoadBalancerManager.Update``: what may change once created."""
        mark = (REUSE_TAG, "true") if spec.reuse_id else (NAME_TAG, spec.default_name)
        if mark[0] not in tags and len(tags) < MAX_TAGS:
            self.api.tag(lb.id, dict([mark]))
        want = spec.attributes
        for key in IMMUTABLE:
            have = lb.raw.get(key) or ("ipv4" if key == "AddressIPVersion" else "")
            if want.get(key) and want[key] != have:
                raise InvalidServiceConfig(
                    IMMUTABLE[key], f"alicloud: can not change LoadBalancer {key} once created"
                )
        self._charge_and_spec(spec, lb)
        self._internet_spec(spec, lb)
        if want.get("DeleteProtection") and want["DeleteProtection"] != lb.delete_protection:
            self.api.set_delete_protection(lb.id, want["DeleteProtection"])
        status = want.get("ModificationProtectionStatus")
        if status and status != lb.modification_protection:
            self.api.set_modification_protection(lb.id, status)
        if spec.name and spec.name != lb.name:
            self.api.set_name(lb.id, spec.name)
        self._extra_tags(spec, lb.id, tags)

    def _charge_and_spec(self, spec: BalancerSpec, lb: Balancer) -> None:
        """``updateInstanceChargeTypeAndInstanceSpec``: a new instance charge type (with the
        spec, default ``slb.s1.small``, for ``PayBySpec``); else, paid by spec, a new spec."""
        charge = spec.attributes.get("InstanceChargeType", "")
        have = lb.raw.get("InstanceChargeType", "")
        want_spec = spec.attributes.get("LoadBalancerSpec", "")
        if charge and charge != have:
            by_spec = charge.lower() == "paybyspec"
            self.api.modify_charge_type(
                lb.id, charge, (want_spec or "slb.s1.small") if by_spec else ""
            )
            return
        if (charge or have).lower() == "paybyspec" and want_spec and want_spec != lb.spec:
            self.api.modify_spec(lb.id, want_spec)

    def _internet_spec(self, spec: BalancerSpec, lb: Balancer) -> None:
        charge, bandwidth = lb.charge_type, lb.bandwidth
        want_charge = spec.attributes.get("InternetChargeType", "")
        want_bandwidth = int(spec.attributes.get("Bandwidth") or 0)
        if want_charge and want_charge.lower() != charge.lower():
            charge = want_charge
        if want_bandwidth and want_bandwidth != bandwidth and want_charge == "paybybandwidth":
            bandwidth = want_bandwidth
        changed = (charge, bandwidth) != (lb.charge_type, lb.bandwidth)
        if changed and lb.address_type == "internet":
            self.api.modify_internet_spec(lb.id, charge, bandwidth)

    def _extra_tags(self, spec: BalancerSpec, lb_id: str, tags: dict[str, str]) -> None:
        """``updateLoadBalancerTags``: the additional tags, default ones left out."""
        if not spec.extra_tags:
            return
        skip = set(spec.default_tags) | ({REUSE_TAG} if spec.reuse_id else set())
        want = {k: v for k, v in spec.extra_tags.items() if k not in skip}
        have = {k: v for k, v in tags.items() if k not in skip}
        add = {k: v for k, v in want.items() if have.get(k) != v}
        gone = [k for k in have if k not in want]
        if add:
            self.api.tag(lb_id, add)
        if gone:
            self.api.untag(lb_id, gone)

    def _members(
        self, service: Service, spec: BalancerSpec, lb_id: str, wants: Sequence[GroupWant]
    ) -> None:
        owner = _owner(service, self.cluster_id)
        reused = {w.reused_id for w in wants if w.reused_id}
        groups = read_vgroups(self.api, lb_id, owner, reused)
        ids = sync_vgroups(self.api, lb_id, groups, wants, owner)
        if not spec.reuse_id or spec.force_override:
            sync_listeners(self.api, lb_id, spec.listeners, ids, owner)
        else:
            log.info("alibabacloud: %s: listener override is false, skip listeners", lb_id)
        delete_unused_vgroups(self.api, groups, ids, owner)

    # delete
    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        """``deleteLoadBalancer``: a balancer kccm made is deleted (protection turned off
        first) or, with ``loadbalancer-preserve-lb-on-delete``, kept with its protections off
        and the Service's tags removed; a reused one keeps everything but this Service's
        listeners (with override) and vServer groups."""
        self.marks.deleted(service)
        balancer = self._find(service)
        if balancer is None:
            return
        reuse = value(service, "loadbalancer-id") or ""
        if reuse:
            self._release(service, balancer.id)
        elif value(service, "loadbalancer-preserve-lb-on-delete"):
            self._preserve(service, balancer)
        else:
            if balancer.delete_protection == "on":
                self.api.set_delete_protection(balancer.id, "off")
            self.api.delete(balancer.id)
            log.info("alibabacloud: deleted CLB %s", balancer.id)

    def _release(self, service: Service, lb_id: str) -> None:
        owner = _owner(service, self.cluster_id)
        if value(service, "loadbalancer-force-override-listeners") == "true":
            sync_listeners(self.api, lb_id, [], {}, owner)
        reused = set(vgroup_ports(service, value(service, "loadbalancer-id") or "").values())
        groups = read_vgroups(self.api, lb_id, owner, reused)
        delete_unused_vgroups(self.api, groups, {}, owner)

    def _preserve(self, service: Service, lb: Balancer) -> None:
        """``SetProtectionsOff`` and ``CleanupLoadBalancerTags``."""
        if lb.delete_protection == "on":
            self.api.set_delete_protection(lb.id, "off")
        if lb.modification_protection == "ConsoleProtection":
            self.api.set_modification_protection(lb.id, "NonProtection")
        tags = self.api.list_tags(lb.id)
        defaults = {NAME_TAG: default_load_balancer_name(service), CLUSTER_TAG: self.cluster_id}
        gone = [k for k, v in defaults.items() if tags.get(k) == v]
        if gone:
            self.api.untag(lb.id, gone)
