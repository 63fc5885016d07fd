"""Pod-CIDR routes in the cluster's VPC route table (upstream ``aws_routes.go``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import CloudProviderError, Route
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.instances import EC2Instances
from kccm.providers.aws.tags import ClusterTagging

__all__ = ["VPCRoutes"]

log = logging.getLogger(__name__)


class VPCRoutes:
    """Routes ``<pod CIDR> -> <instance>`` in one route table: ``RouteTableID`` when
    configured, else the single table tagged for the cluster."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        instances: EC2Instances,
        route_table_id: str = "",
        vpc_id: str = "",
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._instances = instances
        self._route_table_id = route_table_id
        self._vpc_id = vpc_id

    def _table(self, cluster_name: str) -> Mapping[str, Any]:
        if self._route_table_id:
            filters = [{"Name": "route-table-id", "Values": [self._route_table_id]}]
            tables = list(
                self._api.pages("ec2", "describe_route_tables", "RouteTables", Filters=filters)
            )
        else:
            filters = [{"Name": "vpc-id", "Values": [self._vpc_id]}] if self._vpc_id else []
            tables = [
                t
                for t in self._api.pages(
                    "ec2", "describe_route_tables", "RouteTables", Filters=filters
                )
                if self._tagging.cluster_id and self._tagging.owns(t.get("Tags"))
            ]
        if not tables:
            raise CloudProviderError(
                f"no route table for cluster {cluster_name!r}: set RouteTableID or tag one "
                f"{self._tagging.cluster_tag_key}"
            )
        if len(tables) > 1:
            ids = ", ".join(sorted(t["RouteTableId"] for t in tables))
            raise CloudProviderError(
                f"several route tables are tagged for cluster {cluster_name!r}: {ids}"
            )
        table: Mapping[str, Any] = tables[0]
        return table

    def list_routes(self, cluster_name: str) -> list[Route]:
        table = self._table(cluster_name)
        entries = [r for r in table.get("Routes", ()) if r.get("DestinationCidrBlock")]
        targets = self._instances.by_ids(
            sorted({r["InstanceId"] for r in entries if r.get("InstanceId")})
        )
        routes = []
        for entry in entries:
            cidr = entry["DestinationCidrBlock"]
            name = f"{cluster_name}-{cidr}"
            if entry.get("State") == "blackhole":
                routes.append(Route(name=name, destination_cidr=cidr, blackhole=True))
                continue
            instance = targets.get(entry.get("InstanceId", ""))
            if instance is not None and instance.get("PrivateDnsName"):
                routes.append(
                    Route(name=name, target_node=instance["PrivateDnsName"], destination_cidr=cidr)
                )
            elif entry.get("InstanceId"):
                log.warning(
                    "route %s points at instance %s, not one of this cluster's",
                    cidr,
                    entry["InstanceId"],
                )
        return routes

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        instance = self._instances.by_node_name(route.target_node)
        instance_id = instance["InstanceId"]
        if instance.get("SourceDestCheck", True):
            self._api.call(
                "ec2",
                "modify_instance_attribute",
                InstanceId=instance_id,
                SourceDestCheck={"Value": False},
            )
        table = self._table(cluster_name)
        table_id = table["RouteTableId"]
        for entry in table.get("Routes", ()):
            if (
                entry.get("DestinationCidrBlock") == route.destination_cidr
                and entry.get("State") == "blackhole"
            ):
                log.info("deleting blackholed route %s", route.destination_cidr)
                self._api.call(
                    "ec2",
                    "delete_route",
                    RouteTableId=table_id,
                    DestinationCidrBlock=route.destination_cidr,
                )
        self._api.call(
            "ec2",
            "create_route",
            RouteTableId=table_id,
            DestinationCidrBlock=route.destination_cidr,
            InstanceId=instance_id,
        )

    def delete_route(self, cluster_name: str, route: Route) -> None:
        table_id = self._table(cluster_name)["RouteTableId"]
        try:
            self._api.call(
                "ec2",
                "delete_route",
                RouteTableId=table_id,
                DestinationCidrBlock=route.destination_cidr,
            )
        except CloudProviderError as err:
            if getattr(err, "code", "") != "InvalidRoute.NotFound":
                raise
