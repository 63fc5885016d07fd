"""Pod-CIDR routes on a Neutron router (upstream ``pkg/openstack/routes.go`` v1.36.0).

- Routes live on ``[Route] router-id``: ``destination`` = the pod CIDR, ``nexthop`` = the
  node's InternalIP of the CIDR's family (``getAddrByNodeName``; kccm: when the caller gives
  no Node addresses, the first fixed address of that family of the server named like the
  Node).
- With the ``extraroute-atomic`` extension a route is added or removed with
  ``PUT /v2.0/routers/{id}/add_extraroutes`` / ``remove_extraroutes``; without it the whole
  list is read and written back with ``PUT /v2.0/routers/{id}``, one change at a time (a
  lock, as upstream's ``sync.Mutex``).
- With ``allowed-address-pairs``, the pod CIDR is added to (removed from) the
  ``allowed_address_pairs`` of the node's port: the port with the next hop as fixed IP on one
  of the router's networks (``getPortByIP``), skipped when its port security is off or the
  port has no ``port_security_enabled`` field (no ``port-security`` extension: upstream's
  ``PortSecurityEnabled`` is then false).
- Every change is undone when a later step fails (upstream's ``caller`` unwinders, run in
  reverse order): a route whose port cannot be found or updated is removed again. kccm
  difference: a *deleted* route whose port no longer exists (its server is gone) stays
  deleted, as there is no pair left to remove; upstream unwinds and re-adds it, and the
  route controller deletes it again, forever.
- Route names are the destination CIDR; a route whose next hop belongs to no Node is a
  blackhole whose ``target_node`` is the next hop (``ListRoutes``).
- kccm difference, deliberate: the route of a Node just deleted is usually still named after
  it (the directory keeps what it learned until the next listing), so its pod CIDR leaves the
  port's ``allowed_address_pairs`` with the route; OCCM's informer forgets the Node at once,
  the route becomes a blackhole and the pair stays on a port that may outlive the Node.

Next hops are named as OCCM names them, by the Node that has the address among its
``status.addresses`` (``getNodeNameByAddr`` over the Node informer): kccm's provider has no
informer, so :class:`NodeDirectory` lists the Nodes with the client ``initialize`` gets (once
at start, then only when an unknown next hop appears, at most every
:data:`NODE_LIST_MIN_INTERVAL` seconds). Without a client (tests, tools) a next hop is named
by the Node kccm created the route for, else by the server holding the address (one
``servers/detail`` listing), as the Node seen with that server or the server's name (OCCM
assumes Node name = server name in ``getServerByName`` too). The port's
``allowed_address_pairs`` read-modify-write is serialised (two pod CIDRs of a dual-stack node
share a port; upstream can lose one of the two updates).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from kccm.cloudprovider import CloudProviderError, NodeAddressType, NodeName, Route
from kccm.kube.resources import NODES
from kccm.providers.openstack.api import OpenStackAPI
from kccm.providers.openstack.instances import OpenStackInstances
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "NODE_LIST_MIN_INTERVAL",
    "NeutronRoutes",
    "NodeDirectory",
    "Unwinder",
    "network_extensions",
]

log = logging.getLogger(__name__)

Undo = Callable[[], None]
NODE_LIST_MIN_INTERVAL = 30.0
"""Seconds between two Node listings for next hops no Node was known to have."""
NODE_LIST_MAX_AGE = 300.0
"""Seconds a Node listing names known next hops (a deleted Node's stops being named after)."""
NODE_LIST_TIMEOUT = 30.0


class PortNotFound(CloudProviderError):
    """No port has the next hop as fixed IP on the router's networks (``getPortByIP``)."""


class NodeDirectory:
    """Node names by address (any address type, as ``getNodeNameByAddr``), from a
    Kubernetes client living on ``loop``; read from worker threads."""

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop, clock: Clock = REAL_CLOCK):
        self._client = client
        self._loop = loop
        self._clock = clock
        self._names: dict[str, NodeName] = {}
        self._listed_at: float | None = None
        self._lock = threading.Lock()

    def _list(self) -> dict[str, NodeName]:
        future = asyncio.run_coroutine_threadsafe(self._client.list(NODES), self._loop)
        names: dict[str, NodeName] = {}
        for node in future.result(NODE_LIST_TIMEOUT).items:
            name = str((node.get("metadata") or {}).get("name") or "")
            for address in (node.get("status") or {}).get("addresses") or ():
                names.setdefault(str(address.get("address", "")), name)
        return names

    def names(self, addresses: set[str]) -> dict[str, NodeName]:
        """The Node of each address; the Nodes are listed again when one is unknown and the
        last listing is older than :data:`NODE_LIST_MIN_INTERVAL`, or when it is older than
        :data:`NODE_LIST_MAX_AGE`."""
        with self._lock:
            now = self._clock.monotonic()
            age = float("inf") if self._listed_at is None else now - self._listed_at
            unknown = not addresses <= self._names.keys()
            if age >= NODE_LIST_MAX_AGE or (unknown and age >= NODE_LIST_MIN_INTERVAL):
                self._names = self._list()
                self._listed_at = now
            return {a: self._names[a] for a in addresses if a in self._names}

    def learn(self, address: str, name: NodeName) -> None:
        with self._lock:
            self._names[address] = name


def network_extensions(api: OpenStackAPI) -> frozenset[str]:
    """``GetNetworkExtensions``: the aliases of ``GET /v2.0/extensions``."""
    found = api.request("network", "GET", "/v2.0/extensions", operation="list_extensions")
    return frozenset(str(ext.get("alias")) for ext in (found or {}).get("extensions") or ())


class Unwinder:
    """Upstream's ``caller``: undo steps run in reverse order unless :meth:`disarm`-ed."""

    def __init__(self) -> None:
        self._steps: list[Undo] = []

    def push(self, step: Undo) -> None:
        self._steps.append(step)

    def unwind(self) -> None:
        for step in reversed(self._steps):
            step()
        self._steps.clear()


@contextmanager
def _unwinding() -> Iterator[Unwinder]:
    unwinder = Unwinder()
    try:
        yield unwinder
    except BaseException:
        unwinder.unwind()
        raise


def _is_v6(cidr: str) -> bool:
    return ipaddress.ip_network(cidr, strict=False).version == 6


def _pairs(port: Mapping[str, Any]) -> list[dict[str, str]]:
    """gophercloud's ``AddressPair`` with ``omitempty``: only the keys that are set."""
    return [
        {k: str(pair[k]) for k in ("ip_address", "mac_address") if pair.get(k)}
        for pair in port.get("allowed_address_pairs") or ()
    ]


class NeutronRoutes:
    """``cloudprovider.Routes`` on one Neutron router."""

    def __init__(
        self,
        api: OpenStackAPI,
        instances: OpenStackInstances,
        router_id: str,
        *,
        atomic: bool,
        allowed_address_pairs: bool,
    ) -> None:
        self.api = api
        self.instances = instances
        self.router_id = router_id
        self.atomic = atomic
        self.allowed_address_pairs = allowed_address_pairs
        self._routes_lock = threading.Lock()
        self._ports_lock = threading.Lock()
        self._names: dict[str, NodeName] = {}
        """next hop -> node name, learned from create_route and from server listings."""
        self._network_ids: list[str] = []
        self.directory: NodeDirectory | None = None
        """Set by the provider's ``initialize`` (a Kubernetes client); None: servers name the
        next hops."""

    # -- reading ----------------------------------------------------------------------------

    def _router(self) -> dict[str, Any]:
        found = self.api.request(
            "network", "GET", f"/v2.0/routers/{self.router_id}", operation="get_router"
        )
        router: dict[str, Any] = found["router"]
        return router

    def _router_network_ids(self) -> list[str]:
        """``getRouterNetworkIDs``: the networks of the router's ports."""
        return [
            str(port["network_id"])
            for port in self.api.paged(
                "network",
                "/v2.0/ports",
                "ports",
                {"device_id": self.router_id},
                operation="list_ports",
            )
            if port.get("network_id")
        ]

    def _resolve(self, nexthops: set[str]) -> dict[str, NodeName]:
        """Node names of next hops: by the Nodes' addresses (OCCM), else as the module says."""
        if self.directory is not None:
            found = self.directory.names(nexthops)
            self._names.update(found)
            return found
        unknown = nexthops - self._names.keys()
        if unknown:
            for server in self.api.paged(
                "compute", "/servers/detail", "servers", operation="list_servers"
            ):
                for items in (server.get("addresses") or {}).values():
                    for item in items or ():
                        address = str(item.get("addr", ""))
                        if address in unknown:
                            self._names[address] = self.instances.node_name_of(server)
        return {hop: self._names[hop] for hop in nexthops if hop in self._names}

    def list_routes(self, cluster_name: str) -> list[Route]:
        """``ListRoutes``: every route of the router (the route controller keeps to those in
        the cluster CIDR)."""
        entries = self._router().get("routes") or ()
        names = self._resolve({str(e.get("nexthop", "")) for e in entries})
        routes = []
        for entry in entries:
            destination, nexthop = str(entry["destination"]), str(entry.get("nexthop", ""))
            node = names.get(nexthop)
            routes.append(
                Route(
                    name=destination,
                    target_node=node or nexthop,
                    destination_cidr=destination,
                    blackhole=node is None,
                )
            )
        self._network_ids = self._router_network_ids()
        return routes

    # -- writing ----------------------------------------------------------------------------

    def _nexthop_of_node(self, route: Route) -> str:
        """``getAddrByNodeName``: the first InternalIP of the CIDR's family."""
        want_v6 = _is_v6(route.destination_cidr)
        for address in route.target_node_addresses:
            if address.type != NodeAddressType.INTERNAL_IP:
                continue
            try:
                ip = ipaddress.ip_address(address.address)
            except ValueError:
                continue
            if (ip.version == 6) == want_v6:
                return address.address
        for hop, name in self._names.items():
            if name == route.target_node and (":" in hop) == want_v6:
                return hop
        found = self._server_fixed_address(route.target_node, want_v6)
        if found:
            return found
        raise CloudProviderError(f"no InternalIP address found for node {route.target_node}")

    def _server_fixed_address(self, name: str, want_v6: bool) -> str:
        """kccm: without the Node's addresses (a caller other than the route controller),
        the first fixed address of that family of the server named like the Node."""
        try:
            server = self.instances.server_by_name(name)
        except CloudProviderError:
            return ""
        for network in sorted(server.get("addresses") or {}):
            for item in server["addresses"][network] or ():
                address = str(item.get("addr", ""))
                fixed = item.get("OS-EXT-IPS:type", "fixed") == "fixed"
                if fixed and address and (":" in address) == want_v6:
                    return address
        return ""

    def _put_routes(self, routes: Sequence[Mapping[str, str]]) -> None:
        self.api.request(
            "network",
            "PUT",
            f"/v2.0/routers/{self.router_id}",
            json={"router": {"routes": list(routes)}},
            operation="update_router",
        )

    def _extraroutes(self, action: str, route: Mapping[str, str]) -> None:
        self.api.request(
            "network",
            "PUT",
            f"/v2.0/routers/{self.router_id}/{action}",
            json={"router": {"routes": [dict(route)]}},
            operation=action,
        )

    def _undo(self, step: Undo, what: str) -> Undo:
        def run() -> None:
            log.info("openstack: reverting %s on router %s", what, self.router_id)
            try:
                step()
            except CloudProviderError as err:
                log.warning("openstack: unable to revert %s during error unwind: %s", what, err)

        return run

    def _add_route(self, wanted: dict[str, str], unwinder: Unwinder) -> bool:
        """False when the route was there already (non-atomic path: upstream then returns
        without touching the port)."""
        if self.atomic:
            self._extraroutes("add_extraroutes", wanted)
            unwinder.push(
                self._undo(lambda: self._extraroutes("remove_extraroutes", wanted), "routes")
            )
            return True
        current = [dict(r) for r in self._router().get("routes") or ()]
        if wanted in current:
            log.info("openstack: skipping existing route %s", wanted)
            return False
        self._put_routes([*current, wanted])
        unwinder.push(self._undo(lambda: self._put_routes(current), "routes"))
        return True

    def create_route(self, cluster_name: str, name_hint: str, route: Route) -> None:
        """``CreateRoute``: the route, then the port's allowed address pair; undone on
        failure."""
        nexthop = self._nexthop_of_node(route)
        wanted = {"destination": route.destination_cidr, "nexthop": nexthop}
        with self._routes_lock, _unwinding() as unwinder:
            if self._add_route(wanted, unwinder):
                self._update_pairs(nexthop, route.destination_cidr, add=True, unwinder=unwinder)
        self._names[nexthop] = route.target_node
        if self.directory is not None:
            self.directory.learn(nexthop, route.target_node)

    def _remove_route(self, route: Route, nexthop: str, unwinder: Unwinder) -> bool:
        """False when there was nothing to remove (non-atomic path only)."""
        old = {"destination": route.destination_cidr, "nexthop": nexthop}
        if self.atomic:
            self._extraroutes("remove_extraroutes", old)
            unwinder.push(self._undo(lambda: self._extraroutes("add_extraroutes", old), "routes"))
            return True
        current = [dict(r) for r in self._router().get("routes") or ()]
        if old not in current:
            log.info("openstack: skipping non-existent route %s", old)
            return False
        remaining = list(current)
        index = remaining.index(old)
        remaining[index] = remaining[-1]  # upstream: swap with the last, truncate
        remaining.pop()
        self._put_routes(remaining)
        unwinder.push(self._undo(lambda: self._put_routes(current), "routes"))
        return True

    def _nexthop_for_delete(self, route: Route) -> str:
        if route.blackhole:
            return str(route.target_node)
        try:
            return self._nexthop_of_node(route)
        except CloudProviderError:
            hops = [
                str(r.get("nexthop"))
                for r in self._router().get("routes") or ()
                if r.get("destination") == route.destination_cidr
            ]
            if len(hops) == 1:
                return hops[0]
            raise

    def delete_route(self, cluster_name: str, route: Route) -> None:
        """``DeleteRoute``: the route, then the port's pair (not for a blackhole)."""
        nexthop = self._nexthop_for_delete(route)
        with self._routes_lock, _unwinding() as unwinder:
            removed = self._remove_route(route, nexthop, unwinder)
            if removed and not route.blackhole:
                self._update_pairs(nexthop, route.destination_cidr, add=False, unwinder=unwinder)

    # -- allowed address pairs --------------------------------------------------------------

    def _port_by_ip(self, address: str) -> dict[str, Any]:
        """``getPortByIP``: the one port with this fixed IP on one of the router's networks."""
        if not self._network_ids:
            self._network_ids = self._router_network_ids()
        for network_id in self._network_ids:
            params = {"fixed_ips": f"ip_address={address}", "network_id": network_id}
            found = list(
                self.api.paged("network", "/v2.0/ports", "ports", params, operation="list_ports")
            )
            if len(found) == 1:
                return found[0]
        raise PortNotFound(f"no port with fixed IP {address} on the router's networks")

    def _update_pairs(self, nexthop: str, cidr: str, *, add: bool, unwinder: Unwinder) -> None:
        if not self.allowed_address_pairs:
            return
        with self._ports_lock:
            try:
                port = self._port_by_ip(nexthop)
            except PortNotFound:
                if add:
                    raise
                log.warning(
                    "openstack: no port has %s any more: route %s removed, no pair to remove",
                    nexthop,
                    cidr,
                )
                return
            if not port.get("port_security_enabled"):  # off, or absent: no extension
                log.warning("openstack: skipping allowed_address_pair for port %s", port["id"])
                return
            original = _pairs(port)
            present = [p for p in original if p.get("ip_address") == cidr]
            if add == bool(present):
                return
            changed = [*original, {"ip_address": cidr}] if add else _without(original, cidr)
            self._put_pairs(port["id"], changed)
            unwinder.push(
                self._undo(lambda: self._put_pairs(port["id"], original), "allowed-address-pairs")
            )

    def _put_pairs(self, port_id: str, pairs: list[dict[str, str]]) -> None:
        self.api.request(
            "network",
            "PUT",
            f"/v2.0/ports/{port_id}",
            json={"port": {"allowed_address_pairs": pairs}},
            operation="update_port",
        )


def _without(pairs: list[dict[str, str]], cidr: str) -> list[dict[str, str]]:
    """Upstream removes the first match by swapping in the last pair and truncating."""
    remaining = list(pairs)
    index = next(i for i, p in enumerate(remaining) if p.get("ip_address") == cidr)
    remaining[index] = remaining[-1]
    remaining.pop()
    return remaining
