"""The aws provider's shared balancers (kccm's
:class:`~kccm.cloudprovider.sharing.BalancerSharer`, docs/behaviour.md "Sharing one balancer";
docs/providers/aws.md "Sharing one NLB").

A share group ``(namespace, group)`` of NLB Services (``aws-load-balancer-type: nlb``) gets
one NLB, named by :func:`group_balancer_name` (``k8s-<ns:8>-<group:8>-<hash:10>``, shaped like
upstream's ``buildTargetGroupName`` and ``GetSecurityGroupNameForNLB`` names in
cloud-provider-aws ``pkg/providers/v1/aws_loadbalancer.go`` / ``aws.go``), tagged with the
cluster (``kubernetes.io/cluster/<id>=owned``) and :data:`SHARE_GROUP_TAG`. Each Service of
the group brings a listener and a target group per port, made by the same code as a Service's
own NLB (so the target groups keep upstream's names) and tagged, as upstream tags its target
groups, ``kubernetes.io/service-name=<namespace>/<name>``: the listener's tag says whose it is.
A Service's ensure, update and delete read those tags and touch only its own listeners; a
listener of another Service (or of nobody kccm knows) on one of its ports is an error, never
changed. The node security-group rules of a member are described with
``<nlb-name>:<namespace>/<name>`` (:func:`member_rule_owner`), so each member's rules come
and go with it. The last member's delete deletes the NLB.

What is per balancer on an NLB must be alike across the group (:func:`shared_settings`): the
scheme, the subnets and their Elastic IP / private addresses, the security groups, cross-zone
load balancing and access logs. Source ranges are per Service (node security-group rules), so
they may differ. A Classic ELB Service cannot share (a listener of a Classic ELB has no owner
of its own on AWS's side): its ensure fails naming the annotation.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    ANNOTATION_SHARE_GROUP,
    CloudProviderError,
    ImplementedElsewhere,
    InvalidServiceConfig,
    LoadBalancerStatus,
    Node,
    Service,
    ShareGroup,
)
from kccm.cloudprovider.sharing import share_group_of
from kccm.providers.aws.annotations import (
    CROSS_ZONE,
    INTERNAL,
    SECURITY_GROUPS,
    SUBNETS,
    TYPE,
    LoadBalancerSpec,
    ProbeMode,
    ServiceAnnotationError,
    handled_elsewhere,
    load_balancer_spec,
)
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.classic_spec import security_group_list
from kccm.providers.aws.loadbalancer import (
    LB,
    ImmutableChange,
    NetworkLoadBalancers,
    status_of,
    target_instance_ids,
)
from kccm.providers.aws.nlbgroups import NLBGroups
from kccm.providers.aws.nlboptions import (
    ACCESS_LOG_BUCKET,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_PREFIX,
    EIP_ALLOCATIONS,
    PRIVATE_IPV4,
)
from kccm.providers.aws.securitygroups import SecurityGroups
from kccm.providers.aws.tags import SERVICE_NAME_TAG, tag_dict

__all__ = [
    "SHARE_GROUP_TAG",
    "SharedNetworkLoadBalancers",
    "group_balancer_name",
    "group_balancer_of",
    "member_rule_owner",
    "published_hostname",
    "shared_settings",
]

log = logging.getLogger(__name__)

SHARE_GROUP_TAG = "kccm.io/share-group"
"""On the group's NLB, its listeners and target groups: ``<namespace>/<group>``."""
TAGS_PER_CALL = 20
"""``DescribeTags`` takes at most 20 ARNs."""
_NOT_ALNUM = re.compile(r"[^0-9A-Za-z]")
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_LISTS = (SUBNETS, SECURITY_GROUPS)
"""Balancer annotations whose order does not matter."""
_AS_GIVEN = (EIP_ALLOCATIONS, PRIVATE_IPV4, ACCESS_LOG_BUCKET, ACCESS_LOG_PREFIX)
"""Balancer annotations compared as written (the addresses go with the subnets in order)."""


def group_balancer_name(cluster_name: str, group: ShareGroup) -> str:
    """``k8s-<namespace:8>-<group:8>-<sha256:10>`` (at most 32 characters, AWS's limit), the
    hash over the cluster name, namespace and group; never the ``a<uid>`` of a Service's own
    NLB."""
    digest = hashlib.sha256()
    for part in (cluster_name, group.namespace, group.name):
        digest.update(part.encode() + b"\0")
    ns = _NOT_ALNUM.sub("", group.namespace)[:8]
    name = _NOT_ALNUM.sub("", group.name)[:8]
    return f"k8s-{ns}-{name}-{digest.hexdigest()[:10]}"


_GROUP_BALANCER = re.compile(r"k8s-[0-9A-Za-z]{0,8}-[0-9A-Za-z]{1,8}-[0-9a-f]{10}")


def group_balancer_of(hostname: str) -> str:
    """The group NLB's name in a hostname it published (AWS: ``[internal-]<name>-<id>.elb.
    <region>.amazonaws.com``); "" for any other hostname."""
    name = hostname.split(".", 1)[0].removeprefix("internal-").rpartition("-")[0]
    return name if _GROUP_BALANCER.fullmatch(name) else ""


def published_hostname(service: Service) -> str:
    """The first hostname in the Service's ``status.loadBalancer.ingress`` ("" if none)."""
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return str((ingress[0] if ingress else {}).get("hostname") or "")


def member_rule_owner(balancer: str, service_key: str) -> str:
    """What a member's node security-group rules are described with (after upstream's
    ``kubernetes.io/rule/nlb/client=``): the NLB and the Service."""
    return f"{balancer}:{service_key}"


def _annotations(service: Service) -> Mapping[str, str]:
    return (service.get("metadata") or {}).get("annotations") or {}


def _key(service: Service) -> str:
    meta = service.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _bool_text(value: str) -> str:
    """Go's ``strconv.ParseBool`` spellings as ``true``/``false``; anything else as written
    (the ensure refuses it, naming the annotation)."""
    return "true" if value in _TRUE else "false" if value in _FALSE else value


def shared_settings(service: Service) -> dict[str, str]:
    """What an NLB has once for all its listeners, by the annotation that sets it, in a form
    in which equal meanings compare equal (the scheme is always there: internet-facing by
    default). Pure: no AWS call, never raises."""
    annotations = _annotations(service)
    internal = annotations.get(INTERNAL, "") not in ("", "false")
    settings = {  # no TYPE: a Classic ELB Service fails its ensure with its own message
        INTERNAL: "internal" if internal else "internet-facing",
        CROSS_ZONE: _bool_text(annotations.get(CROSS_ZONE, "") or "false"),
    }
    for key in _LISTS:
        if key in annotations:
            settings[key] = ",".join(sorted(security_group_list(annotations[key])))
    for key in _AS_GIVEN:
        if key in annotations:
            settings[key] = ",".join(v.strip() for v in annotations[key].split(","))
    if ACCESS_LOG_ENABLED in annotations:
        settings[ACCESS_LOG_ENABLED] = _bool_text(annotations[ACCESS_LOG_ENABLED])
    return settings


class SharedNetworkLoadBalancers:
    """BalancerSharer on the provider's LoadBalancer (mixed into it)."""

    _api: AWSAPI
    _nlb: NetworkLoadBalancers
    _groups: SecurityGroups
    _own: NLBGroups
    _probe: ProbeMode

    def _is_nlb(self, service: Service) -> bool:
        raise NotImplementedError  # the LoadBalancer's

    def _nlb_of(self, service: Service) -> Mapping[str, Any] | None:
        raise NotImplementedError  # the LoadBalancer's: the Service's own NLB

    def _delete_own_balancer(self, cluster_name: str, service: Service) -> None:
        raise NotImplementedError  # the LoadBalancer's: the Service's own balancer

    def _sync_node_rules(
        self, owner: str, service: Service, nodes: Sequence[Node], lb: LB, spec: LoadBalancerSpec
    ) -> bool:
        raise NotImplementedError  # the LoadBalancer's

    # -- BalancerSharer -----------------------------------------------------------------------

    def sharing_settings(self, service: Service) -> Mapping[str, str]:
        return shared_settings(service)

    def get_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        if handled_elsewhere(service):
            return None, False
        lb = self._nlb.describe(group_balancer_name(cluster_name, group))
        if lb is None:
            return None, False
        mine, _ = self._split(lb, _key(service))
        return (status_of(lb), True) if mine else (None, False)

    def ensure_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        return status_of(self._ensure_member(cluster_name, group, service, nodes))

    def update_shared_load_balancer(
        self, cluster_name: str, group: ShareGroup, service: Service, nodes: Sequence[Node]
    ) -> None:
        """As a Service's own NLB (upstream ``UpdateLoadBalancer``): "not found" when the
        group's NLB is gone (the next ensure makes it again), else the whole ensure, so that
        a Node change repairs drift too (reads only when nothing changed)."""
        self._ensure_member(cluster_name, group, service, nodes, must_exist=True)

    def ensure_shared_load_balancer_deleted(
        self, cluster_name: str, group: ShareGroup, service: Service
    ) -> None:
        """The Service's node rules, listeners and target groups (those an interrupted ensure
        left without a listener too); the NLB with the last member's. Elastic IPs named by
        ``eip-allocations`` are the user's and stay allocated, as upstream leaves them."""
        if handled_elsewhere(service):
            return
        self._release(group_balancer_name(cluster_name, group), service, group)

    def _leave_published_group(self, service: Service, hostname: str) -> None:
        """For a Service no longer of a group (its annotation removed) that is still
        published on the group's NLB (``hostname``): its listeners, target groups and node
        rules there go, and the NLB when they were its last. Any other hostname: nothing, no
        AWS call (a Service's own balancer's name never starts ``k8s-``)."""
        name = group_balancer_of(hostname)
        if name:
            log.info("%s left the share group of the NLB %s", _key(service), name)
            self._release(name, service, None)

    def _release(self, name: str, service: Service, group: ShareGroup | None) -> None:
        """A member's delete from the NLB ``name``; ``group`` known: also the target groups an
        interrupted ensure left (found by name), and the NLB even when the Service had no
        listener left in it (the last member's delete)."""
        owner = member_rule_owner(name, _key(service))
        self._groups.sync_nlb_rules(owner, (), (), (), None)
        groups = self._remove_listeners(name, _key(service), empty_too=group is not None)
        spec = self._parsed(service) if group is not None else None
        if spec is not None and group is not None:
            for found in self._nlb._leftover_groups(spec, groups, _salt(group)):
                groups[found["TargetGroupArn"]] = found
        for arn in sorted(groups):
            self._nlb.groups.delete(arn)
        self._groups.sync_nlb_rules(owner, (), (), (), None)  # an update racing this delete

    def _shared_balancer_name(self, cluster_name: str, service: Service) -> str:
        """The group's NLB for an NLB Service of a group ("" for any other Service), for
        ``kccm explain`` (every member's listeners on it). No AWS call."""
        try:
            group = share_group_of(service)
        except InvalidServiceConfig:
            return ""
        if group is None or handled_elsewhere(service) or not self._is_nlb(service):
            return ""
        return group_balancer_name(cluster_name, group)

    # -- steps --------------------------------------------------------------------------------

    def _spec(self, service: Service) -> LoadBalancerSpec:
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        if not self._is_nlb(service):
            raise InvalidServiceConfig(
                ANNOTATION_SHARE_GROUP,
                f"{ANNOTATION_SHARE_GROUP} needs an NLB ({TYPE}: nlb) on aws: a Classic ELB "
                "is not shared; no load balancer is made for this Service",
            )
        return load_balancer_spec(service, self._probe)

    def _parsed(self, service: Service) -> LoadBalancerSpec | None:
        try:
            return load_balancer_spec(service, self._probe)
        except ServiceAnnotationError:
            return None  # no names to look for: only the listeners' groups go

    def _ensure_member(
        self,
        cluster_name: str,
        group: ShareGroup,
        service: Service,
        nodes: Sequence[Node],
        *,
        must_exist: bool = False,
    ) -> LB:
        spec = self._spec(service)  # bad input fails before any write
        name = group_balancer_name(cluster_name, group)
        lb = self._nlb.describe(name)
        if lb is None and must_exist:
            raise CloudProviderError(f"load balancer {name} of share group {group} not found")
        problems: list[str] = []
        balancer_tags = self._nlb._tagging.build({SHARE_GROUP_TAG: str(group)})
        if lb is None:
            lb = self._create(name, spec, balancer_tags, service)
        else:
            problems = self._nlb._immutable_differences(lb, spec)
            self._nlb._sync_tags(lb, balancer_tags)
            self._nlb._sync_security_groups(lb, self._security_groups(service))
        mine, others = self._split(lb, spec.service_key)
        _refuse_taken_ports(name, spec, others)
        tags = self._nlb._tagging.build(
            {**spec.extra_tags, SHARE_GROUP_TAG: str(group), SERVICE_NAME_TAG: spec.service_key}
        )
        instances = target_instance_ids(nodes, spec.target_labels)
        names = self._nlb.target_group_names(spec, _salt(group))
        self._nlb._sync_listeners(lb, spec, instances, tags, listeners=mine, names=names)
        self._nlb._sync_attributes(lb, spec)
        self._sync_node_rules(member_rule_owner(name, spec.service_key), service, nodes, lb, spec)
        if problems:
            raise ImmutableChange(
                f"the NLB {name} of share group {group} is otherwise up to date for "
                f"{spec.service_key}, but AWS cannot change an existing NLB's "
                f"{'; '.join(problems)}: the first Service of the group set it"
            )
        if group_balancer_of(published_hostname(service)) not in ("", name):
            self._leave_published_group(service, published_hostname(service))  # moved over
        if self._nlb_of(service) is not None:  # joined the group: its own NLB goes
            log.info("%s joined share group %s: deleting its own NLB", spec.service_key, group)
            self._delete_own_balancer(cluster_name, service)
        return lb

    def _create(
        self, name: str, spec: LoadBalancerSpec, tags: Mapping[str, str], service: Service
    ) -> LB:
        log.info("creating the NLB %s of share group %s", name, tags.get(SHARE_GROUP_TAG))
        return self._nlb._create(name, spec, tags, self._security_groups(service))

    def _security_groups(self, service: Service) -> tuple[str, ...]:
        """In ``NLBSecurityGroupMode = Managed``, the groups the Service names (bring your
        own); no managed group is made for a shared NLB: its filtering stays on the node
        security-group rules, per member."""
        if not self._own.managed:
            return ()
        return security_group_list(_annotations(service).get(SECURITY_GROUPS, ""))

    def _split(
        self, lb: LB, service_key: str
    ) -> tuple[list[Mapping[str, Any]], list[tuple[Mapping[str, Any], str]]]:
        """The balancer's listeners: the Service's own, and the others with their owner ("" if
        none is recorded)."""
        listeners = self._nlb._listeners(lb)
        owners = self._owners([str(li["ListenerArn"]) for li in listeners])
        mine, others = [], []
        for listener in listeners:
            owner = owners.get(str(listener["ListenerArn"]), "")
            if owner == service_key:
                mine.append(listener)
            else:
                others.append((listener, owner))
        return mine, others

    def _owners(self, arns: Sequence[str]) -> dict[str, str]:
        """Each listener's ``kubernetes.io/service-name`` tag, one ``DescribeTags`` per 20."""
        owners: dict[str, str] = {}
        for start in range(0, len(arns), TAGS_PER_CALL):
            chunk = list(arns[start : start + TAGS_PER_CALL])
            found = self._api.call("elbv2", "describe_tags", ResourceArns=chunk)
            for described in found.get("TagDescriptions") or ():
                tags = tag_dict(described.get("Tags"))
                owners[str(described.get("ResourceArn"))] = tags.get(SERVICE_NAME_TAG, "")
        return owners

    def _remove_listeners(
        self, name: str, service_key: str, *, empty_too: bool
    ) -> dict[str, Mapping[str, Any]]:
        """Delete the Service's listeners, or the whole NLB when no other listener is left
        (``empty_too``: also when the Service had none there); the target groups they
        forwarded to, by ARN."""
        lb = self._nlb.describe(name)
        if lb is None:
            return {}
        mine, others = self._split(lb, service_key)
        if not mine and not empty_too:
            return {}
        groups = dict(self._nlb.groups.of_listeners(mine))
        if not others:
            log.info("deleting the NLB %s: %s was the last Service of its group", name, service_key)
            self._api.call("elbv2", "delete_load_balancer", LoadBalancerArn=lb["LoadBalancerArn"])
            return groups
        for listener in mine:
            log.info("deleting listener %s of %s on %s", listener["Port"], service_key, name)
            self._api.call("elbv2", "delete_listener", ListenerArn=listener["ListenerArn"])
        return groups


def _salt(group: ShareGroup) -> str:
    """Hashed into a member's target group names (:meth:`NetworkLoadBalancers.target_group_names`):
    a Service joining a group gets new groups, not those of its own NLB (which go with it)."""
    return f"\0share:{group}"


def _refuse_taken_ports(
    name: str, spec: LoadBalancerSpec, others: Sequence[tuple[Mapping[str, Any], str]]
) -> None:
    """An NLB has one listener per port (whatever the protocol): a port of another Service's
    listener is never taken over."""
    taken = {int(listener["Port"]): owner for listener, owner in others}
    for mapping in spec.mappings:
        if mapping.port in taken:
            owner = taken[mapping.port] or "no Service (it has no kubernetes.io/service-name tag)"
            raise InvalidServiceConfig(
                ANNOTATION_SHARE_GROUP,
                f"share group NLB {name}: port {mapping.port} is a listener of {owner}; kccm "
                f"never changes another's listener, so {spec.service_key} gets none",
            )
