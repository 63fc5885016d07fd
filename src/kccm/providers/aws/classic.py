"""Service load balancers as Classic ELBs: upstream cloud-provider-aws's default for a
LoadBalancer Service without ``aws-load-balancer-type`` (``EnsureLoadBalancer``'s non-NLB
branch and ``ensureLoadBalancer`` in ``aws_loadbalancer.go``).

The balancer is named as upstream names it (``a`` + the UID without dashes, 32 characters),
so a Classic ELB the upstream CCM created is found and adopted with its hostname. Each ensure
reads the balancer and writes only what differs from what the Service asks: listeners,
subnets, security groups, proxy protocol, SSL negotiation policy, health check, attributes,
tags, registered instances and the security-group rules (see ``securitygroups.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    RetryError,
    Service,
    default_load_balancer_name,
)
from kccm.providers.aws.annotations import INTERNAL, ProbeMode
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.classic_spec import (
    EXTRA_SECURITY_GROUPS,
    SECURITY_GROUPS,
    Attributes,
    ClassicSpec,
    Listener,
    classic_spec,
    security_group_list,
)
from kccm.providers.aws.loadbalancer import ImmutableChange, target_instance_ids
from kccm.providers.aws.securitygroups import Instance, SecurityGroups
from kccm.providers.aws.tags import SERVICE_NAME_TAG, ClusterTagging, tag_dict

__all__ = [
    "PROXY_PROTOCOL_POLICY",
    "ClassicLoadBalancers",
    "classic_status",
    "security_group_name",
]

log = logging.getLogger(__name__)

PROXY_PROTOCOL_POLICY = "k8s-proxyprotocol-enabled"
"""Upstream ``ProxyProtocolPolicyName``."""
SSL_POLICY_FORMAT = "k8s-SSLNegotiationPolicy-{}"
"""Upstream ``SSLNegotiationPolicyNameFormat``."""

LB = Mapping[str, Any]
Subnets = Callable[[bool, tuple[str, ...]], list[str]]


def _code(err: BaseException) -> str:
    return str(getattr(err, "code", ""))


def security_group_name(lb_name: str) -> str:
    """Upstream ``buildELBSecurityGroupList``: ``k8s-elb-<load balancer name>``."""
    return f"k8s-elb-{lb_name}"


def classic_status(lb: LB) -> LoadBalancerStatus:
    """Upstream ``toStatus``: the DNS name as ingress hostname."""
    if lb.get("DNSName"):
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=lb["DNSName"])])
    return LoadBalancerStatus()


class ClassicLoadBalancers:
    """Classic ELBs for Services (see the module docstring)."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        groups: SecurityGroups,
        subnets: Subnets,
        probe: ProbeMode = ProbeMode(),  # noqa: B008
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._groups = groups
        self._subnets = subnets
        self._probe = probe

    def describe(self, name: str) -> LB | None:
        try:
            found = self._api.call("elb", "describe_load_balancers", LoadBalancerNames=[name])
        except CloudProviderError as err:
            if _code(err) in ("LoadBalancerNotFound", "AccessPointNotFound"):
                return None
            raise
        balancers = found.get("LoadBalancerDescriptions") or []
        return balancers[0] if balancers else None

    # -- the LoadBalancer methods (the dispatcher picks this class) -----------------------------

    def get(self, service: Service) -> tuple[LoadBalancerStatus | None, bool]:
        """The balancer's status; a balancer already deleted whose own security group AWS
        still held counts as existing, so that the service controller calls delete again
        (upstream waits for the group inside its delete instead)."""
        name = default_load_balancer_name(service)
        lb = self.describe(name)
        if lb is not None:
            return classic_status(lb), True
        group = self._groups.by_name(security_group_name(name))
        leftover = (
            group is not None
            and self._tagging.owns(group.get("Tags"))
            and group["GroupId"] not in self._groups.abandoned
        )
        return None, leftover

    def ensure(self, service: Service, nodes: Sequence[Node]) -> LoadBalancerStatus:
        spec = classic_spec(service, self._probe)
        name = default_load_balancer_name(service)
        instances = self._groups.instances(target_instance_ids(nodes, spec.target_labels))
        subnets = self._subnets(spec.internal, spec.subnets)
        group_ids = self._balancer_groups(name, spec)
        lb = self.describe(name)
        problem = ""
        if lb is None:
            lb = self._create(name, spec, subnets, group_ids)
        else:
            problem = _scheme_problem(lb, spec)
            lb = self._sync(lb, spec, subnets, group_ids)
        if not _uses_own_group(spec, self._groups.elb_security_group):
            self._delete_leftover_group(name, (spec.security_groups, spec.extra_security_groups))
        if spec.ssl_policy is not None:
            self._ssl_policy(lb, spec.ssl_policy)
        self._sync_health(lb, spec)
        self._sync_node_rule(lb, spec, instances.values())
        self._sync_instances(lb, set(instances))
        log.debug("load balancer %s of %s has DNS name %s", name, spec.service_key, lb["DNSName"])
        if problem:
            raise ImmutableChange(
                f"load balancer {name} of {spec.service_key} is otherwise up to date, but AWS "
                f"cannot change an existing Classic ELB's {problem}: delete and re-create the "
                "Service to apply it, or revert the annotation"
            )
        return classic_status(lb)

    def update(self, service: Service, nodes: Sequence[Node]) -> None:
        """Upstream ``UpdateLoadBalancer``: SSL policy, instances and the node group rule."""
        spec = classic_spec(service, self._probe)
        name = default_load_balancer_name(service)
        lb = self.describe(name)
        if lb is None:
            raise CloudProviderError(f"load balancer {name} of {spec.service_key} not found")
        instances = self._groups.instances(target_instance_ids(nodes, spec.target_labels))
        if spec.ssl_policy is not None:
            self._ssl_policy(lb, spec.ssl_policy)
        self._sync_instances(lb, set(instances))
        self._sync_node_rule(lb, spec, instances.values())

    def delete(self, service: Service) -> None:
        """Upstream ``EnsureLoadBalancerDeleted``: the node group rule, the balancer, then its
        own security group (retried while AWS still holds it)."""
        name = default_load_balancer_name(service)
        annotated = _annotated_groups(service)
        lb = self.describe(name)
        if lb is None:
            self._delete_leftover_group(name, annotated)
            return
        lb_groups = list(lb.get("SecurityGroups") or ())
        doomed = self._groups_to_delete(lb_groups, annotated)
        if lb_groups:
            lb_group = _first_group(lb_groups, annotated)
            self._groups.sync_elb_ingress(lb_group, (), deleting=lb_group in doomed)
        log.info("deleting load balancer %s", name)
        self._api.call("elb", "delete_load_balancer", LoadBalancerName=name)
        for group_id in sorted(doomed):
            self._groups.revoke_references(group_id)
        self._groups.delete_groups(doomed, name)

    # -- security groups ----------------------------------------------------------------------

    def _balancer_groups(self, name: str, spec: ClassicSpec) -> list[str]:
        """Upstream ``buildELBSecurityGroupList``: the annotated groups, else the cloud
        config's ``ElbSecurityGroup``, else the balancer's own (its rules set here), then the
        extra groups."""
        ids = list(spec.security_groups)
        if not ids and self._groups.elb_security_group:
            ids = [self._groups.elb_security_group]
        if not ids:
            description = f"Security group for Kubernetes ELB {name} ({spec.service_key})"
            own = self._groups.ensure_group(security_group_name(name), description, spec.extra_tags)
            self._groups.set_ingress(own, set(spec.ingress))
            ids = [own["GroupId"]]
        return ids + [g for g in spec.extra_security_groups if g not in ids]

    @staticmethod
    def _balancer_group(lb: LB, spec: ClassicSpec) -> str:
        groups = list(lb.get("SecurityGroups") or ())
        if not groups:
            raise CloudProviderError(
                f"could not determine security group for load balancer: {lb['LoadBalancerName']}"
            )
        return _first_group(groups, (spec.security_groups, spec.extra_security_groups))

    def _groups_to_delete(
        self, lb_groups: Sequence[str], annotated: tuple[tuple[str, ...], tuple[str, ...]]
    ) -> set[str]:
        """Upstream ``buildSecurityGroupsToDelete``: the balancer's groups that carry the
        cluster tag, minus the cloud config's group and the annotated ones."""
        named = set(annotated[0]) | set(annotated[1])
        return {
            gid
            for gid, group in self._groups.describe(lb_groups).items()
            if gid != self._groups.elb_security_group
            and gid not in named
            and self._tagging.owns(group.get("Tags"))
        }

    def _delete_leftover_group(
        self, name: str, annotated: tuple[tuple[str, ...], tuple[str, ...]]
    ) -> None:
        """The balancer is gone but its own group may remain (a delete retried after AWS
        still held the group): finish the job."""
        group = self._groups.by_name(security_group_name(name))
        if group is None or group["GroupId"] in {*annotated[0], *annotated[1]}:
            return
        if group["GroupId"] in self._groups.abandoned:  # in use for 10 minutes: left, as upstream
            return
        if self._tagging.owns(group.get("Tags")):
            self._groups.revoke_references(group["GroupId"])
            self._groups.delete_groups([group["GroupId"]], name)

    def _replace_groups(self, lb: LB, wanted: list[str]) -> bool:
        actual = list(lb.get("SecurityGroups") or ())
        if set(actual) == set(wanted):
            return False
        name = lb["LoadBalancerName"]
        log.info("applying security groups %s to load balancer %s", wanted, name)
        self._api.call(
            "elb",
            "apply_security_groups_to_load_balancer",
            LoadBalancerName=name,
            SecurityGroups=wanted,
        )
        # upstream removeOwnedSecurityGroups: the replaced groups the cluster owns go away (one
        # AWS still holds is retried by the leftover-group step of the following ensures)
        dropped = self._groups.describe(set(actual) - set(wanted))
        for gid, group in sorted(dropped.items()):
            self._groups.revoke_references(gid)
            if self._groups.is_owned(group):
                try:
                    self._groups.delete_groups([gid], name)
                except RetryError as err:
                    log.info("%s", err)
        return True

    # -- create and sync ----------------------------------------------------------------------

    def _create(self, name: str, spec: ClassicSpec, subnets: list[str], groups: list[str]) -> LB:
        tags = self._tagging.build({**spec.extra_tags, SERVICE_NAME_TAG: spec.service_key})
        params: dict[str, Any] = {
            "LoadBalancerName": name,
            "Listeners": [listener.api() for listener in spec.listeners],
            "Subnets": subnets,
            "SecurityGroups": groups,
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
        }
        if spec.internal:
            params["Scheme"] = "internal"
        log.info("creating load balancer %s for %s in %s", name, spec.service_key, subnets)
        self._api.call("elb", "create_load_balancer", **params)
        if spec.proxy_protocol:
            self._create_proxy_policy(name)
            for port in sorted({li.instance_port for li in spec.listeners}):
                self._backend_policies(name, port, [PROXY_PROTOCOL_POLICY])
        self._sync_attributes(name, spec.attributes)
        return self._must_describe(name)

    def _sync(self, lb: LB, spec: ClassicSpec, subnets: list[str], groups: list[str]) -> LB:
        name = lb["LoadBalancerName"]
        dirty = self._sync_subnets(lb, subnets)
        dirty = self._replace_groups(lb, groups) or dirty
        dirty = self._sync_listeners(lb, spec.listeners) or dirty
        dirty = self._sync_proxy_protocol(lb, spec) or dirty
        self._sync_tags(name, spec.extra_tags)
        dirty = self._sync_attributes(name, spec.attributes) or dirty
        return self._must_describe(name) if dirty else lb

    def _must_describe(self, name: str) -> LB:
        lb = self.describe(name)
        if lb is None:
            raise CloudProviderError(f"load balancer {name} vanished while being ensured")
        return lb

    def _sync_subnets(self, lb: LB, wanted: list[str]) -> bool:
        name, actual = lb["LoadBalancerName"], set(lb.get("Subnets") or ())
        removals, additions = sorted(actual - set(wanted)), sorted(set(wanted) - actual)
        if removals:
            log.info("detaching load balancer %s from subnets %s", name, removals)
            self._api.call(
                "elb", "detach_load_balancer_from_subnets", LoadBalancerName=name, Subnets=removals
            )
        if additions:
            log.info("attaching load balancer %s to subnets %s", name, additions)
            self._api.call(
                "elb", "attach_load_balancer_to_subnets", LoadBalancerName=name, Subnets=additions
            )
        return bool(removals or additions)

    def _sync_listeners(self, lb: LB, wanted: tuple[Listener, ...]) -> bool:
        """Upstream ``syncElbListeners``: delete the listeners nothing asks for, create the
        missing ones."""
        name = lb["LoadBalancerName"]
        actual = [d["Listener"] for d in lb.get("ListenerDescriptions") or () if d.get("Listener")]
        removals = sorted(
            {int(a["LoadBalancerPort"]) for a in actual if not any(w.matches(a) for w in wanted)}
        )
        additions = [w for w in wanted if not any(w.matches(a) for a in actual)]
        if removals:
            log.info("deleting listeners %s of load balancer %s", removals, name)
            self._api.call(
                "elb",
                "delete_load_balancer_listeners",
                LoadBalancerName=name,
                LoadBalancerPorts=removals,
            )
        if additions:
            log.info("creating %d listener(s) on load balancer %s", len(additions), name)
            self._api.call(
                "elb",
                "create_load_balancer_listeners",
                LoadBalancerName=name,
                Listeners=[a.api() for a in additions],
            )
        return bool(removals or additions)

    def _sync_proxy_protocol(self, lb: LB, spec: ClassicSpec) -> bool:
        """Upstream's proxy-protocol sync: the policy on every listener's backend port when
        asked for, on none otherwise (the policy itself is only created when missing)."""
        name = lb["LoadBalancerName"]
        backends = {
            int(b["InstancePort"]): list(b.get("PolicyNames") or ())
            for b in lb.get("BackendServerDescriptions") or ()
        }
        policies = [PROXY_PROTOCOL_POLICY] if spec.proxy_protocol else []
        if spec.proxy_protocol and PROXY_PROTOCOL_POLICY not in _other_policies(lb):
            self._create_proxy_policy(name)
        ports = {li.instance_port for li in spec.listeners}
        dirty = False
        for port in sorted(ports | backends.keys()):
            enabled = PROXY_PROTOCOL_POLICY in backends.get(port, ())
            want = spec.proxy_protocol and port in ports
            if enabled != want and (want or backends.get(port)):
                self._backend_policies(name, port, policies if want else [])
                dirty = True
        return dirty

    def _create_proxy_policy(self, name: str) -> None:
        self._api.call(
            "elb",
            "create_load_balancer_policy",
            LoadBalancerName=name,
            PolicyName=PROXY_PROTOCOL_POLICY,
            PolicyTypeName="ProxyProtocolPolicyType",
            PolicyAttributes=[{"AttributeName": "ProxyProtocol", "AttributeValue": "true"}],
        )

    def _backend_policies(self, name: str, port: int, policies: list[str]) -> None:
        log.info("load balancer %s: backend port %d policies %s", name, port, policies)
        self._api.call(
            "elb",
            "set_load_balancer_policies_for_backend_server",
            LoadBalancerName=name,
            InstancePort=port,
            PolicyNames=policies,
        )

    def _sync_tags(self, name: str, extra: Mapping[str, str]) -> None:
        """Upstream adds the additional-resource-tags on every ensure; here only the missing
        or different ones."""
        if not extra:
            return
        found = self._api.call("elb", "describe_tags", LoadBalancerNames=[name])
        descriptions = found.get("TagDescriptions") or [{}]
        actual = tag_dict(descriptions[0].get("Tags"))
        add = {k: v for k, v in extra.items() if actual.get(k) != v}
        if add:
            self._api.call(
                "elb",
                "add_tags",
                LoadBalancerNames=[name],
                Tags=[{"Key": k, "Value": v} for k, v in sorted(add.items())],
            )

    def _sync_attributes(self, name: str, wanted: Attributes) -> bool:
        found = self._api.call("elb", "describe_load_balancer_attributes", LoadBalancerName=name)
        if wanted.matches(found.get("LoadBalancerAttributes") or {}):
            return False
        log.info("updating attributes of load balancer %s", name)
        self._api.call(
            "elb",
            "modify_load_balancer_attributes",
            LoadBalancerName=name,
            LoadBalancerAttributes=wanted.api(),
        )
        return True

    def _ssl_policy(self, lb: LB, policy: str) -> None:
        """Upstream ``ensureSSLNegotiationPolicy`` + ``setSSLNegotiationPolicy`` on every
        SSL/HTTPS listener (written only where it is not set yet)."""
        name, policy_name = lb["LoadBalancerName"], SSL_POLICY_FORMAT.format(policy)
        try:
            found = self._api.call(
                "elb",
                "describe_load_balancer_policies",
                LoadBalancerName=name,
                PolicyNames=[policy_name],
            )
        except CloudProviderError as err:
            if _code(err) != "PolicyNotFound":
                raise
            found = {}
        if not found.get("PolicyDescriptions"):
            self._api.call(
                "elb",
                "create_load_balancer_policy",
                LoadBalancerName=name,
                PolicyName=policy_name,
                PolicyTypeName="SSLNegotiationPolicyType",
                PolicyAttributes=[
                    {"AttributeName": "Reference-Security-Policy", "AttributeValue": policy}
                ],
            )
        for described in lb.get("ListenerDescriptions") or ():
            listener = described.get("Listener") or {}
            if str(listener.get("Protocol", "")).upper() not in ("SSL", "HTTPS"):
                continue
            if list(described.get("PolicyNames") or ()) == [policy_name]:
                continue
            self._api.call(
                "elb",
                "set_load_balancer_policies_of_listener",
                LoadBalancerName=name,
                LoadBalancerPort=int(listener["LoadBalancerPort"]),
                PolicyNames=[policy_name],
            )

    def _sync_health(self, lb: LB, spec: ClassicSpec) -> None:
        if spec.health.matches(lb.get("HealthCheck") or {}):
            return
        log.info("configuring health check %s of %s", spec.health.target, lb["LoadBalancerName"])
        self._api.call(
            "elb",
            "configure_health_check",
            LoadBalancerName=lb["LoadBalancerName"],
            HealthCheck=spec.health.api(),
        )

    def _sync_node_rule(self, lb: LB, spec: ClassicSpec, instances: Iterable[Instance]) -> None:
        """The node groups admit the balancer's group; a rule added while the Service was
        being deleted (an update racing the delete) is taken back."""
        lb_group = self._balancer_group(lb, spec)
        added = self._groups.sync_elb_ingress(lb_group, instances, deleting=False)
        if added and self.describe(lb["LoadBalancerName"]) is None:
            self._groups.revoke_references(lb_group)

    def _sync_instances(self, lb: LB, wanted: set[str]) -> None:
        """Upstream ``ensureLoadBalancerInstances``: exactly ``wanted`` registered."""
        name = lb["LoadBalancerName"]
        actual = {str(i["InstanceId"]) for i in lb.get("Instances") or ()}
        add, remove = sorted(wanted - actual), sorted(actual - wanted)
        if add:
            log.info("registering %d instance(s) with load balancer %s", len(add), name)
            self._api.call("elb", "register_instances_with_load_balancer", **_members(name, add))
        if remove:
            log.info("deregistering %d instance(s) from load balancer %s", len(remove), name)
            self._api.call(
                "elb", "deregister_instances_from_load_balancer", **_members(name, remove)
            )


def _members(name: str, ids: list[str]) -> dict[str, Any]:
    """The arguments of ``(de)register_instances_with/from_load_balancer``."""
    return {"LoadBalancerName": name, "Instances": [{"InstanceId": i} for i in ids]}


def _scheme_problem(lb: LB, spec: ClassicSpec) -> str:
    """The scheme AWS cannot change (upstream: ``// TODO: Sync internal vs non-internal``,
    silently kept); reported like the NLB's, naming the annotation."""
    scheme = "internal" if spec.internal else "internet-facing"
    actual = str(lb.get("Scheme") or "internet-facing")
    if actual == scheme:
        return ""
    return f"scheme ({INTERNAL} asks {scheme}, it is {actual})"


def _uses_own_group(spec: ClassicSpec, elb_security_group: str) -> bool:
    return not spec.security_groups and not elb_security_group


def _other_policies(lb: LB) -> list[str]:
    return list((lb.get("Policies") or {}).get("OtherPolicies") or ())


def _annotated_groups(service: Service) -> tuple[tuple[str, ...], tuple[str, ...]]:
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    return (
        security_group_list(annotations.get(SECURITY_GROUPS, "")),
        security_group_list(annotations.get(EXTRA_SECURITY_GROUPS, "")),
    )


def _first_group(groups: Sequence[str], annotated: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    """Upstream ``sortELBSecurityGroupList``'s head: the first annotated group, else the first
    group that is not an extra one."""
    named, extras = annotated
    for gid in named:
        if gid in groups:
            return gid
    rest = [g for g in groups if g not in extras]
    return (rest or list(groups))[0]
