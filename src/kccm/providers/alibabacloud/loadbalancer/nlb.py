"""The network load balancer (NLB) of a ``LoadBalancer`` Service whose
``spec.loadBalancerClass`` is ``alibabacloud.com/nlb`` (or, with the
``LoadBalancerTypeAnnotation`` gate, annotated ``loadbalancer-type: nlb``): upstream's ``nlbv2``
reconciler (``pkg/controller/service/nlbv2/model_applier.go`` ``Apply``, v2.14.0).

Find the balancer (``loadbalancer-id``, else the tag ``kubernetes.do.not.delete=<default
name>``, else that name: ``FindNLB``), create it when missing (zone mappings from
``zone-maps``, delete protection on, modification protection ``ConsoleProtection``, the
Service's tags), update what may change (``NLBManager.Update``), then its server groups and
listeners (:mod:`.nlbgroups`). A reused balancer (``loadbalancer-id``) keeps its listeners
unless ``force-override-listeners: "true"`` and is never deleted. Every step reads first and
writes only what differs: an unchanged Service makes no mutating call. The status is the
balancer's DNS name (``updateServiceStatus``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence

from kccm.cloudprovider import (
    EndpointsReader,
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
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import eni_ids
from kccm.providers.alibabacloud.loadbalancer.lookup import find_balancer
from kccm.providers.alibabacloud.loadbalancer.nlbapi import Nlb, NlbApi, Server, ZoneMapping
from kccm.providers.alibabacloud.loadbalancer.nlbgroups import (
    NlbOwner,
    cleanup_groups,
    delete_listeners,
    sync_groups,
    sync_listeners,
)
from kccm.providers.alibabacloud.loadbalancer.nlbmembers import (
    eni_ips,
    eni_servers,
    local_servers,
    members_mode,
)
from kccm.providers.alibabacloud.loadbalancer.nlbspec import (
    GroupSpec,
    NlbSpec,
    build_nlb_spec,
    group_servers,
)
from kccm.providers.alibabacloud.loadbalancer.spec import BACKEND_TYPE, CLUSTER_TAG, NAME_TAG

__all__ = ["NLB_CLASS", "NetworkLoadBalancers"]

log = logging.getLogger(__name__)

NLB_CLASS = "alibabacloud.com/nlb"  # helper.NLBClass
MAX_TAGS = 20


def _owner(service: Service, cluster_id: str) -> NlbOwner:
    meta = service.get("metadata") or {}
    return NlbOwner(str(meta.get("name") or ""), str(meta.get("namespace") or ""), cluster_id)


class NetworkLoadBalancers:
    """NLB for the Services :func:`~.router` gives it; plain ``def`` methods (the framework
    runs them in its thread pool)."""

    def __init__(self, api: NlbApi, config: AlibabaConfig, vpc_id: str, cluster_id: str) -> None:
        self.api = api
        self.config = config
        self.vpc_id = vpc_id
        self.cluster_id = cluster_id
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self._endpoints: EndpointsReader | None = None

    # the endpoints (kccm.cloudprovider.EndpointsUser; :mod:`.nlbmembers`)
    def uses_endpoints(self, service: Service) -> bool:
        """``Local`` and ENI Services: their servers follow their endpoints."""
        return members_mode(service, self.config.service_backend_type) != "nodes"

    def set_endpoints_reader(self, reader: EndpointsReader) -> None:
        self._endpoints = reader

    def _mode(self, service: Service) -> str:
        """:func:`.members_mode`; ``Local`` without a reader falls back to every Node."""
        mode = members_mode(service, self.config.service_backend_type)
        if mode == "eni" and self._endpoints is None:
            raise InvalidServiceConfig(
                BACKEND_TYPE,
                "alibabacloud: ENI backends (backend-type eni) need the Service's endpoints, "
                "which only the service controller gives; use the default ECS backends",
            )
        if mode == "local" and self._endpoints is None:
            warn_service(
                "UnsupportedTrafficPolicy",
                "alibabacloud: externalTrafficPolicy Local without the service controller's "
                "endpoints: kccm's NLB adds every node with weight 100",
            )
            return "nodes"
        return mode

    # the lookup
    def find(self, service: Service) -> Nlb | None:
        """``FindNLB``: by ID, else by the name tag, else by the default name."""
        found = find_balancer(
            service,
            self.api.get,
            lambda err: "NotExist" in err.code or "NotFound" in err.code,
            self.api.find,
            "nlbs",
        )
        if found is None or found.status == "Active" or value(service, "loadbalancer-id"):
            return found
        return self.api.get(found.id)  # FindNLB: a listed balancer not yet Active is read again

    @staticmethod
    def status(balancer: Nlb) -> LoadBalancerStatus:
        """``updateServiceStatus``: the balancer's DNS name."""
        return LoadBalancerStatus(ingress=(LoadBalancerIngress(hostname=balancer.dns_name),))

    # ensure
    def ensure(self, service: Service, nodes: Sequence[Node]) -> LoadBalancerStatus:
        return self.ensure_balancer(service, nodes)[0]

    def ensure_balancer(
        self, service: Service, nodes: Sequence[Node]
    ) -> tuple[LoadBalancerStatus, str]:
        """:meth:`ensure`, and the balancer's ID (for upstream's label on the Service)."""
        spec = self._spec(service)
        balancer = self.find(service)
        if balancer is not None and spec.preserve_on_delete:
            warn_service(
                "PreservedOnDelete",
                f"The lb [{balancer.id}] will be preserved after the service is deleted.",
            )
        created = balancer is None
        if balancer is None:
            if spec.reuse_id:
                raise AlibabaError(f"alicloud: can not find loadbalancer {spec.reuse_id}")
            balancer = self._create(spec)
        if spec.reuse_id:
            self._check_reusable(service, balancer)
        if not created or spec.security_group_ids or spec.cross_zone is not None:
            self._update(spec, balancer)
        self._members(service, spec, balancer, nodes)
        return self.status(balancer), balancer.id

    def _spec(self, service: Service) -> NlbSpec:
        for line in refused(service):
            warn_service("UnsupportedAnnotation", line)
        if (service.get("spec") or {}).get("loadBalancerSourceRanges"):
            warn_service(
                "UnsupportedSourceRanges",
                "alibabacloud: spec.loadBalancerSourceRanges is not applied to an NLB by kccm "
                f"yet; use {PREFIX}loadbalancer-security-group-ids",
            )
        eni = members_mode(service, self.config.service_backend_type) == "eni"
        return build_nlb_spec(service, self.cluster_id, self.config.resource_group_id, eni)

    def _create(self, spec: NlbSpec) -> Nlb:
        params = spec.create_params(self.vpc_id, self.config.resource_group_id)
        with self._lock:
            token = self._tokens.setdefault(spec.default_name, uuid.uuid4().hex)
        lb_id = self.api.create({**params, "ClientToken": token})
        log.info("alibabacloud: created NLB %s for %s", lb_id, spec.default_name)
        with self._lock:
            self._tokens.pop(spec.default_name, None)
        return self.api.get(lb_id)

    @staticmethod
    def _check_reusable(service: Service, balancer: Nlb) -> None:
        """``isNLBReusable``."""
        if NAME_TAG in balancer.tags or CLUSTER_TAG in balancer.tags:
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-id",
                f"the loadbalancer {balancer.id} can not be reused, can not reuse loadbalancer "
                "created by kubernetes.",
            )
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if ingress and not any(i.get("hostname") == balancer.dns_name for i in ingress):
            raise InvalidServiceConfig(
                f"{PREFIX}loadbalancer-id",
                f"the loadbalancer {balancer.id} can not be reused, service has been associated "
                f"with dnsname [{ingress[0].get('hostname')}], cannot be bound to dnsname "
                f"[{balancer.dns_name}]",
            )

    def _update(self, spec: NlbSpec, lb: Nlb) -> None:
        """``NLBManager.Update``."""
        for key, want, have in (
            ("ip-version", spec.ip_version, lb.ip_version),
            ("resource-group-id", spec.resource_group_id, lb.resource_group_id),
        ):
            if want and want.lower() != have.lower():
                raise InvalidServiceConfig(
                    f"{PREFIX}loadbalancer-{key}",
                    f"alicloud: {key} cannot be changed, service: {want}, nlb: {have}",
                )
        if spec.address_type and spec.address_type.lower() != lb.address_type.lower():
            self.api.update_address_type(lb.id, spec.address_type)
        if spec.zones and not all(_zone_matches(z, lb) for z in spec.zones):
            self.api.update_zones(lb.id, spec.zones)
        self._security_groups(spec, lb)
        name = spec.name if spec.name and spec.name != lb.name else ""
        cross = spec.cross_zone if spec.cross_zone not in (None, lb.cross_zone) else None
        if name or cross is not None:
            self.api.update_attribute(lb.id, name, cross)
        self._tags(spec, lb)

    def _security_groups(self, spec: NlbSpec, lb: Nlb) -> None:
        if spec.security_group_ids is None:
            return
        join = [g for g in spec.security_group_ids if g not in lb.security_group_ids]
        leave = [g for g in lb.security_group_ids if g not in spec.security_group_ids]
        if join:
            self.api.join_security_groups(lb.id, join)
        if leave:
            self.api.leave_security_groups(lb.id, leave)

    def _tags(self, spec: NlbSpec, lb: Nlb) -> None:
        """``updateLoadBalancerTags``: the additional tags, default ones left out."""
        if not spec.extra_tags:
            return
        skip = set(spec.default_tags)
        want = {k: v for k, v in spec.extra_tags.items() if k not in skip}
        have = {k: v for k, v in lb.tags.items() if k not in skip}
        add = {k: v for k, v in want.items() if have.get(k) != v}
        gone = [k for k in have if k not in want]
        if add:
            self.api.tag(lb.id, add)
        if gone:
            self.api.untag(lb.id, gone)

    def _members(self, service: Service, spec: NlbSpec, lb: Nlb, nodes: Sequence[Node]) -> None:
        owner = _owner(service, self.cluster_id)
        remote = self.api.server_groups(spec.group_tags)
        wants = list(
            zip((w.group for w in spec.listeners), self._servers(service, spec, nodes), strict=True)
        )
        ids = sync_groups(self.api, remote, wants, lb.vpc_id or self.vpc_id, spec.group_tags, owner)
        if not spec.reuse_id or spec.force_override:
            listeners = self.api.listeners(lb.id)
            mine = owner if spec.reuse_id else None
            kept = delete_listeners(self.api, listeners, spec.listeners, mine)
            sync_listeners(self.api, lb.id, kept, spec.listeners, ids)
        else:
            log.info("alibabacloud: %s: listener override is false, skip listeners", lb.id)
        cleanup_groups(self.api, remote, ids.values(), owner)

    def _servers(
        self, service: Service, spec: NlbSpec, nodes: Sequence[Node]
    ) -> list[list[Server]]:
        """Each listener's group's servers: every Node, or from the endpoints."""
        groups = [w.group for w in spec.listeners]
        mode = self._mode(service)
        if mode == "nodes" or self._endpoints is None:
            return [group_servers(service, g, nodes) for g in groups]
        endpoints = self._endpoints(service)
        if mode == "local":
            return [local_servers(service, g, endpoints, nodes) for g in groups]
        eni_of = self._eni_of(groups, endpoints)
        return [eni_servers(g, endpoints, eni_of) for g in groups]

    def _eni_of(
        self, groups: Sequence[GroupSpec], endpoints: Sequence[ServiceEndpoint]
    ) -> dict[str, str]:
        """``updateServerGroupENIBackendID``: one lookup; IPs without an ENI in a Warning."""
        ips = eni_ips(groups, endpoints)
        if not ips:
            return {}
        found = eni_ids(self.api.rpc, self.vpc_id, ips)
        missing = [ip for ip in ips if ip not in found]
        if missing:
            warn_service(
                "SkipSyncBackends", f"Not sync pods [{','.join(missing)}] whose eni is invalid"
            )
        return found

    # delete
    def delete(self, service: Service) -> None:
        """``deleteLoadBalancer`` and ``cleanup``: a balancer kccm made is deleted (deletion
        protection turned off first) with its server groups; with
        ``preserve-lb-on-delete`` it stays with its protections off, its listeners gone and
        the Service's tags removed from it and its groups; a reused one keeps everything but
        this Service's listeners (with override) and server groups."""
        balancer = self.find(service)
        if balancer is None:
            return
        owner = _owner(service, self.cluster_id)
        tags = {NAME_TAG: default_load_balancer_name(service), CLUSTER_TAG: self.cluster_id}
        groups = self.api.server_groups(tags)
        reuse = value(service, "loadbalancer-id") or ""
        preserve = bool(value(service, "loadbalancer-preserve-lb-on-delete"))
        if reuse or preserve:
            if not reuse or value(service, "loadbalancer-force-override-listeners") == "true":
                mine = owner if reuse else None
                delete_listeners(self.api, self.api.listeners(balancer.id), [], mine)
            if preserve and not reuse:
                self._preserve(balancer, tags)
        else:
            if balancer.delete_protection:
                self.api.set_protection(balancer.id, deletion=False)
            self.api.delete_and_wait(balancer.id)
            log.info("alibabacloud: deleted NLB %s", balancer.id)
        cleanup_groups(self.api, groups, (), owner, preserve=preserve and not reuse, tags=tags)

    def _preserve(self, lb: Nlb, tags: dict[str, str]) -> None:
        """``SetProtectionsOff`` and ``CleanupLoadBalancerTags``."""
        if lb.delete_protection or lb.modification_protection == "ConsoleProtection":
            self.api.set_protection(lb.id, deletion=False, modification="NonProtection")
        gone = [k for k, v in tags.items() if lb.tags.get(k) == v]
        if gone:
            self.api.untag(lb.id, gone)


def _zone_matches(want: ZoneMapping, lb: Nlb) -> bool:
    """``Update``'s zone check: the same zone and vSwitch, and the address and EIP when
    given."""
    return any(
        z.zone_id == want.zone_id
        and z.vswitch_id == want.vswitch_id
        and (not want.allocation_id or want.allocation_id == z.allocation_id)
        and (not want.ipv4 or want.ipv4 == z.ipv4)
        for z in lb.zones
    )
