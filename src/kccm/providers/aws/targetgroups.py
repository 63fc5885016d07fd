"""An NLB's target groups: created, read, compared and corrected (upstream
``ensureTargetGroup``, ``ensureTargetGroupTargets`` and ``ensureTargetGroupAttributes`` in
``aws_loadbalancer.go``).

Every step reads first and writes only a difference: targets (``DescribeTargetHealth``), the
health check (from the group as described), attributes (``DescribeTargetGroupAttributes``,
only when the Service asks for some).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError, RetryError
from kccm.providers.aws.annotations import PortMapping
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.tags import SERVICE_NAME_TAG, ClusterTagging, tag_dict

__all__ = ["TargetGroups", "aws_tags", "error_code_of", "forward_arn"]

log = logging.getLogger(__name__)

TARGET_CHUNK = 100
DELETE_RETRY_SECONDS = 5.0
_GONE_TARGET_STATES = frozenset({"draining"})

Group = Mapping[str, Any]


def error_code_of(err: BaseException) -> str:
    return str(getattr(err, "code", ""))


def aws_tags(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def forward_arn(listener: Mapping[str, Any] | None) -> str:
    """The target group a listener forwards to (empty when none)."""
    for action in (listener or {}).get("DefaultActions") or ():
        if action.get("TargetGroupArn"):
            return str(action["TargetGroupArn"])
    return ""


def _chunks(
    items: Sequence[dict[str, Any]], size: int = TARGET_CHUNK
) -> Iterable[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def health_change(group: Group, mapping: PortMapping) -> dict[str, Any]:
    """What ``ModifyTargetGroup`` must change so the group's health check is the mapping's
    (protocol and interval are part of the group's name: a change there makes a new group)."""
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
    if str(group.get("HealthCheckProtocol", "")).upper() != hc.protocol:
        change["HealthCheckProtocol"] = hc.protocol
    if int(group.get("HealthCheckIntervalSeconds", 0)) != hc.interval:
        change["HealthCheckIntervalSeconds"] = hc.interval
    return change


_FIXED_SETTINGS = ("VpcId", "Protocol", "Port", "TargetType")
"""What ``ModifyTargetGroup`` cannot change: an adopted group must have what kccm asked."""


def _adoptable(existing: Group, asked: Mapping[str, Any]) -> Group:
    """``existing`` when its fixed settings are the ones asked; else the error upstream gives
    (``error creating load balancer target group``), naming the differences."""
    differences = [
        f"{key} {existing.get(key)!s} (wanted {asked[key]!s})"
        for key in _FIXED_SETTINGS
        if str(existing.get(key, "")).upper() != str(asked[key]).upper()
    ]
    if differences:
        raise CloudProviderError(
            f"error creating load balancer target group: DuplicateTargetGroupName: a target "
            f"group named {asked['Name']} exists with {', '.join(differences)}; kccm does not "
            "adopt it: delete it, or change the Service so that its name differs"
        )
    log.info("adopting the existing target group %s", asked["Name"])
    return existing


class TargetGroups:
    """Target-group operations of the NLBs (one per Service port)."""

    def __init__(self, api: AWSAPI, tagging: ClusterTagging) -> None:
        self._api = api
        self._tagging = tagging

    def by_name(self, name: str) -> Group | None:
        try:
            found = self._api.call("elbv2", "describe_target_groups", Names=[name])
        except CloudProviderError as err:
            if error_code_of(err) == "TargetGroupNotFound":
                return None
            raise
        groups = found.get("TargetGroups") or []
        return groups[0] if groups else None

    def of_listeners(self, listeners: Sequence[Mapping[str, Any]]) -> dict[str, Group]:
        """The target groups the listeners forward to, by ARN (asked by ARN, not by load
        balancer: a group is only linked to its balancer through a listener)."""
        arns = sorted({a for a in map(forward_arn, listeners) if a})
        if not arns:
            return {}
        try:
            groups = self._api.call("elbv2", "describe_target_groups", TargetGroupArns=arns)
        except CloudProviderError as err:
            if error_code_of(err) != "TargetGroupNotFound":
                raise
            return self._one_by_one(arns)  # one was deleted behind kccm's back
        return {g["TargetGroupArn"]: g for g in groups.get("TargetGroups", ())}

    def _one_by_one(self, arns: Sequence[str]) -> dict[str, Group]:
        found: dict[str, Group] = {}
        for arn in arns:
            try:
                reply = self._api.call("elbv2", "describe_target_groups", TargetGroupArns=[arn])
            except CloudProviderError as err:
                if error_code_of(err) == "TargetGroupNotFound":
                    continue
                raise
            found.update({g["TargetGroupArn"]: g for g in reply.get("TargetGroups", ())})
        return found

    def is_ours(self, group: Group, service_key: str) -> bool:
        tags = self._api.call("elbv2", "describe_tags", ResourceArns=[group["TargetGroupArn"]])
        descriptions = tags.get("TagDescriptions") or [{}]
        found = tag_dict(descriptions[0].get("Tags"))
        return found.get(SERVICE_NAME_TAG) == service_key and self._tagging.owns(
            descriptions[0].get("Tags")
        )

    def create(
        self, vpc_id: str, name: str, mapping: PortMapping, tags: Mapping[str, str]
    ) -> Group:
        """Create the group, or adopt the one of that name an interrupted ensure left.

        Upstream ``ensureTargetGroup`` calls ``CreateTargetGroup`` and relies on AWS answering
        an existing group of the same name and settings with that group (the call is
        idempotent): it adopts by name, looking at no tag. The name (upstream
        ``buildTargetGroupName``) hashes the cluster ID, the Service's namespace and name,
        its ports, protocol and health-check protocol and interval, so a group so named is
        this cluster's for this Service port. AWS answers ``DuplicateTargetGroupName`` when
        the settings differ (moto always does): kccm adopts the group only when what AWS
        cannot change — VPC, protocol, port, target type — is what it asked for (the health
        check is corrected afterwards); otherwise it fails, as upstream does."""
        params = self._create_params(vpc_id, name, mapping, tags)
        log.info("creating target group %s (node port %d)", name, mapping.node_port)
        try:
            reply = self._api.call("elbv2", "create_target_group", **params)
        except CloudProviderError as err:
            existing = (
                self.by_name(name) if error_code_of(err) == "DuplicateTargetGroupName" else None
            )
            if existing is None:
                raise
            return _adoptable(existing, params)
        group: Group = reply["TargetGroups"][0]
        return group

    @staticmethod
    def _create_params(
        vpc_id: str, name: str, mapping: PortMapping, tags: Mapping[str, str]
    ) -> dict[str, Any]:
        hc = mapping.health
        params: dict[str, Any] = {
            "Name": name,
            "Protocol": mapping.protocol,
            "Port": mapping.node_port,
            "VpcId": vpc_id,
            "TargetType": "instance",
            "HealthCheckProtocol": hc.protocol,
            "HealthCheckPort": hc.port,
            "HealthCheckIntervalSeconds": hc.interval,
            "HealthyThresholdCount": hc.healthy,
            "UnhealthyThresholdCount": hc.unhealthy,
            "Tags": aws_tags(tags),
        }
        if hc.protocol != "TCP":
            params["HealthCheckPath"] = hc.path
        return params

    def delete(self, arn: str) -> None:
        try:
            self._api.call("elbv2", "delete_target_group", TargetGroupArn=arn)
        except CloudProviderError as err:
            if error_code_of(err) == "TargetGroupNotFound":
                return
            if error_code_of(err) == "ResourceInUse":
                raise RetryError(
                    f"target group {arn} is still in use; retrying", DELETE_RETRY_SECONDS
                ) from err
            raise

    def sync(
        self,
        group: Group,
        mapping: PortMapping,
        instances: list[str],
        attributes: Mapping[str, str],
    ) -> None:
        """Targets, health check and attributes of an existing group, each only if it differs."""
        self.sync_targets(group, instances)
        change = health_change(group, mapping)
        if change:
            log.info("correcting the health check of %s: %s", group["TargetGroupName"], change)
            self._api.call(
                "elbv2", "modify_target_group", TargetGroupArn=group["TargetGroupArn"], **change
            )
        self.sync_attributes(group, attributes)

    def sync_attributes(self, group: Group, wanted: Mapping[str, str]) -> None:
        """Upstream ``buildTargetGroupAttributes``: the attributes the Service names, when they
        differ; the others keep their value (so nothing is read when none is named)."""
        if not wanted:
            return
        arn = group["TargetGroupArn"]
        found = self._api.call("elbv2", "describe_target_group_attributes", TargetGroupArn=arn)
        current = {a["Key"]: a["Value"] for a in found.get("Attributes", ())}
        # Upstream skips an attribute AWS does not report; AWS reports both supported ones for
        # every NLB group, moto only once set: a missing one is written (once).
        change = [{"Key": k, "Value": v} for k, v in sorted(wanted.items()) if current.get(k) != v]
        if change:
            self._api.call(
                "elbv2", "modify_target_group_attributes", TargetGroupArn=arn, Attributes=change
            )

    def sync_targets(self, group: Group, instances: list[str]) -> None:
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
            if error_code_of(err) != "InvalidTarget":
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
