"""Service load balancers as Network Load Balancers (upstream ``ensureLoadBalancerv2``).

One NLB per Service, named like upstream (``a`` + the UID without dashes, 32 characters); per
Service port a TCP/UDP/TLS listener forwarding to a target group of instances on the node port,
named ``k8s-<ns>-<name>-<hash>``. Everything created carries the cluster tag
(``kubernetes.io/cluster/<id>=owned``) and ``kubernetes.io/service-name=<ns>/<name>``.

Ensure and update are read-compare-write: they read the balancer, its tags and attributes,
listeners, target groups (health checks, attributes) and targets, compare them with what the
Service and the nodes ask for, and write only the difference. Nothing changed means no
mutating call; anything changed behind kccm's back (a listener or target group deleted, a
health check, targets, attributes or tags edited) is put back; a deleted balancer is created
again under the same name. What AWS cannot change on an existing NLB (scheme, subnets,
addresses) is reported as an error naming the annotation (a Warning event, never "Ensured"),
after everything else has been brought in line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    ImplementedElsewhere,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    Service,
    default_load_balancer_name,
)
from kccm.cloudprovider.nodes import node_provider_id
from kccm.providers.aws.annotations import (
    INTERNAL,
    SUBNETS,
    TYPE,
    LoadBalancerSpec,
    PortMapping,
    ProbeMode,
    ServiceAnnotationError,
    handled_elsewhere,
    load_balancer_spec,
)
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.nlboptions import EIP_ALLOCATIONS, PRIVATE_IPV4
from kccm.providers.aws.subnets import SubnetFinder
from kccm.providers.aws.tags import SERVICE_NAME_TAG, ClusterTagging, parse_provider_id, tag_dict
from kccm.providers.aws.targetgroups import (
    TargetGroups,
    aws_tags,
    error_code_of,
    forward_arn,
)

__all__ = [
    "ImmutableChange",
    "NetworkLoadBalancers",
    "node_matches",
    "status_of",
    "target_instance_ids",
]

log = logging.getLogger(__name__)

CROSS_ZONE_ATTRIBUTE = "load_balancing.cross_zone.enabled"

LB = Mapping[str, Any]


class ImmutableChange(ServiceAnnotationError):
    """The Service asks for something AWS cannot change on an existing balancer."""


def status_of(lb: LB) -> LoadBalancerStatus:
    """Upstream ``v2toStatus``: the DNS name, once the NLB is provisioning or active."""
    state = (lb.get("State") or {}).get("Code", "")
    if lb.get("DNSName") and state in ("active", "provisioning"):
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=lb["DNSName"])])
    return LoadBalancerStatus()


def node_matches(node: Node, wanted: Mapping[str, str]) -> bool:
    """Upstream's ``target-node-labels`` test: every wanted label is set (to the value, when
    one is given)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(k in labels and (not v or labels[k] == v) for k, v in wanted.items())


def target_instance_ids(nodes: Sequence[Node], labels: Mapping[str, str]) -> list[str]:
    """Instance IDs of the nodes (with an aws providerID) that match the target labels."""
    ids = set()
    for node in nodes:
        pid = node_provider_id(node)
        if not pid or not node_matches(node, labels):
            continue
        try:
            ref = parse_provider_id(pid)
        except ValueError:
            ref = None
        if ref is not None:
            ids.add(ref.instance_id)
    return sorted(ids)


def subnet_mappings(spec: LoadBalancerSpec, subnets: Sequence[str]) -> list[dict[str, str]]:
    """Upstream ``createSubnetMappings``: one per subnet, with its EIP / private address."""
    options = spec.options
    for key, values in (
        (EIP_ALLOCATIONS, options.eip_allocations),
        (PRIVATE_IPV4, options.private_ipv4),
    ):
        if values and len(values) != len(subnets):
            raise ServiceAnnotationError(
                f"annotation {key}: must have the same number of entries ({len(values)}) as "
                f"subnets ({len(subnets)}: {', '.join(subnets)})"
            )
    mappings = []
    for index, subnet in enumerate(subnets):
        mapping = {"SubnetId": subnet}
        if options.eip_allocations:
            mapping["AllocationId"] = options.eip_allocations[index]
        if options.private_ipv4:
            mapping["PrivateIPv4Address"] = options.private_ipv4[index]
        mappings.append(mapping)
    return mappings


class NetworkLoadBalancers:
    """The LoadBalancer capability (see the module docstring)."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        *,
        vpc_id: str = "",
        subnet_id: str = "",
        probe: ProbeMode = ProbeMode(),  # noqa: B008
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._probe = probe
        self.subnets = SubnetFinder(api, tagging, vpc_id=vpc_id, subnet_id=subnet_id)
        self.groups = TargetGroups(api, tagging)
        self.classic_exists: Callable[[str], bool] | None = None
        """Hook for the Classic ELB side: whether a Classic ELB of this name exists. Set, an
        NLB is never created where a Classic ELB serves the Service: the type change is
        reported naming ``aws-load-balancer-type`` (upstream ``validateServiceAnnotations``
        refuses it too). The classic side checks :meth:`describe` the other way round."""

    def vpc_id(self) -> str:
        return self.subnets.vpc_id()

    # -- lookups ------------------------------------------------------------------------------

    def describe(self, name: str) -> LB | None:
        """The NLB named ``name``, ``None`` when there is none."""
        try:
            found = self._api.call("elbv2", "describe_load_balancers", Names=[name])
        except CloudProviderError as err:
            if error_code_of(err) == "LoadBalancerNotFound":
                return None
            raise
        balancers = found.get("LoadBalancers") or []
        return balancers[0] if balancers else None

    def _listeners(self, lb: LB) -> list[Mapping[str, Any]]:
        arn = lb["LoadBalancerArn"]
        return list(
            self._api.pages("elbv2", "describe_listeners", "Listeners", LoadBalancerArn=arn)
        )

    # -- LoadBalancer -------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        if handled_elsewhere(service):
            return None, False
        lb = self.describe(default_load_balancer_name(service))
        return (None, False) if lb is None else (status_of(lb), True)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        return status_of(self.ensure(service, nodes))

    def ensure(
        self,
        service: Service,
        nodes: Sequence[Node],
        security_groups: Sequence[str] | None = None,
        spec: LoadBalancerSpec | None = None,
    ) -> LB:
        """Ensure, returning the balancer as described (the node-rule sync reads its subnets
        from it instead of describing it again). ``security_groups``: the groups a new NLB is
        created with and an existing one is set to when they differ (upstream
        ``ensureLoadBalancerv2``'s ``securityGroups``); ``None`` or empty leaves them.
        ``spec``: the Service as the caller already parsed it (parsed here when ``None``)."""
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        if spec is None:
            spec = load_balancer_spec(service, self._probe)
        name = default_load_balancer_name(service)
        instances = target_instance_ids(nodes, spec.target_labels)
        tags = self._tagging.build({**spec.extra_tags, SERVICE_NAME_TAG: spec.service_key})
        lb = self.describe(name)
        problems: list[str] = []
        if lb is None:
            self._refuse_type_change(name, spec)
            lb = self._create(name, spec, tags, security_groups or ())
        else:
            problems = self._immutable_differences(lb, spec)
            self._sync_tags(lb, tags)
            self._sync_security_groups(lb, security_groups or ())
        self._sync_listeners(lb, spec, instances, tags)
        self._sync_attributes(lb, spec)
        if problems:
            raise ImmutableChange(
                f"load balancer {name} of {spec.service_key} is otherwise up to date, but AWS "
                f"cannot change an existing NLB's {'; '.join(problems)}: delete and re-create "
                "the Service to apply it, or revert the annotation"
            )
        return lb

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self.update(service, nodes)

    def update(self, service: Service, nodes: Sequence[Node]) -> LB:
        """Update the targets, returning the balancer as described."""
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        spec = load_balancer_spec(service, self._probe)
        name = default_load_balancer_name(service)
        lb = self.describe(name)
        if lb is None:
            raise CloudProviderError(f"load balancer {name} of {spec.service_key} not found")
        instances = target_instance_ids(nodes, spec.target_labels)
        for group in self.groups.of_listeners(self._listeners(lb)).values():
            self.groups.sync_targets(group, instances)
        return lb

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        if handled_elsewhere(service):
            return
        name = default_load_balancer_name(service)
        lb = self.describe(name)
        groups: dict[str, Mapping[str, Any]] = {}
        if lb is not None:
            groups = dict(self.groups.of_listeners(self._listeners(lb)))
            log.info("deleting load balancer %s", name)
            self._api.call("elbv2", "delete_load_balancer", LoadBalancerArn=lb["LoadBalancerArn"])
        try:
            spec: LoadBalancerSpec | None = load_balancer_spec(service, self._probe)
        except ServiceAnnotationError:
            spec = None  # no names to look for: only the listeners' groups go
        if spec is not None:
            for group in self._leftover_groups(spec, groups):
                groups[group["TargetGroupArn"]] = group
        for arn in sorted(groups):
            self.groups.delete(arn)

    def _leftover_groups(
        self, spec: LoadBalancerSpec, known: Mapping[str, Any], salt: str = ""
    ) -> list[Mapping[str, Any]]:
        """Target groups this Service's ports would use that no listener holds (left by an
        ensure interrupted between creating a group and its listener); ``salt`` as for
        :meth:`target_group_names`."""
        found = []
        known_names = {str(g.get("TargetGroupName", "")) for g in known.values()}
        for name in self.target_group_names(spec, salt).values():
            if name in known_names:
                continue
            group = self.groups.by_name(name)
            if group is not None and self.groups.is_ours(group, spec.service_key):
                found.append(group)
        return found

    def target_group_names(self, spec: LoadBalancerSpec, salt: str = "") -> dict[int, str]:
        """Upstream's target group names; a non-empty ``salt`` (a shared NLB's members) goes
        into the hash, so that those names never clash with the Service's own NLB's."""
        return spec.target_group_names(self._tagging.cluster_id + salt)

    # -- ensure steps -------------------------------------------------------------------------

    def _create(
        self,
        name: str,
        spec: LoadBalancerSpec,
        tags: Mapping[str, str],
        security_groups: Sequence[str],
    ) -> LB:
        subnets = self.subnets.for_balancer(spec.subnets, spec.internal)
        mappings = subnet_mappings(spec, subnets)
        log.info(
            "creating load balancer %s for %s in %s", name, spec.service_key, ", ".join(subnets)
        )
        extra: dict[str, Any] = {"SecurityGroups": list(security_groups)} if security_groups else {}
        created = self._api.call(
            "elbv2",
            "create_load_balancer",
            Name=name,
            Type="network",
            Scheme="internal" if spec.internal else "internet-facing",
            SubnetMappings=mappings,
            Tags=aws_tags(tags),
            **extra,
        )
        lb: LB = created["LoadBalancers"][0]
        return lb

    def _refuse_type_change(self, name: str, spec: LoadBalancerSpec) -> None:
        if self.classic_exists is not None and self.classic_exists(name):
            raise ImmutableChange(
                f"annotation {TYPE}: {spec.service_key} is served by the Classic ELB {name}; "
                "AWS cannot turn it into an NLB: delete and re-create the Service to change "
                "the type, or revert the annotation"
            )

    def _immutable_differences(self, lb: LB, spec: LoadBalancerSpec) -> list[str]:
        """What the Service asks that the existing NLB differs in and AWS cannot change
        (upstream leaves these silently: ``// TODO: Sync internal vs non-internal``)."""
        found = []
        scheme = "internal" if spec.internal else "internet-facing"
        if lb.get("Scheme") != scheme:
            found.append(f"scheme ({INTERNAL} asks {scheme}, it is {lb.get('Scheme')})")
        zones = lb.get("AvailabilityZones") or ()
        if spec.subnets:
            actual = sorted(str(z.get("SubnetId", "")) for z in zones)
            wanted = sorted(self.subnets.named(spec.subnets))
            if actual != wanted:
                found.append(f"subnets ({SUBNETS} asks {wanted}, it has {actual})")
        # Compared only when AWS reports the addresses (moto reports none: not testable there).
        addresses = [a for z in zones for a in z.get("LoadBalancerAddresses") or ()]
        for key, field, wanted_values in (
            (EIP_ALLOCATIONS, "AllocationId", spec.options.eip_allocations),
            (PRIVATE_IPV4, "PrivateIPv4Address", spec.options.private_ipv4),
        ):
            actual_values = sorted(str(a[field]) for a in addresses if a.get(field))
            if addresses and wanted_values and sorted(wanted_values) != actual_values:
                found.append(
                    f"addresses ({key} asks {sorted(wanted_values)}, it has {actual_values})"
                )
        return found

    def _sync_tags(self, lb: LB, tags: Mapping[str, str]) -> None:
        """Put back the balancer's tags kccm sets (others' tags are left alone)."""
        arn = lb["LoadBalancerArn"]
        described = self._api.call("elbv2", "describe_tags", ResourceArns=[arn])
        current = tag_dict((described.get("TagDescriptions") or [{}])[0].get("Tags"))
        missing = {k: v for k, v in tags.items() if current.get(k) != v}
        if missing:
            self._api.call("elbv2", "add_tags", ResourceArns=[arn], Tags=aws_tags(missing))

    def _sync_security_groups(self, lb: LB, wanted: Sequence[str]) -> None:
        """Upstream ``ensureLoadBalancerv2``: ``SetSecurityGroups`` when the wanted groups
        (non-empty) differ from the NLB's."""
        if wanted and set(wanted) != set(lb.get("SecurityGroups") or ()):
            log.info("setting security groups of %s to %s", lb["LoadBalancerName"], wanted)
            self._api.call(
                "elbv2",
                "set_security_groups",
                LoadBalancerArn=lb["LoadBalancerArn"],
                SecurityGroups=list(wanted),
            )

    def _sync_listeners(
        self,
        lb: LB,
        spec: LoadBalancerSpec,
        instances: list[str],
        tags: Mapping[str, str],
        listeners: Sequence[Mapping[str, Any]] | None = None,
        names: Mapping[int, str] | None = None,
    ) -> None:
        """The Service's listeners and their target groups: ``listeners`` (default: every
        listener of the balancer) are the Service's own; one the spec no longer has goes.
        ``names``: the target groups' names by port (default: upstream's)."""
        if listeners is None:
            listeners = self._listeners(lb)
        groups = self.groups.of_listeners(listeners)
        by_port = {int(li["Port"]): li for li in listeners}
        if names is None:
            names = spec.target_group_names(self._tagging.cluster_id)
        unused = {arn for arn, g in groups.items() if g["TargetGroupName"] not in names.values()}
        for mapping in spec.mappings:
            listener = by_port.pop(mapping.port, None)
            current = groups.get(forward_arn(listener)) if listener is not None else None
            if current is not None and current.get("TargetGroupName") == names[mapping.port]:
                self.groups.sync(current, mapping, instances, spec.options.tg_attributes)
                if not _listener_matches(listener, mapping):
                    self._point(lb, listener, mapping, current, tags)
                continue
            group = self.groups.create(lb["VpcId"], names[mapping.port], mapping, tags)
            self.groups.sync(group, mapping, instances, spec.options.tg_attributes)
            self._point(lb, listener, mapping, group, tags)
        for port, listener in by_port.items():
            log.info("deleting listener %s of %s", port, spec.service_key)
            self._api.call("elbv2", "delete_listener", ListenerArn=listener["ListenerArn"])
        for arn in sorted(unused):  # no listener forwards to them any more
            self.groups.delete(arn)

    def _point(
        self,
        lb: LB,
        listener: Mapping[str, Any] | None,
        mapping: PortMapping,
        group: Mapping[str, Any],
        tags: Mapping[str, str],
    ) -> None:
        """Create the listener, or modify it to the mapping's protocol, TLS and group
        (upstream ``createListenerV2`` and the ``ModifyListener`` of ``ensureLoadBalancerv2``)."""
        params: dict[str, Any] = {
            "Port": mapping.port,
            "Protocol": mapping.listener_protocol,
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": group["TargetGroupArn"]}],
        }
        if mapping.tls is not None:
            params["Certificates"] = [{"CertificateArn": mapping.tls.certificate}]
            if mapping.tls.policy:
                params["SslPolicy"] = mapping.tls.policy
        if listener is None:
            arn = lb["LoadBalancerArn"]
            self._api.call(
                "elbv2", "create_listener", LoadBalancerArn=arn, Tags=aws_tags(tags), **params
            )
        else:
            log.info("correcting listener %d of %s", mapping.port, lb["LoadBalancerName"])
            self._api.call(
                "elbv2", "modify_listener", ListenerArn=listener["ListenerArn"], **params
            )

    def _sync_attributes(self, lb: LB, spec: LoadBalancerSpec) -> None:
        """Upstream ``reconcileLBAttributes``: cross-zone and access logs, when they differ."""
        arn = lb["LoadBalancerArn"]
        found = self._api.call("elbv2", "describe_load_balancer_attributes", LoadBalancerArn=arn)
        current = {a["Key"]: a["Value"] for a in found.get("Attributes", ())}
        wanted = {
            CROSS_ZONE_ATTRIBUTE: "true" if spec.cross_zone else "false",
            **spec.options.lb_attributes,
        }
        change = [
            {"Key": k, "Value": v}
            for k, v in sorted(wanted.items())
            if current.get(k, "false" if k.endswith(".enabled") else "") != v
        ]
        if change:
            self._api.call(
                "elbv2", "modify_load_balancer_attributes", LoadBalancerArn=arn, Attributes=change
            )


def _listener_matches(listener: Mapping[str, Any] | None, mapping: PortMapping) -> bool:
    """Upstream's ``listenerNeedsModification``: protocol, and for TLS policy and certificate
    (a TCP listener must have no certificate; its ``SslPolicy`` is not compared, unlike
    upstream: AWS ignores it on TCP listeners and moto reports a default one there)."""
    if listener is None or str(listener.get("Protocol")) != mapping.listener_protocol:
        return False
    certificates = [str(c.get("CertificateArn", "")) for c in listener.get("Certificates") or ()]
    policy = str(listener.get("SslPolicy") or "")
    if mapping.tls is None:
        return not certificates
    policy_ok = not mapping.tls.policy or policy == mapping.tls.policy
    return policy_ok and certificates[:1] == [mapping.tls.certificate]
