"""The cluster's VPC and the subnets a load balancer goes into (upstream
``getLoadBalancerSubnets``, ``findELBSubnets`` and ``isSubnetPublic`` in ``aws.go``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.nlboptions import ServiceAnnotationError
from kccm.providers.aws.tags import (
    SUBNET_ROLE_INTERNAL,
    SUBNET_ROLE_PUBLIC,
    ClusterTagging,
    tag_dict,
)

__all__ = ["SubnetFinder"]


class SubnetFinder:
    """Finds the cluster's VPC (once) and the subnets of a new balancer."""

    def __init__(
        self, api: AWSAPI, tagging: ClusterTagging, *, vpc_id: str = "", subnet_id: str = ""
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._vpc_id = vpc_id
        self._subnet_id = subnet_id
        self._lock = threading.Lock()

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

    def for_balancer(self, named: Sequence[str], internal: bool) -> list[str]:
        """The subnets ``named`` by the annotation, else one discovered subnet per zone."""
        if named:
            return self.named(named)
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
            if not zone or (not internal and not _is_public(tables, subnet["SubnetId"])):
                continue
            if zone not in chosen or self._prefer(subnet, chosen[zone], internal):
                chosen[zone] = subnet
        if not chosen:
            raise CloudProviderError(
                f"could not find any suitable subnets for creating the ELB in {vpc} "
                f"({'internal' if internal else 'internet-facing: public subnets only'})"
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

    def named(self, names: Sequence[str]) -> list[str]:
        """Subnet IDs for ``subnet-...`` IDs and ``Name`` tags, in the annotation's order."""
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
