"""``[Global] NLBSecurityGroupMode = Managed``: an NLB's own security group, as upstream.

Upstream cloud-provider-aws (``pkg/providers/v1/aws.go``):

- ``ensureNLBSecurityGroup`` chooses the groups an NLB is given: none when the mode is off (an
  existing NLB keeps what it has; the ``aws-load-balancer-security-groups`` annotation is
  ignored, logged at info level); in Managed mode none either for an existing NLB that has no
  group (AWS cannot add groups to an NLB created without one), the groups of the
  ``aws-load-balancer-security-groups`` annotation (bring your own: their rules are never
  touched), else the group named by ``GetSecurityGroupNameForNLB``, described
  ``[k8s] Managed SecurityGroup for LoadBalancer``, created by ``ensureSecurityGroup`` with the
  cluster tags and the ``additional-resource-tags``;
- ``ensureNLBSecurityGroupRules`` / ``createSecurityGroupRules``: the managed group's ingress is
  exactly every listener port (its protocol) from every source range, plus ICMP 3/4 (MTU
  discovery) from the source ranges (``setSecurityGroupIngress``);
- groups the NLB had that it no longer gets are deleted when the cluster owns them
  (``removeOwnedSecurityGroups``);
- ``EnsureLoadBalancerDeleted`` deletes the NLB's cluster-owned groups that no annotation names
  (``buildSecurityGroupsToDelete``, ``isOwnedSecurityGroup``) after the balancer, retrying while
  AWS still reports ``DependencyViolation`` (``deleteSecurityGroupsWithBackoff``); the
  retry finds the managed group by its name (:meth:`NLBGroups.leftover`), and while it is
  left the balancer counts as existing (``GetLoadBalancer``) so that the retry happens.

The node security group's rules do not change with the mode: upstream keeps calling
``updateInstanceSecurityGroupsForNLB`` with the client and subnet CIDRs.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError, RetryError, Service
from kccm.providers.aws.annotations import (
    ADDITIONAL_TAGS,
    EXTRA_SECURITY_GROUPS,
    SECURITY_GROUPS,
    LoadBalancerSpec,
    key_value_list,
)
from kccm.providers.aws.classic_spec import security_group_list
from kccm.providers.aws.securitygroups import SecurityGroups
from kccm.providers.aws.sgrules import Rule, icmp_mtu

__all__ = [
    "MANAGED",
    "NLB_GROUP_DESCRIPTION",
    "NLBGroups",
    "nlb_group_name",
    "nlb_group_rules",
]

log = logging.getLogger(__name__)

MANAGED = "Managed"
"""Upstream ``config.NLBSecurityGroupModeManaged`` (matched exactly, case included)."""
NLB_GROUP_DESCRIPTION = "[k8s] Managed SecurityGroup for LoadBalancer"
"""Upstream ``ensureNLBSecurityGroup``'s description of the group it creates."""
_NOT_ALNUM = re.compile(r"[^0-9A-Za-z]")
"""Upstream ``invalidSecurityGroupNameNLBPattern`` (``[[:^alnum:]]``)."""


def _meta(service: Service) -> Mapping[str, Any]:
    return service.get("metadata") or {}


def _annotations(service: Service) -> Mapping[str, str]:
    return _meta(service).get("annotations") or {}


def _annotated(service: Service) -> set[str]:
    """The groups the Service's security-group annotations name (never deleted)."""
    annotations = _annotations(service)
    return {
        *security_group_list(annotations.get(SECURITY_GROUPS, "")),
        *security_group_list(annotations.get(EXTRA_SECURITY_GROUPS, "")),
    }


def _key(service: Service) -> str:
    return f"{_meta(service).get('namespace', '')}/{_meta(service).get('name', '')}"


def nlb_group_name(cluster_name: str, service: Service) -> str:
    """Upstream ``GetSecurityGroupNameForNLB``: ``k8s-<ns:8>-<name:8>-<sha256:10>``, the hash
    over cluster name (the controller's ``--cluster-name``), name, namespace and UID."""
    meta = _meta(service)
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    digest = hashlib.sha256()
    for part in (cluster_name, name, namespace, str(meta.get("uid", ""))):
        digest.update(part.encode())
    clean_ns, clean_name = _NOT_ALNUM.sub("", namespace), _NOT_ALNUM.sub("", name)
    return f"k8s-{clean_ns[:8]}-{clean_name[:8]}-{digest.hexdigest()[:10]}"


def nlb_group_rules(spec: LoadBalancerSpec, sources: Sequence[str]) -> set[Rule]:
    """Upstream ``ensureNLBSecurityGroupRules`` + ``createSecurityGroupRules``: each listener
    port from each source range, and ICMP 3/4 from them. Upstream writes the listener's
    protocol lower-cased; for a TLS listener that is ``tls``, which EC2 refuses: kccm writes
    ``tcp`` (what a TLS listener receives)."""
    rules = {
        Rule("udp" if m.protocol == "UDP" else "tcp", m.port, m.port, cidr=cidr)
        for m in spec.mappings
        for cidr in sources
    }
    ipv4 = [c for c in sources if ":" not in c]  # upstream's ec2SourceRanges are IpRanges
    return rules | icmp_mtu(ipv4)


class NLBGroups:
    """The NLB's own security group (see the module docstring); inert unless ``managed``."""

    def __init__(self, groups: SecurityGroups, *, managed: bool) -> None:
        self._groups = groups
        self.managed = managed

    def choose(
        self, cluster_name: str, service: Service, existing: Mapping[str, Any] | None
    ) -> tuple[tuple[str, ...] | None, str]:
        """Upstream ``ensureNLBSecurityGroup``: the groups the NLB is to have (``None``: keep
        whatever it has) and the managed group's ID ("" when the rules are not kccm's)."""
        if not self.managed:
            if SECURITY_GROUPS in _annotations(service):
                log.info(
                    "NLB of %s: annotation %s ignored (only read with [Global] "
                    "NLBSecurityGroupMode = Managed, as upstream)",
                    _key(service),
                    SECURITY_GROUPS,
                )
            return None, ""
        if existing is not None and not existing.get("SecurityGroups"):
            log.info(
                "NLB %s exists without security groups: leaving it so (AWS cannot add them)",
                existing.get("LoadBalancerName"),
            )
            return None, ""
        byo = security_group_list(_annotations(service).get(SECURITY_GROUPS, ""))
        if byo:
            return byo, ""
        extra = key_value_list(_annotations(service).get(ADDITIONAL_TAGS, ""))
        name = nlb_group_name(cluster_name, service)
        group = self._groups.ensure_group(name, NLB_GROUP_DESCRIPTION, extra)
        return (str(group["GroupId"]),), str(group["GroupId"])

    def sync_rules(self, group_id: str, spec: LoadBalancerSpec, sources: Sequence[str]) -> None:
        """The managed group's ingress becomes exactly :func:`nlb_group_rules` (upstream
        ``setSecurityGroupIngress``): nothing written when it already is."""
        group = self._groups.describe([group_id]).get(group_id)
        if group is None:
            raise CloudProviderError(f"security group {group_id} of the NLB not found")
        self._groups.set_ingress(group, nlb_group_rules(spec, sources))

    def detached(self, before: Sequence[str], after: Sequence[str], owner: str) -> None:
        """Upstream ``removeOwnedSecurityGroups`` after an update: groups the NLB no longer
        has are deleted when the cluster owns them; failures are logged, as upstream. Where
        upstream polls up to 10 min while AWS still holds a group, kccm's worker goes on: the
        caller passes the managed group found by name (:meth:`leftover`) in ``before`` while
        the Service brings its own groups, so the next ensure deletes it."""
        gone = self._groups.describe(set(before) - set(after))
        for gid in sorted(gone):  # upstream revokes references to every detached group
            self._groups.revoke_references(gid)
        owned = [g for g in gone.values() if self._groups.is_owned(g)]
        try:
            self._groups.delete_groups((str(g["GroupId"]) for g in owned), owner)
        except (CloudProviderError, RetryError) as err:
            log.warning("cleaning up security groups detached from %s: %s", owner, err)

    def to_delete(self, service: Service, lb_groups: Sequence[str]) -> list[str]:
        """Upstream ``buildSecurityGroupsToDelete`` for an NLB: the balancer's groups that the
        cluster owns, other than ``ElbSecurityGroup`` and those an annotation names."""
        named = {*_annotated(service), self._groups.elb_security_group}
        return sorted(
            gid
            for gid, group in self._groups.describe(lb_groups).items()
            if gid not in named and self._groups.is_owned(group)
        )

    def leftover(self, cluster_name: str, service: Service) -> list[str]:
        """After the balancer is gone (a retry of a delete that met ``DependencyViolation``),
        the managed group is found by its name; only a cluster-owned one that no annotation
        names is deleted, until it is given up (``SecurityGroups.abandoned``: 10 minutes in
        use, as upstream). Looked for in either mode: a group made in Managed mode outlives a
        switch of the mode (upstream's delete, polling in place, deletes it then too)."""
        group = self._groups.by_name(nlb_group_name(cluster_name, service))
        if group is None or not self._groups.is_owned(group):
            return []
        gid = str(group["GroupId"])
        if gid in _annotated(service) or gid in self._groups.abandoned:
            return []
        return [gid]

    def delete(self, ids: Sequence[str], owner: str) -> None:
        """Upstream ``deleteSecurityGroupsWithBackoff``: a group still in use makes the
        controller retry (:class:`RetryError`, 5 s) instead of polling in place."""
        self._groups.delete_groups(ids, owner)
