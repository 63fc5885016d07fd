"""Service load balancers as Network Load Balancers (upstream ``ensureLoadBalancerv2``).

One NLB per Service, named like upstream (``a`` + the UID without dashes, 32 characters); per
Service port a TCP/UDP listener forwarding to a target group of instances on the node port,
named ``k8s-<ns>-<name>-<hash>``. Everything created carries the cluster tag
(``kubernetes.io/cluster/<id>=owned``) and ``kubernetes.io/service-name=<ns>/<name>``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    ImplementedElsewhere,
    LoadBalancerIngress,
    LoadBalancerStatus,
    Node,
    RetryError,
    Service,
    default_load_balancer_name,
)
from kccm.providers.aws.annotations import (
    LoadBalancerSpec,
    PortMapping,
    ProbeMode,
    ServiceAnnotationError,
    handled_elsewhere,
    load_balancer_spec,
    target_group_name,
)
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.tags import (
    SERVICE_NAME_TAG,
    SUBNET_ROLE_INTERNAL,
    SUBNET_ROLE_PUBLIC,
    ClusterTagging,
    parse_provider_id,
    tag_dict,
)

__all__ = ["NetworkLoadBalancers"]

log = logging.getLogger(__name__)

CROSS_ZONE_ATTRIBUTE = "load_balancing.cross_zone.enabled"
TARGET_CHUNK = 100
DELETE_RETRY_SECONDS = 5.0
_GONE_TARGET_STATES = frozenset({"draining"})

LB = Mapping[str, Any]


def _code(err: BaseException) -> str:
    return str(getattr(err, "code", ""))


def _aws_tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def _chunks(
    items: Sequence[dict[str, Any]], size: int = TARGET_CHUNK
) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def status_of(lb: LB) -> LoadBalancerStatus:
    """Upstream ``v2toStatus``: the DNS name, once the NLB is provisioning or active."""
    state = (lb.get("State") or {}).get("Code", "")
    if lb.get("DNSName") and state in ("active", "provisioning"):
        return LoadBalancerStatus(ingress=[LoadBalancerIngress(hostname=lb["DNSName"])])
    return LoadBalancerStatus()


def _node_matches(node: Node, wanted: Mapping[str, str]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(k in labels and (not v or labels[k] == v) for k, v in wanted.items())


def target_instance_ids(nodes: Sequence[Node], labels: Mapping[str, str]) -> list[str]:
    """Instance IDs of the nodes (with an aws providerID) that match the target labels."""
    ids = set()
    for node in nodes:
        pid = str((node.get("spec") or {}).get("providerID", ""))
        if not pid or not _node_matches(node, labels):
            continue
        try:
            ref = parse_provider_id(pid)
        except ValueError:
            ref = None
        if ref is not None:
            ids.add(ref.instance_id)
    return sorted(ids)


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
        self._vpc_id = vpc_id
        self._subnet_id = subnet_id
        self._probe = probe
        self._lock = threading.Lock()

    # -- the VPC and its subnets --------------------------------------------------------------

    def vpc_id(self) -> str:
        """``VPC`` from the cloud config, else the VPC of ``SubnetID`` (looked up once)."""
        with self._lock:
            if self._vpc_id:
                return self._vpc_id
        if not self._subnet_id:
            raise CloudProviderError(
                "load balancers need the cluster's VPC: set VPC or SubnetID in [Global]"
            )
        subnets = self._api.call("ec2", "describe_subnets", SubnetIds=[self._subnet_id])["Subnets"]
        with self._lock:
            self._vpc_id = str(subnets[0]["VpcId"])
            return self._vpc_id

    def _subnets(self, spec: LoadBalancerSpec) -> list[str]:
        if spec.subnets:
            return self._named_subnets(spec.subnets)
        vpc = self.vpc_id()
        vpc_filter = [{"Name": "vpc-id", "Values": [vpc]}]
        subnets = [
            s
            for s in self._api.pages("ec2", "describe_subnets", "Subnets", Filters=vpc_filter)
            if self._tagging.owns(s.get("Tags")) or self._tagging.has_no_cluster_tag(s.get("Tags"))
        ]
        tables = list(
            self._api.pages("ec2", "describe_route_tables", "RouteTables", Filters=vpc_filter)
        )
        chosen: dict[str, Mapping[str, Any]] = {}
        for subnet in subnets:
            zone = subnet.get("AvailabilityZone", "")
            if not zone or (not spec.internal and not _is_public(tables, subnet["SubnetId"])):
                continue
            if zone not in chosen or self._prefer(subnet, chosen[zone], spec.internal):
                chosen[zone] = subnet
        if not chosen:
            raise CloudProviderError(
                f"could not find any suitable subnets for creating the ELB in {vpc} "
                f"({'internal' if spec.internal else 'internet-facing: public subnets only'})"
            )
        return [chosen[zone]["SubnetId"] for zone in sorted(chosen)]

    def _prefer(self, new: Mapping[str, Any], old: Mapping[str, Any], internal: bool) -> bool:
        """Upstream's tie-break within a zone: role tag, then cluster tag, then lowest ID."""
        role = SUBNET_ROLE_INTERNAL if internal else SUBNET_ROLE_PUBLIC
        new_tags, old_tags = tag_dict(new.get("Tags")), tag_dict(old.get("Tags"))
        if (role in new_tags) != (role in old_tags):
            return role in new_tags
        new_owned = bool(self._tagging.cluster_id) and self._tagging.owns(new.get("Tags"))
        old_owned = bool(self._tagging.cluster_id) and self._tagging.owns(old.get("Tags"))
        if new_owned != old_owned:
            return new_owned
        return str(new["SubnetId"]) < str(old["SubnetId"])

    def _named_subnets(self, names: Sequence[str]) -> list[str]:
        ids = [n for n in names if n.startswith("subnet-")]
        tagged = [n for n in names if not n.startswith("subnet-")]
        found: list[str] = []
        if ids:
            found += [
                s["SubnetId"]
                for s in self._api.pages("ec2", "describe_subnets", "Subnets", SubnetIds=ids)
            ]
        if tagged:
            filters = [
                {"Name": "tag:Name", "Values": tagged},
                {"Name": "vpc-id", "Values": [self.vpc_id()]},
            ]
            found += [
                s["SubnetId"]
                for s in self._api.pages("ec2", "describe_subnets", "Subnets", Filters=filters)
            ]
        if len(found) != len(names):
            raise ServiceAnnotationError(
                f"expected to find {len(names)} subnets {list(names)}, found {len(found)}"
            )
        return found

    # -- lookups ------------------------------------------------------------------------------

    def _describe(self, name: str) -> LB | None:
        try:
            found = self._api.call("elbv2", "describe_load_balancers", Names=[name])
        except CloudProviderError as err:
            if _code(err) == "LoadBalancerNotFound":
                return None
            raise
        balancers = found.get("LoadBalancers") or []
        return balancers[0] if balancers else None

    def _group_by_name(self, name: str) -> Mapping[str, Any] | None:
        try:
            found = self._api.call("elbv2", "describe_target_groups", Names=[name])
        except CloudProviderError as err:
            if _code(err) == "TargetGroupNotFound":
                return None
            raise
        groups = found.get("TargetGroups") or []
        return groups[0] if groups else None

    def _listeners(self, lb: LB) -> list[Mapping[str, Any]]:
        arn = lb["LoadBalancerArn"]
        return list(
            self._api.pages("elbv2", "describe_listeners", "Listeners", LoadBalancerArn=arn)
        )

    def _groups_of(self, listeners: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        """The target groups the listeners forward to, by ARN (asked by ARN, not by load
        balancer: a group is only linked to its balancer through a listener)."""
        arns = sorted({a for a in map(_forward_arn, listeners) if a})
        if not arns:
            return {}
        groups = self._api.call("elbv2", "describe_target_groups", TargetGroupArns=arns)
        return {g["TargetGroupArn"]: g for g in groups.get("TargetGroups", ())}

    # -- LoadBalancer -------------------------------------------------------------------------

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return default_load_balancer_name(service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        if handled_elsewhere(service):
            return None, False
        lb = self._describe(default_load_balancer_name(service))
        return (None, False) if lb is None else (status_of(lb), True)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        spec = load_balancer_spec(service, self._probe)
        name = default_load_balancer_name(service)
        instances = target_instance_ids(nodes, spec.target_labels)
        tags = self._tagging.build({**spec.extra_tags, SERVICE_NAME_TAG: spec.service_key})
        lb = self._describe(name)
        if lb is None:
            lb = self._create(name, spec, tags)
        elif (lb.get("Scheme") == "internal") != spec.internal:
            log.warning(
                "load balancer %s of %s keeps scheme %s: an NLB's scheme cannot change",
                name,
                spec.service_key,
                lb.get("Scheme"),
            )
        self._sync_listeners(lb, spec, instances, tags)
        self._sync_attributes(lb, spec)
        return status_of(lb)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        if handled_elsewhere(service):
            raise ImplementedElsewhere()
        spec = load_balancer_spec(service, self._probe)
        name = default_load_balancer_name(service)
        lb = self._describe(name)
        if lb is None:
            raise CloudProviderError(f"load balancer {name} of {spec.service_key} not found")
        instances = target_instance_ids(nodes, spec.target_labels)
        for group in self._groups_of(self._listeners(lb)).values():
            self._sync_targets(group, instances)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        if handled_elsewhere(service):
            return
        name = default_load_balancer_name(service)
        lb = self._describe(name)
        groups: dict[str, Mapping[str, Any]] = {}
        if lb is not None:
            groups = dict(self._groups_of(self._listeners(lb)))
            log.info("deleting load balancer %s", name)
            self._api.call("elbv2", "delete_load_balancer", LoadBalancerArn=lb["LoadBalancerArn"])
        for group in self._leftover_groups(service, groups):
            groups[group["TargetGroupArn"]] = group
        for arn in sorted(groups):
            self._delete_group(arn)

    def _leftover_groups(
        self, service: Service, known: Mapping[str, Any]
    ) -> list[Mapping[str, Any]]:
        """Target groups this Service's ports would use that no listener holds (left by an
        ensure interrupted between creating a group and its listener)."""
        try:
            spec = load_balancer_spec(service, self._probe)
        except ServiceAnnotationError:
            return []
        found = []
        known_names = {str(g.get("TargetGroupName", "")) for g in known.values()}
        for mapping in spec.mappings:
            name = target_group_name(self._tagging.cluster_id, spec.namespace, spec.name, mapping)
            if name in known_names:
                continue
            group = self._group_by_name(name)
            if group is not None and self._is_ours(group, spec.service_key):
                found.append(group)
        return found

    def _is_ours(self, group: Mapping[str, Any], service_key: str) -> bool:
        tags = self._api.call("elbv2", "describe_tags", ResourceArns=[group["TargetGroupArn"]])
        descriptions = tags.get("TagDescriptions") or [{}]
        found = tag_dict(descriptions[0].get("Tags"))
        return found.get(SERVICE_NAME_TAG) == service_key and self._tagging.owns(
            descriptions[0].get("Tags")
        )

    def _delete_group(self, arn: str) -> None:
        try:
            self._api.call("elbv2", "delete_target_group", TargetGroupArn=arn)
        except CloudProviderError as err:
            if _code(err) == "TargetGroupNotFound":
                return
            if _code(err) == "ResourceInUse":
                raise RetryError(
                    f"target group {arn} is still in use; retrying", DELETE_RETRY_SECONDS
                ) from err
            raise

    # -- ensure steps -------------------------------------------------------------------------

    def _create(self, name: str, spec: LoadBalancerSpec, tags: Mapping[str, str]) -> LB:
        subnets = self._subnets(spec)
        log.info(
            "creating load balancer %s for %s in %s", name, spec.service_key, ", ".join(subnets)
        )
        created = self._api.call(
            "elbv2",
            "create_load_balancer",
            Name=name,
            Type="network",
            Scheme="internal" if spec.internal else "internet-facing",
            Subnets=subnets,
            Tags=_aws_tags(tags),
        )
        lb: LB = created["LoadBalancers"][0]
        return lb

    def _sync_listeners(
        self, lb: LB, spec: LoadBalancerSpec, instances: list[str], tags: Mapping[str, str]
    ) -> None:
        listeners = self._listeners(lb)
        groups = self._groups_of(listeners)
        by_port = {(int(li["Port"]), str(li["Protocol"])): li for li in listeners}
        wanted = set()
        for mapping in spec.mappings:
            wanted.add((mapping.port, mapping.protocol))
            listener = by_port.get((mapping.port, mapping.protocol))
            group_name = target_group_name(
                self._tagging.cluster_id, spec.namespace, spec.name, mapping
            )
            current = groups.get(_forward_arn(listener)) if listener is not None else None
            if current is not None and current.get("TargetGroupName") == group_name:
                self._sync_targets(current, instances)
                self._sync_health(current, mapping)
                continue
            group = self._ensure_group(lb, group_name, mapping, tags)
            self._sync_targets(group, instances)
            self._point(lb, listener, mapping, group, tags)
            if current is not None:
                self._delete_group(current["TargetGroupArn"])
        for key, listener in by_port.items():
            if key not in wanted:
                log.info("deleting listener %s/%s of %s", key[0], key[1], spec.service_key)
                self._api.call("elbv2", "delete_listener", ListenerArn=listener["ListenerArn"])
                arn = _forward_arn(listener)
                if arn:
                    self._delete_group(arn)

    def _ensure_group(
        self, lb: LB, name: str, mapping: PortMapping, tags: Mapping[str, str]
    ) -> Mapping[str, Any]:
        hc = mapping.health
        params: dict[str, Any] = {
            "Name": name,
            "Protocol": mapping.protocol,
            "Port": mapping.node_port,
            "VpcId": lb["VpcId"],
            "TargetType": "instance",
            "HealthCheckProtocol": hc.protocol,
            "HealthCheckPort": hc.port,
            "HealthCheckIntervalSeconds": hc.interval,
            "HealthyThresholdCount": hc.healthy,
            "UnhealthyThresholdCount": hc.unhealthy,
            "Tags": _aws_tags(tags),
        }
        if hc.protocol != "TCP":
            params["HealthCheckPath"] = hc.path
        log.info("creating target group %s (node port %d)", name, mapping.node_port)
        try:
            group: Mapping[str, Any] = self._api.call("elbv2", "create_target_group", **params)[
                "TargetGroups"
            ][0]
        except CloudProviderError as err:
            existing = (
                self._group_by_name(name) if _code(err) == "DuplicateTargetGroupName" else None
            )
            if existing is None:
                raise
            return existing  # left by an interrupted ensure: adopt it
        return group

    def _point(
        self,
        lb: LB,
        listener: Mapping[str, Any] | None,
        mapping: PortMapping,
        group: Mapping[str, Any],
        tags: Mapping[str, str],
    ) -> None:
        actions = [{"Type": "forward", "TargetGroupArn": group["TargetGroupArn"]}]
        if listener is None:
            self._api.call(
                "elbv2",
                "create_listener",
                LoadBalancerArn=lb["LoadBalancerArn"],
                Port=mapping.port,
                Protocol=mapping.protocol,
                DefaultActions=actions,
                Tags=_aws_tags(tags),
            )
        else:
            self._api.call(
                "elbv2",
                "modify_listener",
                ListenerArn=listener["ListenerArn"],
                Port=mapping.port,
                Protocol=mapping.protocol,
                DefaultActions=actions,
            )

    def _sync_health(self, group: Mapping[str, Any], mapping: PortMapping) -> None:
        hc = mapping.health
        change: dict[str, Any] = {}
        if str(group.get("HealthCheckPort", "")) != hc.port:
            change["HealthCheckPort"] = hc.port
        if (
            int(group.get("HealthyThresholdCount", 0)) != hc.healthy
            or int(group.get("UnhealthyThresholdCount", 0)) != hc.unhealthy
        ):
            change["HealthyThresholdCount"] = hc.healthy
            change["UnhealthyThresholdCount"] = hc.unhealthy
        if hc.protocol != "TCP" and str(group.get("HealthCheckPath", "")) != hc.path:
            change["HealthCheckPath"] = hc.path
        if change:
            self._api.call(
                "elbv2", "modify_target_group", TargetGroupArn=group["TargetGroupArn"], **change
            )

    def _sync_targets(self, group: Mapping[str, Any], instances: list[str]) -> None:
        arn, port = group["TargetGroupArn"], int(group["Port"])
        health = self._api.call("elbv2", "describe_target_health", TargetGroupArn=arn)
        actual = {
            (str(t["Target"]["Id"]), int(t["Target"].get("Port", port)))
            for t in health.get("TargetHealthDescriptions", ())
            if (t.get("TargetHealth") or {}).get("State") not in _GONE_TARGET_STATES
        }
        expected = {(i, port) for i in instances}
        add = [{"Id": i, "Port": p} for i, p in sorted(expected - actual)]
        remove = [{"Id": i, "Port": p} for i, p in sorted(actual - expected)]
        for chunk in _chunks(add):
            self._register(arn, chunk)
        for chunk in _chunks(remove):
            self._api.call("elbv2", "deregister_targets", TargetGroupArn=arn, Targets=chunk)

    def _register(self, arn: str, targets: list[dict[str, Any]]) -> None:
        try:
            self._api.call("elbv2", "register_targets", TargetGroupArn=arn, Targets=targets)
        except CloudProviderError as err:
            if _code(err) != "InvalidTarget":
                raise
            running = self._running({str(t["Id"]) for t in targets})
            kept = [t for t in targets if t["Id"] in running]
            log.info("registering only the %d running instances of %d", len(kept), len(targets))
            if kept:
                self._api.call("elbv2", "register_targets", TargetGroupArn=arn, Targets=kept)

    def _running(self, ids: set[str]) -> set[str]:
        filters = [
            {"Name": "instance-id", "Values": sorted(ids)},
            {"Name": "instance-state-name", "Values": ["running"]},
        ]
        reservations = self._api.pages("ec2", "describe_instances", "Reservations", Filters=filters)
        return {i["InstanceId"] for r in reservations for i in r.get("Instances", ())}

    def _sync_attributes(self, lb: LB, spec: LoadBalancerSpec) -> None:
        arn = lb["LoadBalancerArn"]
        found = self._api.call("elbv2", "describe_load_balancer_attributes", LoadBalancerArn=arn)
        current = {a["Key"]: a["Value"] for a in found.get("Attributes", ())}
        wanted = "true" if spec.cross_zone else "false"
        if current.get(CROSS_ZONE_ATTRIBUTE, "false") != wanted:
            self._api.call(
                "elbv2",
                "modify_load_balancer_attributes",
                LoadBalancerArn=arn,
                Attributes=[{"Key": CROSS_ZONE_ATTRIBUTE, "Value": wanted}],
            )


def _forward_arn(listener: Mapping[str, Any] | None) -> str:
    for action in (listener or {}).get("DefaultActions") or ():
        if action.get("TargetGroupArn"):
            return str(action["TargetGroupArn"])
    return ""


def _is_public(tables: Sequence[Mapping[str, Any]], subnet_id: str) -> bool:
    """Upstream ``isSubnetPublic``: the subnet's route table (or the VPC's main one) routes to
    an internet gateway."""
    table = next(
        (t for t in tables for a in t.get("Associations") or () if a.get("SubnetId") == subnet_id),
        None,
    )
    if table is None:
        table = next(
            (t for t in tables for a in t.get("Associations") or () if a.get("Main")), None
        )
    if table is None:
        return False
    return any(str(r.get("GatewayId", "")).startswith("igw") for r in table.get("Routes") or ())
