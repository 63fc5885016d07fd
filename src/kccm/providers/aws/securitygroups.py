"""Security groups for Service load balancers, as upstream cloud-provider-aws manages them.

- A Classic ELB gets its own group ``k8s-elb-<name>`` (``ensureSecurityGroup``), whose ingress
  is exactly the Service's ports and the ICMP MTU rule from the source ranges
  (``setSecurityGroupIngress``), and the node security group admits that group
  (``updateInstanceSecurityGroupsForLoadBalancer``).
- An NLB has no group of its own: the node security group admits the clients on the node
  ports, the balancer's subnets on the health-check ports and ICMP for MTU discovery, each rule
  described as upstream describes it (``updateInstanceSecurityGroupsForNLB``), so the rules
  the upstream CCM wrote are recognised and kept rather than written twice.

The node security group of an instance is chosen as upstream's
``findSecurityGroupForInstance`` does: the one tagged for the cluster, else the only one.
Every read and write goes through ``AWSAPI.call``; a rule already present is never written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.cloudprovider import CloudProviderError, RetryError
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.sgrules import (
    ANY_PROTOCOL,
    NLB_CLIENT_RULE,
    NLB_HEALTH_RULE,
    NLB_MTU_RULE,
    WORLD,
    Rule,
    described,
    mtu_rules,
    nlb_traffic_rules,
    permissions,
    rules_of,
)
from kccm.providers.aws.tags import OWNED, ClusterTagging, tag_dict
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "DELETE_GIVE_UP_SECONDS",
    "DELETE_RETRY_SECONDS",
    "Instance",
    "NodePorts",
    "SecurityGroups",
]

log = logging.getLogger(__name__)

DELETE_RETRY_SECONDS = 5.0
"""Upstream polls every 5 s while a deleted balancer still holds its group."""
DELETE_GIVE_UP_SECONDS = 600.0
"""Upstream ``deleteSecurityGroupsWithBackoff`` polls for 10 minutes, then reports the groups
still in use and leaves them (its next ``EnsureLoadBalancerDeleted`` finds no balancer)."""
FILTER_CHUNK = 200
Group = Mapping[str, Any]
Instance = Mapping[str, Any]


def _code(err: BaseException) -> str:
    return str(getattr(err, "code", ""))


@dataclass(frozen=True)
class NodePorts:
    """What an NLB sends to the nodes: traffic (node) ports, health-check ports, protocol."""

    traffic: frozenset[int]
    health: frozenset[int]
    protocol: str = "tcp"


class SecurityGroups:
    """Security-group reads and writes shared by the Classic ELB and NLB code."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        vpc_id: Callable[[], str],
        *,
        disable_ingress: bool = False,
        elb_security_group: str = "",
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self._api = api
        self._clock = clock
        self._busy_since: dict[str, float] = {}
        self.abandoned: set[str] = set()
        """Groups still in use after :data:`DELETE_GIVE_UP_SECONDS` of deletes: left in place,
        as upstream leaves them, and no longer counted as a balancer's leftovers."""
        self._tagging = tagging
        self._vpc_id = vpc_id
        self.disable_ingress = disable_ingress
        self.elb_security_group = elb_security_group
        self._node_rules = threading.Lock()
        """Node-group rules are read, compared and written under this lock: two balancers'
        syncs interleaved would each keep the MTU rule for the other's client rule and leave
        it behind when both go (a race upstream's concurrent workers have too)."""

    # -- reads --------------------------------------------------------------------------------

    def describe(self, ids: Iterable[str]) -> dict[str, Group]:
        """The groups with these IDs that exist, by ID."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        filters = [{"Name": "group-id", "Values": wanted}]
        found = self._api.pages(
            "ec2", "describe_security_groups", "SecurityGroups", Filters=filters
        )
        return {g["GroupId"]: g for g in found}

    def by_name(self, name: str) -> Group | None:
        filters = [
            {"Name": "group-name", "Values": [name]},
            {"Name": "vpc-id", "Values": [self._vpc_id()]},
        ]
        found = list(
            self._api.pages("ec2", "describe_security_groups", "SecurityGroups", Filters=filters)
        )
        if len(found) > 1:
            log.warning("found %d security groups named %s", len(found), name)
        return found[0] if found else None

    def tagged(self) -> dict[str, Group]:
        """Upstream ``getTaggedSecurityGroups``: the groups carrying the cluster tag (asked in
        the cluster's VPC, where every instance's groups are)."""
        filters = [{"Name": "vpc-id", "Values": [self._vpc_id()]}]
        groups = self._api.pages(
            "ec2", "describe_security_groups", "SecurityGroups", Filters=filters
        )
        return {g["GroupId"]: g for g in groups if self._tagging.owns(g.get("Tags"))}

    def referencing(self, group_id: str) -> list[Group]:
        """Groups with an ingress rule whose source is ``group_id``."""
        filters = [{"Name": "ip-permission.group-id", "Values": [group_id]}]
        return list(
            self._api.pages("ec2", "describe_security_groups", "SecurityGroups", Filters=filters)
        )

    def instances(self, ids: Iterable[str]) -> dict[str, Instance]:
        """The EC2 instances with these IDs (unknown and terminated ones left out), by ID."""
        wanted = sorted(set(ids))
        found: dict[str, Instance] = {}
        for start in range(0, len(wanted), FILTER_CHUNK):
            filters = [{"Name": "instance-id", "Values": wanted[start : start + FILTER_CHUNK]}]
            for reservation in self._api.pages(
                "ec2", "describe_instances", "Reservations", Filters=filters
            ):
                for instance in reservation.get("Instances", ()):
                    state = (instance.get("State") or {}).get("Name", "")
                    if state not in ("terminated", "shutting-down"):
                        found[instance["InstanceId"]] = instance
        return found

    def is_owned(self, group: Group) -> bool:
        """Upstream ``hasClusterTagOwned``: ``kubernetes.io/cluster/<id>=owned`` (or the legacy
        tag); without a cluster ID nothing is provably the cluster's own."""
        if not self._tagging.cluster_id:
            return False
        tags = tag_dict(group.get("Tags"))
        return tags.get(self._tagging.cluster_tag_key) == OWNED or (
            tags.get("KubernetesCluster") == self._tagging.cluster_id
        )

    # -- the node security group --------------------------------------------------------------

    @staticmethod
    def node_group(instance: Instance, tagged: Mapping[str, Group]) -> str:
        """Upstream ``findSecurityGroupForInstance``: the instance's one cluster-tagged group,
        else its only group; "" when it has none. Several candidates are an error."""
        groups = [str(g.get("GroupId", "")) for g in instance.get("SecurityGroups") or ()]
        groups = [g for g in groups if g]
        mine = [g for g in groups if g in tagged]
        iid = instance.get("InstanceId", "")
        if len(mine) > 1:
            raise CloudProviderError(
                f"Multiple tagged security groups found for instance {iid}; ensure only the "
                f"k8s security group is tagged; the tagged groups were {' '.join(sorted(mine))}"
            )
        if mine:
            return mine[0]
        if len(groups) > 1:
            raise CloudProviderError(
                f"Multiple untagged security groups found for instance {iid}; "
                "ensure the k8s security group is tagged"
            )
        if not groups:
            log.warning("no security group found for instance %s", iid)
        return groups[0] if groups else ""

    def node_groups(self, instances: Iterable[Instance], tagged: Mapping[str, Group]) -> set[str]:
        return {g for g in (self.node_group(i, tagged) for i in instances) if g}

    # -- writes -------------------------------------------------------------------------------

    def ensure_group(self, name: str, description: str, extra_tags: Mapping[str, str]) -> Group:
        """Upstream ``ensureSecurityGroup``: the VPC's group of this name, tagged for the
        cluster (missing tags added, another cluster's tag refused), else a new one."""
        group = self.by_name(name)
        if group is not None:
            self._repair_tags(group, extra_tags)
            return group
        tags = self._tagging.build(dict(extra_tags))
        log.info("creating security group %s", name)
        try:
            created = self._api.call(
                "ec2",
                "create_security_group",
                GroupName=name,
                Description=description,
                VpcId=self._vpc_id(),
                TagSpecifications=[
                    {
                        "ResourceType": "security-group",
                        "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
                    }
                ],
            )
        except CloudProviderError as err:
            raced = self.by_name(name) if _code(err) == "InvalidGroup.Duplicate" else None
            if raced is None:
                raise
            return raced
        return {
            "GroupId": created["GroupId"],
            "GroupName": name,
            "IpPermissions": [],
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }

    def _repair_tags(self, group: Group, extra_tags: Mapping[str, str]) -> None:
        """Upstream ``readRepairClusterTags`` (only the cluster tags: upstream passes none)."""
        actual = tag_dict(group.get("Tags"))
        add = {}
        for key, value in self._tagging.build({}).items():
            if actual.get(key, "") == value:
                continue
            if actual.get(key, ""):
                raise CloudProviderError(
                    f"security group {group['GroupId']} has tag belonging to another cluster: "
                    f"{key}={actual[key]} (expected {value})"
                )
            add[key] = value
        if add:
            self._api.call(
                "ec2",
                "create_tags",
                Resources=[group["GroupId"]],
                Tags=[{"Key": k, "Value": v} for k, v in sorted(add.items())],
            )

    def authorize(self, group_id: str, rules: Iterable[Rule]) -> None:
        if perms := self._ingress_change(group_id, rules, "allowing"):
            self._api.call(
                "ec2", "authorize_security_group_ingress", GroupId=group_id, IpPermissions=perms
            )

    def revoke(self, group_id: str, rules: Iterable[Rule]) -> None:
        if perms := self._ingress_change(group_id, rules, "revoking"):
            self._api.call(
                "ec2", "revoke_security_group_ingress", GroupId=group_id, IpPermissions=perms
            )

    def _ingress_change(
        self, group_id: str, rules: Iterable[Rule], doing: str
    ) -> list[dict[str, Any]]:
        """The permissions to send for ``rules`` (logged); none for the shared ELB group."""
        perms = permissions(rules)
        if not perms or group_id == self.elb_security_group:
            return []
        log.info("security group %s: %s %d rule(s)", group_id, doing, len(perms))
        return perms

    def set_ingress(self, group: Group, wanted: set[Rule]) -> None:
        """Upstream ``setSecurityGroupIngress``: the group's ingress becomes exactly ``wanted``."""
        actual = rules_of(group.get("IpPermissions"))
        self.authorize(group["GroupId"], wanted - actual)
        self.revoke(group["GroupId"], actual - wanted)

    def delete_groups(self, ids: Iterable[str], owner: str) -> None:
        """Delete the groups; one still in use (the balancer is going away) makes the caller
        retry after 5 s, as upstream's ``deleteSecurityGroupsWithBackoff`` polls, for up to
        10 minutes: then the group is given up (:attr:`abandoned`, an error), as upstream."""
        busy: list[str] = []
        given_up: list[str] = []
        for group_id in sorted(set(ids)):
            try:
                self._api.call("ec2", "delete_security_group", GroupId=group_id)
                log.info("deleted security group %s of %s", group_id, owner)
            except CloudProviderError as err:
                if _code(err) == "DependencyViolation":
                    (given_up if self._gives_up(group_id) else busy).append(group_id)
                    continue
                if _code(err) != "InvalidGroup.NotFound":
                    raise
            self._busy_since.pop(group_id, None)
            self.abandoned.discard(group_id)
        if busy:
            raise RetryError(
                f"security groups {', '.join(busy)} of {owner} are still in use; retrying",
                DELETE_RETRY_SECONDS,
            )
        if given_up:
            raise CloudProviderError(
                f"could not delete security groups {', '.join(given_up)} of {owner}: still in "
                f"use after {DELETE_GIVE_UP_SECONDS / 60:.0f} minutes; left in place (as "
                "upstream's deleteSecurityGroupsWithBackoff leaves them)"
            )

    def _gives_up(self, group_id: str) -> bool:
        since = self._busy_since.setdefault(group_id, self._clock.monotonic())
        if self._clock.monotonic() - since >= DELETE_GIVE_UP_SECONDS:
            self.abandoned.add(group_id)
        return group_id in self.abandoned

    def revoke_references(self, group_id: str) -> None:
        """Upstream ``revokeSecurityGroupReferences``: drop the rules of cluster-tagged groups
        whose source is ``group_id``."""
        for group in self.referencing(group_id):
            if not self._tagging.owns(group.get("Tags")):
                continue
            refs = {r for r in rules_of(group.get("IpPermissions")) if r.group == group_id}
            self.revoke(group["GroupId"], refs)

    # -- Classic ELB: the node security group admits the balancer's group ---------------------

    def sync_elb_ingress(
        self, lb_group: str, instances: Iterable[Instance], *, deleting: bool
    ) -> bool:
        """Upstream ``updateInstanceSecurityGroupsForLoadBalancer``: every node group of
        ``instances`` allows all traffic from ``lb_group``; a cluster-tagged group that no
        longer needs it (or any group, when the balancer's group is being deleted) loses it.
        True when a rule was added."""
        if self.disable_ingress:
            return False
        with self._node_rules:
            return self._sync_elb_ingress(lb_group, instances, deleting=deleting)

    def _sync_elb_ingress(
        self, lb_group: str, instances: Iterable[Instance], *, deleting: bool
    ) -> bool:
        tagged = self.tagged()
        wanted = self.node_groups(instances, tagged)
        rule = Rule(ANY_PROTOCOL, group=lb_group)
        for group in self.referencing(lb_group):
            gid = group["GroupId"]
            refs = {r for r in rules_of(group.get("IpPermissions")) if r.group == lb_group}
            if gid in wanted:
                wanted.discard(gid)  # already open to the balancer: no change
            elif rule in refs and (gid in tagged or deleting):
                self.revoke(gid, {rule})
        for gid in sorted(wanted):  # no rule of theirs names the balancer's group yet
            self.authorize(gid, {rule})
        return bool(wanted)

    # -- NLB: clients, health checks and MTU discovery on the node security group -------------

    def sync_nlb_rules(
        self,
        lb_name: str,
        instances: Iterable[Instance],
        subnet_cidrs: Sequence[str],
        client_cidrs: Sequence[str],
        ports: NodePorts | None,
    ) -> bool:
        """Upstream ``updateInstanceSecurityGroupsForNLB``; ``ports=None`` removes the
        balancer's rules from every cluster group (the Service is gone). True when a rule was
        added."""
        if self.disable_ingress:
            return False
        with self._node_rules:
            return self._sync_nlb_rules(lb_name, instances, subnet_cidrs, client_cidrs, ports)

    def _sync_nlb_rules(
        self,
        lb_name: str,
        instances: Iterable[Instance],
        subnet_cidrs: Sequence[str],
        client_cidrs: Sequence[str],
        ports: NodePorts | None,
    ) -> bool:
        added = False
        groups = self.tagged()
        wanted = self.node_groups(instances, groups) if ports is not None else set()
        missing = wanted - groups.keys()
        groups.update(self.describe(missing))
        health_desc = f"{NLB_HEALTH_RULE}={lb_name}"
        client_desc = f"{NLB_CLIENT_RULE}={lb_name}"
        for gid in sorted(groups):
            current = rules_of(groups[gid].get("IpPermissions"))
            rules = set(current)
            desired: dict[str, set[Rule]] = {health_desc: set(), client_desc: set()}
            if gid in wanted and ports is not None:
                desired[client_desc] = nlb_traffic_rules(
                    client_desc, ports.protocol, ports.traffic, client_cidrs
                )
                if not _health_covered(ports, client_cidrs):
                    desired[health_desc] = nlb_traffic_rules(
                        health_desc, "tcp", ports.health, subnet_cidrs
                    )
            for desc in (health_desc, client_desc):
                added = added or bool(desired[desc] - rules)
                rules = self._sync_described(gid, rules, desc, desired[desc])
            if rules != current or _descriptions(rules) != _descriptions(current):
                self._sync_described(gid, rules, NLB_MTU_RULE, mtu_rules(rules))
        return added

    def _sync_described(
        self, group_id: str, rules: set[Rule], description: str, desired: set[Rule]
    ) -> set[Rule]:
        """Upstream ``updateInstanceSecurityGroupForNLBTraffic``: grant what is missing (by
        port/protocol/source), revoke what is not wanted among the rules so described."""
        grant = desired - rules
        revoke = described(rules - desired, description)
        self.revoke(group_id, revoke)
        self.authorize(group_id, grant)
        return (rules - revoke) | grant


def _health_covered(ports: NodePorts, client_cidrs: Sequence[str]) -> bool:
    """Upstream: a TCP client rule from 0.0.0.0/0 on the very health-check ports makes the
    health rule redundant."""
    return (
        list(client_cidrs) == [WORLD] and ports.protocol == "tcp" and ports.health == ports.traffic
    )


def _descriptions(rules: Iterable[Rule]) -> set[tuple[Rule, str]]:
    return {(r, r.description) for r in rules}
