"""Routes on the route table named in the config (``routeTableName`` in
``routeTableResourceGroup``), as upstream v1.36.5 keeps them (``pkg/provider/azure_routes.go``).

- Route names: upstream runs with dual-stack on (``NewCloud`` sets ``ipv6DualStackEnabled``),
  so a route is named ``<node>____<CIDR without ':', '.' and '/'>`` (``mapNodeNameToRouteName``,
  ``consts.RouteNameFmt``) and read back as the node before ``____``
  (``MapRouteNameToNodeName``). Every route of the table is listed as the cluster's.
- Next hop: ``VirtualAppliance`` at the node's private IP of the CIDR's family, the first of
  its primary NIC's IP configurations (``getPrivateIPsForMachine``, ``findFirstIPByFamily``).
- A missing route table is created (``createRouteTable``: name, location, no routes).
- Writes are read-compare-write: the table is read, the routes asked for are added or removed
  (an unchanged route is no write), and the table is PUT with its ETag in ``If-Match``; a
  ``412`` reads it again. Route operations waiting at the same time go out in one PUT (upstream
  gathers them for ``routeUpdateIntervalInSeconds`` in its ``delayedRouteUpdater``; kccm writes
  as soon as the table is free, with everything that queued meanwhile).
- Adding a node's route also drops its old single-stack route (named as the node alone,
  ``cleanupOutdatedRoutes``); deleting a route removes every route of that node, as upstream's
  second delete (the node name without suffix) does. **Difference**: upstream matches by name
  prefix, so deleting ``node-1``'s routes also deletes ``node-10``'s; kccm matches the node name
  up to the separator.
- **Difference**: upstream then sleeps ``routeUpdateWaitingInSeconds`` (30 s) after each write;
  kccm returns when ARM's operation has completed.
- With ``tags``/``tagsMap`` set and the route table in ``resourceGroup``, listing the routes
  also tags the table (``ensureRouteTableTagged``).
- Nodes the ``is_unmanaged`` callback names: their routes are only remembered in memory and
  listed back (``routeCIDRs``), never written. The provider passes none yet (a route names only
  its Node, whose labels the route calls do not see), so such a Node's route fails.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import CloudProviderError, InstanceNotFound, Route
from kccm.providers.azure.addresses import primary_ip_configuration
from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.config_fields import AzureConfig
from kccm.providers.azure.loadbalancer.tags import parse_tags, reconcile_tags
from kccm.providers.azure.machines import Machine
from kccm.providers.azure.versions import ApiVersions

__all__ = ["SEPARATOR", "AzureRoutes", "node_of_route", "route_name"]

log = logging.getLogger(__name__)

SEPARATOR = "____"
NETWORK = "Microsoft.Network"


def route_name(node: str, cidr: str) -> str:
    """``mapNodeNameToRouteName`` with dual-stack on."""
    stripped = cidr.replace(":", "").replace(".", "").replace("/", "")
    return f"{node}{SEPARATOR}{stripped}"


def node_of_route(name: str) -> str:
    """``MapRouteNameToNodeName``."""
    return name.split(SEPARATOR)[0]


def _is_v6(text: str) -> bool:
    try:
        return ipaddress.ip_network(text, strict=False).version == 6
    except ValueError:
        return ":" in text


@dataclass
class _Op:
    add: bool
    node: str
    name: str
    cidr: str = ""
    next_hop: str = ""
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


MachineByName = Callable[[str], Machine | None]
NicOf = Callable[[Machine], Mapping[str, Any]]
IsUnmanaged = Callable[[str], bool]


class AzureRoutes:
    """``Routes`` on one route table (see the module doc). Thread-safe."""

    def __init__(
        self,
        arm: ARMClient,
        config: AzureConfig,
        versions: ApiVersions,
        *,
        machine_by_name: MachineByName,
        nic_of: NicOf,
        is_unmanaged: IsUnmanaged = lambda name: False,
    ) -> None:
        self.arm = arm
        self.config = config
        self.versions = versions
        self._machine_by_name = machine_by_name
        self._nic_of = nic_of
        self._is_unmanaged = is_unmanaged
        self.path = arm.resource_id(
            config.route_table_resource_group,
            f"{NETWORK}/routeTables",
            config.route_table_name,
        )
        self._pending: list[_Op] = []
        self._pending_lock = threading.Lock()
        self._writer = threading.Lock()
        self._unmanaged: dict[str, str] = {}

    # -- Routes -----------------------------------------------------------------------------

    def list_routes(self, cluster_name: str) -> list[Route]:
        """Every route of the table (and the remembered routes of unmanaged Nodes)."""
        table = self.arm.find(self.path, self.versions.route_tables, operation="routeTables.get")
        routes = [
            Route(
                name=str(r.get("name") or ""),
                target_node=node_of_route(str(r.get("name") or "")),
                destination_cidr=str((r.get("properties") or {}).get("addressPrefix") or ""),
            )
            for r in ((table or {}).get("properties") or {}).get("routes") or ()
        ]
        with self._pending_lock:
            routes += [
                Route(name=node, target_node=node, destination_cidr=cidr)
                for node, cidr in self._unmanaged.items()
            ]
        if table is not None:
            self._ensure_tagged(table)
        return routes

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        node = route.target_node
        if self._is_unmanaged(node):
            with self._pending_lock:
                self._unmanaged[node] = route.destination_cidr
            return
        hop = self._next_hop(node, route.destination_cidr)
        name = route_name(node, route.destination_cidr)
        self._apply(_Op(True, node, name, route.destination_cidr, hop))

    def delete_route(self, cluster_name: str, route: Route) -> None:
        node = route.target_node
        if self._is_unmanaged(node):
            with self._pending_lock:
                self._unmanaged.pop(node, None)
            return
        self._apply(_Op(False, node, route_name(node, route.destination_cidr)))

    # -- the next hop -----------------------------------------------------------------------

    def _next_hop(self, node: str, cidr: str) -> str:
        machine = self._machine_by_name(node)
        if machine is None:
            raise InstanceNotFound(f"no Azure machine for node {node!r}")
        nic = self._nic_of(machine)
        want_v6 = _is_v6(cidr)
        primary = primary_ip_configuration(nic)
        configs = [primary] + [
            c
            for c in (nic.get("properties") or {}).get("ipConfigurations") or ()
            if c is not primary
        ]
        if not want_v6:
            address = str((primary.get("properties") or {}).get("privateIPAddress") or "")
            if address and not _is_v6(address):
                return address
        for config in configs:
            address = str((config.get("properties") or {}).get("privateIPAddress") or "")
            if address and _is_v6(address) == want_v6:
                return address
        raise CloudProviderError(
            f"node {node!r}: no private IP of the family of {cidr} "
            "(no match found matching the ipfamily requested)"
        )

    # -- writing: queued operations, one PUT ------------------------------------------------

    def _apply(self, op: _Op) -> None:
        with self._pending_lock:
            self._pending.append(op)
        with self._writer:
            if not op.done.is_set():
                self._flush()
        if op.error is not None:
            raise op.error

    def _flush(self) -> None:
        with self._pending_lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self._write(batch)
        except Exception as err:  # handed to every waiting caller
            for op in batch:
                op.error = err
        finally:
            for op in batch:
                op.done.set()

    def _write(self, batch: list[_Op]) -> None:
        if (
            self.arm.find(self.path, self.versions.route_tables, operation="routeTables.get")
            is None
        ):
            if not any(op.add for op in batch):
                return
            log.info("azure: creating route table %s", self.config.route_table_name)
            self.arm.put(
                self.path,
                {"location": self.config.location, "properties": {}},
                self.versions.route_tables,
                operation="routeTables.createOrUpdate",
            )

        def mutate(table: dict[str, Any]) -> dict[str, Any] | None:
            props = table.setdefault("properties", {})
            routes = [dict(r) for r in props.get("routes") or ()]
            changed = False
            for op in batch:
                routes, dirty = (_add if op.add else _remove)(routes, op)
                changed = changed or dirty
            if not changed:
                return None
            props["routes"] = routes
            return table

        self.arm.update(
            self.path, self.versions.route_tables, mutate, operation="routeTables.createOrUpdate"
        )

    # -- tags -------------------------------------------------------------------------------

    def _ensure_tagged(self, table: Mapping[str, Any]) -> None:
        config = self.config
        if config.route_table_resource_group.lower() != config.resource_group.lower():
            return
        if not config.tags and not config.tags_map:
            return
        wanted = parse_tags(config.tags, config.tags_map)
        _, changed = reconcile_tags(dict(table.get("tags") or {}), wanted, config.system_tags)
        if not changed:
            return

        def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
            tags, dirty = reconcile_tags(
                dict(current.get("tags") or {}), wanted, config.system_tags
            )
            if not dirty:
                return None
            current["tags"] = tags
            return current

        self.arm.update(
            self.path, self.versions.route_tables, mutate, operation="routeTables.createOrUpdate"
        )


def _same_node(route: Mapping[str, Any], node: str) -> bool:
    return node_of_route(str(route.get("name") or "")).lower() == node.lower()


def _add(routes: list[dict[str, Any]], op: _Op) -> tuple[list[dict[str, Any]], bool]:
    """Add (or correct) the route; drop the node's single-stack route named as the node."""
    wanted = {
        "name": op.name,
        "properties": {
            "addressPrefix": op.cidr,
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": op.next_hop,
        },
    }
    kept, changed, present = [], False, False
    for route in routes:
        name = str(route.get("name") or "")
        if name.lower() == op.node.lower():
            changed = True  # the outdated single-stack route
            continue
        if name.lower() == op.name.lower():
            props = route.get("properties") or {}
            same = (
                str(props.get("addressPrefix") or "").lower() == op.cidr.lower()
                and str(props.get("nextHopIpAddress") or "").lower() == op.next_hop.lower()
            )
            if not same or present:
                changed = True
                continue
            present = True
        kept.append(route)
    if not present:
        kept.append(wanted)
        changed = True
    return kept, changed


def _remove(routes: list[dict[str, Any]], op: _Op) -> tuple[list[dict[str, Any]], bool]:
    """Remove every route of the node (upstream's two deletes)."""
    kept = [r for r in routes if not _same_node(r, op.node)]
    return kept, len(kept) != len(routes)
