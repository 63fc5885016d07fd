"""The aws provider's LoadBalancer capability: upstream's dispatch between the balancer kinds.

Upstream ``EnsureLoadBalancer`` (``pkg/providers/v1/aws.go``) makes a Network Load Balancer
only for ``service.beta.kubernetes.io/aws-load-balancer-type: nlb``; ``external`` and
``nlb-ip`` belong to the AWS Load Balancer Controller; anything else, the annotation absent
included, gets a Classic ELB. The NLB path also opens the node security group to the NLB's
clients and health checks (``updateInstanceSecurityGroupsForNLB``), done here around the NLB
code so that the two stay independent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    BalancerView,
    CloudProviderError,
    ImplementedElsewhere,
    LoadBalancerStatus,
    Node,
    NodeExclusion,
    Service,
    default_load_balancer_name,
)
from kccm.providers.aws.annotations import (
    TARGET_NODE_LABELS,
    TYPE,
    LoadBalancerSpec,
    ProbeMode,
    ServiceAnnotationError,
    handled_elsewhere,
    load_balancer_spec,
)
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.classic import ClassicLoadBalancers
from kccm.providers.aws.config import AWSGlobalConfig
from kccm.providers.aws.describe import classic_view, nlb_view
from kccm.providers.aws.drain import NLBTargetHolding
from kccm.providers.aws.loadbalancer import (
    LB,
    NetworkLoadBalancers,
    node_matches,
    status_of,
    target_instance_ids,
)
from kccm.providers.aws.nlbgroups import MANAGED, NLBGroups
from kccm.providers.aws.nlboptions import TARGET_GROUP_ATTRIBUTES, key_value_list
from kccm.providers.aws.retention import ElasticIPRetention, nlb_allocations
from kccm.providers.aws.securitygroups import NodePorts, SecurityGroups
from kccm.providers.aws.sgrules import source_ranges
from kccm.providers.aws.sharing import (
    SharedNetworkLoadBalancers,
    group_balancer_of,
    published_hostname,
)
from kccm.providers.aws.tags import ClusterTagging
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["CLASSIC_HOST_SUFFIX", "ServiceLoadBalancers", "is_nlb", "service_load_balancers"]

log = logging.getLogger(__name__)

CLASSIC_HOST_SUFFIX = ".elb.amazonaws.com"
"""Upstream ``validateServiceAnnotations``: a Classic ELB's hostname ends so; an NLB's is
``.elb.<region>.amazonaws.com``."""


def _annotations(service: Service) -> Mapping[str, str]:
    return (service.get("metadata") or {}).get("annotations") or {}


def is_nlb(service: Service) -> bool:
    """Upstream ``isNLB``: only the value ``nlb``."""
    return _annotations(service).get(TYPE) == "nlb"


def kind_change_error(service: Service) -> ServiceAnnotationError | None:
    """Upstream ``validateServiceAnnotations``: the published hostname's shape says which kind
    of balancer serves the Service (a Classic ELB's ends ``.elb.amazonaws.com``); asking for
    the other kind is refused. ``None`` when the kinds agree (or nothing is published)."""
    hostname = published_hostname(service)
    if not hostname or hostname.endswith(CLASSIC_HOST_SUFFIX) != is_nlb(service):
        return None
    if is_nlb(service):
        return ServiceAnnotationError(
            f'cannot update Load Balancer Type annotation "{TYPE}" after creation for NLB '
            f"(the Service is published on the Classic ELB {hostname}; recreate the Service "
            "to change the kind)"
        )
    return ServiceAnnotationError(
        f'cannot update Load Balancer Type annotation "{TYPE}" after creation for Classic '
        f"Load Balancer (the Service is published on the NLB {hostname}: set {TYPE}: nlb "
        "to keep it: earlier kccm versions made NLBs without the annotation, upstream and "
        "kccm make a Classic ELB)"
    )


class ServiceLoadBalancers(ElasticIPRetention, NLBTargetHolding, SharedNetworkLoadBalancers):
    """The LoadBalancer capability: Classic ELB by default, NLB for ``type: nlb``; a share
    group's NLB Services share one NLB (:mod:`.sharing`)."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        nlb: NetworkLoadBalancers,
        groups: SecurityGroups,
        probe: ProbeMode = ProbeMode(),  # noqa: B008
        *,
        nlb_groups_managed: bool = False,
    ) -> None:
        self._api = api
        self._nlb = nlb
        self._groups = groups
        self._own = NLBGroups(groups, managed=nlb_groups_managed)
        self._probe = probe
        self.classic = ClassicLoadBalancers(api, tagging, groups, self._subnets, probe)
        # an NLB is never created over a Classic ELB of the same name (a type change)
        nlb.classic_exists = lambda name: self.classic.describe(name) is not None

    def _subnets(self, internal: bool, names: tuple[str, ...]) -> list[str]:
        """The NLB code's subnet discovery (upstream uses the same for both kinds)."""
        return self._nlb.subnets.for_balancer(names, internal)

    # -- LoadBalancer -------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        """BackendNodeSelector: Nodes left out by ``target-node-labels`` (both kinds)."""
        raw = _annotations(service).get(TARGET_NODE_LABELS, "")
        wanted = key_value_list(raw)
        if not wanted:
            return None
        why = f"does not match annotation {TARGET_NODE_LABELS}={raw}"
        return lambda node: None if node_matches(node, wanted) else why

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        if handled_elsewhere(service):
            return None, False
        if is_nlb(service):
            status, exists = self._nlb.get_load_balancer(cluster_name, service)
            if not exists and self._own.leftover(cluster_name, service):
                # the NLB went but AWS still held its group (DependencyViolation): it counts
                # as existing so that the service controller calls delete again (upstream
                # polls inside EnsureLoadBalancerDeleted instead), as for Classic ELB groups
                return None, True
            return status, exists
        status, exists = self.classic.get(service)
        if not exists and self._nlb_of(service) is not None:
            return self._nlb.get_load_balancer(cluster_name, service)  # made by an older kccm
        return status, exists

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        self._check_kind_unchanged(service)
        if not is_nlb(service):
            return self.classic.ensure(service, nodes)
        spec = load_balancer_spec(service, self._probe)  # bad input fails before any write
        spec, reclaimed = self._with_kept(cluster_name, service, spec)
        lb = self._ensure_nlb(cluster_name, service, nodes, spec)
        self._sync_nlb_rules(service, nodes, lb, spec)
        self._unmark(reclaimed)
        self._leave_published_group(service, published_hostname(service))
        return status_of(lb)

    def _nlb_allocations(self, service: Service) -> tuple[str, ...]:
        return nlb_allocations(service, self._probe) if self._is_nlb(service) else ()

    def _is_nlb(self, service: Service) -> bool:
        return not handled_elsewhere(service) and is_nlb(service)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        if not is_nlb(service):
            self.classic.update(service, nodes)
            return
        # upstream UpdateLoadBalancer's NLB branch: "Load balancer not found" when it is gone
        # (the controller's next ensure re-creates it), otherwise the whole EnsureLoadBalancer,
        # so drift is repaired on a Node change too (read-compare-write: reads when unchanged)
        if self._nlb_of(service) is None:
            meta = service.get("metadata") or {}
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            name = default_load_balancer_name(service)
            raise CloudProviderError(f"load balancer {name} of {key} not found")
        self.ensure_load_balancer(cluster_name, service, nodes)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        if handled_elsewhere(service):
            return
        self._leave_published_group(service, published_hostname(service))
        self._delete_own_balancer(cluster_name, service)

    def _delete_own_balancer(self, cluster_name: str, service: Service) -> None:
        """The Service's own balancer (``a<uid>``), of either kind, and what goes with it."""
        if not is_nlb(service):
            self.classic.delete(service)
            # an NLB of this name (kccm before Classic ELB support made NLBs by default)
            if self._nlb_of(service) is None:
                return
        # the node rules before the balancer (a failure leaves the balancer for the retry to
        # find) and after it, as upstream (a rule an update racing this delete added is gone)
        name = default_load_balancer_name(service)
        lb = self._nlb_of(service)
        own = self._own.to_delete(service, (lb or {}).get("SecurityGroups") or ())
        self._groups.sync_nlb_rules(name, (), (), (), None)
        self._nlb.ensure_load_balancer_deleted(cluster_name, service)
        self._groups.sync_nlb_rules(name, (), (), (), None)
        # upstream EnsureLoadBalancerDeleted: the NLB's own groups go after it; a retry after
        # DependencyViolation no longer finds the balancer, so the managed group by its name
        left = self._own.leftover(cluster_name, service)
        self._own.delete(sorted({*own, *left}), name)

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """kccm's optional describe (``kccm explain``): the balancer of the kind the Service
        asks for (a Classic ELB's Service may still have an NLB an older kccm made), its
        listeners and their targets' health (:mod:`.describe`); ``None`` when there is none.
        An NLB Service of a share group: the group's NLB, every member's listeners."""
        if handled_elsewhere(service):
            return None
        name = self._shared_balancer_name(cluster_name, service) or default_load_balancer_name(
            service
        )
        if not is_nlb(service):
            classic = self.classic.describe(name)
            if classic is not None:
                return classic_view(self._api, classic)
        lb = self._nlb.describe(name)
        return None if lb is None else nlb_view(self._api, lb)

    def _check_kind_unchanged(self, service: Service) -> None:
        """Upstream's hostname check, confirmed with AWS before refusing: the balancer of the
        kind asked for, publishing that very hostname, means the kind did not change (moto
        names its NLBs like Classic ELBs: the shapes alone would refuse them)."""
        if TARGET_GROUP_ATTRIBUTES in _annotations(service) and not is_nlb(service):
            raise ServiceAnnotationError(
                "target group attributes annotation is only supported for NLB"
            )
        error = kind_change_error(service)
        if error is None or (is_nlb(service) and group_balancer_of(published_hostname(service))):
            return  # (published on a share group's NLB, which it is leaving: an NLB too)
        if is_nlb(service):
            lb = self._nlb_of(service)
        else:
            lb = self.classic.describe(default_load_balancer_name(service))
        if lb is None or lb.get("DNSName") != published_hostname(service):
            raise error

    # -- the NLB's own security group (NLBSecurityGroupMode = Managed) -------------------------

    def _ensure_nlb(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], spec: LoadBalancerSpec
    ) -> LB:
        """Upstream ``EnsureLoadBalancer``'s NLB branch: ``ensureNLBSecurityGroup``, then
        ``ensureLoadBalancerv2`` with those groups, then ``ensureNLBSecurityGroupRules`` and
        the clean-up of detached owned groups."""
        sources = self._source_ranges(service)
        existing = self._nlb_of(service) if self._own.managed else None
        wanted, managed_id = self._own.choose(cluster_name, service, existing)
        lb = self._nlb.ensure(service, nodes, wanted, spec)
        if managed_id:
            self._own.sync_rules(managed_id, spec, sources)
        before = list((existing or {}).get("SecurityGroups") or ()) if wanted else []
        if wanted and not managed_id:  # bring your own: a managed group left is detached too
            before += self._own.leftover(cluster_name, service)
        if before:
            self._own.detached(before, wanted or (), default_load_balancer_name(service))
        return lb

    @staticmethod
    def _source_ranges(service: Service) -> tuple[str, ...]:
        try:
            return source_ranges(service)
        except ValueError as err:
            raise ServiceAnnotationError(str(err)) from None

    # -- the NLB's node security-group rules ----------------------------------------------------

    def _nlb_of(self, service: Service) -> Mapping[str, Any] | None:
        return self._nlb.describe(default_load_balancer_name(service))

    def _sync_nlb_rules(
        self, service: Service, nodes: Sequence[Node], lb: LB, spec: LoadBalancerSpec
    ) -> None:
        """Upstream ``updateInstanceSecurityGroupsForNLB`` as called at the end of the NLB
        branch of ``EnsureLoadBalancer`` (and so of ``UpdateLoadBalancer``)."""
        if self._sync_node_rules(lb["LoadBalancerName"], service, nodes, lb, spec):
            self._undo_if_deleted(service)

    def _sync_node_rules(
        self, owner: str, service: Service, nodes: Sequence[Node], lb: LB, spec: LoadBalancerSpec
    ) -> bool:
        """The node security-group rules of ``spec``'s ports on ``lb``, described with
        ``owner`` (the balancer's name; a shared balancer's member has its own); True when a
        rule was added."""
        if self._groups.disable_ingress:
            return False
        subnet_ids = sorted(z["SubnetId"] for z in lb.get("AvailabilityZones") or ())
        subnets = self._api.pages("ec2", "describe_subnets", "Subnets", SubnetIds=subnet_ids)
        cidrs = sorted({s["CidrBlock"] for s in subnets})
        clients = self._source_ranges(service)
        instances = self._groups.instances(target_instance_ids(nodes, spec.target_labels))
        ports = NodePorts(
            traffic=frozenset(m.node_port for m in spec.mappings),
            health=frozenset(
                m.node_port if m.health.port == "traffic-port" else int(m.health.port)
                for m in spec.mappings
            ),
            protocol="udp" if any(m.protocol == "UDP" for m in spec.mappings) else "tcp",
        )
        return self._groups.sync_nlb_rules(owner, instances.values(), cidrs, clients, ports)

    def _undo_if_deleted(self, service: Service) -> None:
        """Rules added while the Service was being deleted (an update racing the delete that
        had already revoked them) would outlive the balancer: take them back."""
        if self._nlb_of(service) is None:
            name = default_load_balancer_name(service)
            log.info("load balancer %s deleted meanwhile: revoking its rules again", name)
            self._groups.sync_nlb_rules(name, (), (), (), None)


def service_load_balancers(
    api: AWSAPI,
    tagging: ClusterTagging,
    nlb: NetworkLoadBalancers,
    glob: AWSGlobalConfig,
    probe: ProbeMode,
    clock: Clock = REAL_CLOCK,
) -> ServiceLoadBalancers:
    """The capability the provider hands out, from the cloud config's ``[Global]``."""
    groups = SecurityGroups(
        api,
        tagging,
        nlb.vpc_id,
        disable_ingress=glob.disable_security_group_ingress,
        elb_security_group=glob.elb_security_group,
        clock=clock,
    )
    managed = glob.nlb_security_group_mode == MANAGED
    return ServiceLoadBalancers(api, tagging, nlb, groups, probe, nlb_groups_managed=managed)
