"""Routes in the VPC's route tables, as upstream's route controller keeps them
(kubernetes/cloud-provider-alibaba-cloud v2.14.0, ``pkg/controller/route`` and
``pkg/provider/alibaba/vpc/vpc.go``).

- Tables (``getRouteTables``): ``routeTableIDs`` of the cloud config (comma-separated), else
  the VPC's one route table (``DescribeRouteTableList`` with ``VpcId``); none, or more than
  one, is an error naming the VPC.
- Listing (``ListRoute``): ``DescribeRouteEntryList`` with ``RouteEntryType=Custom``,
  ``NextHopType=Instance``, ``MaxResult=500``, paged by ``NextToken``; kept: custom entries
  with one ``Instance`` next hop and a destination other than ``0.0.0.0/0``. A route is named
  ``<region>.<instance>-<cidr>`` (upstream's ``Name``) and targets the Node whose providerID
  names that instance (found in the Nodes, :class:`NodeDirectory`); a route to an instance no
  Node has keeps the providerID as its target, so the route controller removes it when its CIDR
  is in the cluster CIDR. With several tables a route is listed once, and left out while a
  table of a known Node lacks it (so that it is created there).
- Creating (``CreateRoute``): ``CreateRouteEntry`` (``RouteTableId``, ``DestinationCidrBlock``,
  ``NextHopType=Instance``, ``NextHopId``) in every table lacking it, one at a time (upstream's
  ``routeLock``: the VPC refuses concurrent route writes); ``InvalidCIDRBlock.Duplicate`` is
  success when the table's entry for that CIDR has the same next hop (``createRouteForInstance``).
- Deleting (``DeleteRoute``): ``DeleteRouteEntry`` with the CIDR and next hop in every table;
  ``InvalidRouteEntry.NotFound`` is success.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kccm.cloudprovider import CloudProviderError, NodeName, Route
from kccm.kube.resources import NODES
from kccm.providers.alibabacloud.config import AlibabaConfig
from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.instances import parse_provider_id, provider_id_of
from kccm.providers.alibabacloud.rpc import RPCClient

__all__ = ["NodeDirectory", "Tables", "VpcRoutes", "route_name"]

log = logging.getLogger(__name__)

MAX_ENTRIES = 500
"""``model.RouteMaxQueryRouteEntry``."""
NODE_LIST_MIN_INTERVAL = 5.0
NODE_LIST_TIMEOUT = 30.0


def route_name(provider_id: str, cidr: str) -> str:
    return f"{provider_id}-{cidr}"


class NodeDirectory:
    """Node names by providerID and back, from the Nodes (a Kubernetes client living on
    ``loop``, read from worker threads), listed again when an unknown one is asked for."""

    def __init__(
        self,
        lister: Callable[[], Iterable[dict[str, Any]]],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lister = lister
        self._clock = clock
        self._by_instance: dict[str, NodeName] = {}
        self._by_name: dict[NodeName, str] = {}
        self._listed_at: float | None = None
        self._lock = threading.Lock()

    @classmethod
    def of_client(cls, client: Any, loop: asyncio.AbstractEventLoop) -> NodeDirectory:
        def listed() -> Iterable[dict[str, Any]]:
            future = asyncio.run_coroutine_threadsafe(client.list(NODES), loop)
            return list(future.result(NODE_LIST_TIMEOUT).items)

        return cls(listed)

    def _refresh(self, force: bool) -> None:
        now = self._clock()
        recent = self._listed_at is not None and now - self._listed_at < NODE_LIST_MIN_INTERVAL
        if not force and recent:
            return
        by_instance: dict[str, NodeName] = {}
        by_name: dict[NodeName, str] = {}
        for node in self._lister():
            name = str((node.get("metadata") or {}).get("name") or "")
            provider_id = str((node.get("spec") or {}).get("providerID") or "")
            try:
                _, instance = parse_provider_id(provider_id) if provider_id else ("", "")
            except CloudProviderError:
                continue
            if instance:
                by_instance[instance] = name
                by_name[name] = provider_id
        self._by_instance, self._by_name = by_instance, by_name
        self._listed_at = now

    def names(self, instances: set[str]) -> dict[str, NodeName]:
        with self._lock:
            if self._listed_at is None or not instances <= self._by_instance.keys():
                self._refresh(force=self._listed_at is None)
            return {i: self._by_instance[i] for i in instances if i in self._by_instance}

    def provider_id(self, name: NodeName) -> str:
        with self._lock:
            if name not in self._by_name:
                self._refresh(force=True)
            return self._by_name.get(name, "")


@dataclass(frozen=True)
class _Entry:
    table: str
    cidr: str
    instance: str


class Tables:
    """The route tables routes go to (``getRouteTables``)."""

    def __init__(self, rpc: RPCClient, config: AlibabaConfig, vpc_id: str) -> None:
        self.rpc = rpc
        self.config = config
        self.vpc_id = vpc_id

    def ids(self) -> list[str]:
        if self.config.route_tables:
            return self.config.route_tables
        page = self.rpc.call("vpc", "DescribeRouteTableList", {"VpcId": self.vpc_id})
        listed = (page.get("RouterTableList") or {}).get("RouterTableListType") or []
        tables = [str(t.get("RouteTableId", "")) for t in listed]
        if len(tables) > 1:
            raise CloudProviderError(
                f"multiple route tables found by vpc id[{self.vpc_id}], "
                f"length(tables)={len(tables)}"
            )
        if not tables:
            raise CloudProviderError(f"no route tables found by vpc id[{self.vpc_id}]")
        return tables

    def entries(self, table: str) -> list[_Entry]:
        """``ListRoute``'s kept entries of ``table``."""
        params = {
            "RouteTableId": table,
            "RouteEntryType": "Custom",
            "NextHopType": "Instance",
            "MaxResult": str(MAX_ENTRIES),
        }
        found = []
        for page in self.rpc.token_pages("vpc", "DescribeRouteEntryList", params):
            for entry in (page.get("RouteEntrys") or {}).get("RouteEntry") or ():
                hops = (entry.get("NextHops") or {}).get("NextHop") or []
                cidr = str(entry.get("DestinationCidrBlock", ""))
                if entry.get("Type") != "Custom" or len(hops) != 1 or cidr == "0.0.0.0/0":
                    continue
                if str(hops[0].get("NextHopType", "")).lower() != "instance":
                    continue
                found.append(_Entry(table, cidr, str(hops[0].get("NextHopId", ""))))
        return found


class VpcRoutes:
    """``Routes`` on the VPC's route tables (see the module doc)."""

    def __init__(self, tables: Tables, region: str) -> None:
        self.tables = tables
        self.region = region
        self.directory: NodeDirectory | None = None
        self._writer = threading.Lock()

    def _names(self, instances: set[str]) -> dict[str, NodeName]:
        return self.directory.names(instances) if self.directory is not None else {}

    def list_routes(self, cluster_name: str) -> list[Route]:
        tables = self.tables.ids()
        by_table = {t: self.tables.entries(t) for t in tables}
        every = {(e.cidr, e.instance) for entries in by_table.values() for e in entries}
        names = self._names({instance for _, instance in every})
        routes = []
        for cidr, instance in sorted(every):
            node = names.get(instance)
            present = all(
                any((e.cidr, e.instance) == (cidr, instance) for e in by_table[t]) for t in tables
            )
            if node is not None and not present:
                continue  # a table lacks it: listed as missing, so that it is created there
            provider_id = provider_id_of(self.region, instance)
            routes.append(
                Route(
                    name=route_name(provider_id, cidr),
                    target_node=node or provider_id,
                    destination_cidr=cidr,
                )
            )
        return routes

    def _instance_of(self, route: Route) -> str:
        provider_id = ""
        suffix = f"-{route.destination_cidr}"
        if route.name.endswith(suffix):
            provider_id = route.name[: -len(suffix)]
        if not provider_id and self.directory is not None:
            provider_id = self.directory.provider_id(route.target_node)
        if not provider_id:
            raise CloudProviderError(f"node {route.target_node} has no providerID yet")
        return parse_provider_id(provider_id)[1]

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        provider_id = self.directory.provider_id(route.target_node) if self.directory else ""
        if not provider_id:
            raise CloudProviderError(f"node {route.target_node} has no providerID yet")
        instance = parse_provider_id(provider_id)[1]
        with self._writer:
            for table in self.tables.ids():
                entries = self.tables.entries(table)
                if any(
                    e.cidr == route.destination_cidr and e.instance == instance for e in entries
                ):
                    continue
                self._create(table, route.destination_cidr, instance)

    def _create(self, table: str, cidr: str, instance: str) -> None:
        params = {
            "RouteTableId": table,
            "DestinationCidrBlock": cidr,
            "NextHopType": "Instance",
            "NextHopId": instance,
        }
        try:
            self.tables.rpc.call("vpc", "CreateRouteEntry", params)
        except AlibabaError as err:
            if err.code != "InvalidCIDRBlock.Duplicate":
                raise
            same = [e for e in self.tables.entries(table) if e.cidr == cidr]
            if not any(e.instance == instance for e in same):
                raise
        log.info("alibabacloud: created route %s -> %s in %s", cidr, instance, table)

    def delete_route(self, cluster_name: str, route: Route) -> None:
        instance = self._instance_of(route)
        with self._writer:
            for table in self.tables.ids():
                params = {
                    "RouteTableId": table,
                    "DestinationCidrBlock": route.destination_cidr,
                    "NextHopId": instance,
                }
                try:
                    self.tables.rpc.call("vpc", "DeleteRouteEntry", params)
                except AlibabaError as err:
                    if err.code != "InvalidRouteEntry.NotFound":
                        raise
