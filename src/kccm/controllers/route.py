"""``node-route-controller`` (alias ``route``): pod-CIDR routes in the cloud for every Node.

Mirrors upstream ``controllers/route/route_controller.go`` and ``startRouteController``:

- **start conditions** (:func:`build`): nothing runs when ``--configure-cloud-routes`` is false
  or the provider has no Routes (a logged warning, ``None``); ``--cluster-cidr`` must be one
  CIDR or a dual-stack pair, otherwise :func:`parse_cluster_cidrs` raises ``ValueError``
  (fatal upstream);
- **reconcile** (:meth:`RouteController.reconcile`): one route per ``spec.podCIDRs`` entry
  (``spec.podCIDR`` is never read), name hint = node UID, target addresses = the node's
  ``status.addresses``; in-range routes that are blackholes, target an unknown (or empty)
  node, carry a CIDR no longer on their node, or (with ``enable_node_addresses``) stale
  addresses are deleted; when ``routes[0].enable_node_addresses`` deletes finish before
  creates start; every cloud route call waits on one semaphore (``max_concurrent_route_operations``,
  200 upstream); creates are retried only on a Kubernetes ``Conflict``; a failed create records
  ``Warning FailedToCreateRoute`` on the Node; afterwards the ``NetworkUnavailable`` condition
  is written (``False/RouteCreated`` or ``True/NoRouteCreated``) unless the node already has
  that status and reason;
- **triggering**: node add/delete, and updates changing ``spec.podCIDRs`` or
  ``status.addresses`` (or a resync: equal resourceVersions), put the single key ``routes`` on
  the ``Routes`` queue with ``add_rate_limited`` (one token per ``min_resync_interval``, 10 s,
  no wait above it: upstream's watch-based mode, KEP-5237). On top of that a non-sliding
  safety tick every ``route_reconciliation_period`` (10 s, upstream's default mode) adds the
  key directly, bypassing the bucket, so cloud-side drift no node event reveals (a route
  deleted by hand) is repaired within one period exactly as upstream's default mode does.
  Decision: the safety period defaults to the same 10 s (``safety_reconcile_period`` may
  lengthen it for clouds with tight route-API quotas); the worst case is two reconciles per
  period (one tick, one event).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedRoutes
from kccm.cloudprovider.types import NodeAddress, Route
from kccm.controllers.base import CloudController, ControllerContext
from kccm.controllers.nodeutil import (
    Backoff,
    format_time,
    get_node_condition,
    node_name,
    retry_on_conflict,
    set_node_condition,
)
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import NODES
from kccm.runtime.events import EVENT_TYPE_WARNING, EventRecorder, ObjectRef
from kccm.runtime.informers import EventHandler, Informer
from kccm.runtime.ratelimiters import (
    BucketRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    route_controller_rate_limiter,
)
from kccm.util.gostrconv import format_duration

__all__ = [
    "CONDITION_NETWORK_UNAVAILABLE",
    "CONTROLLER_ALIAS",
    "CONTROLLER_NAME",
    "EVENT_COMPONENT",
    "MAX_CONCURRENT_ROUTE_OPERATIONS",
    "QUEUE_KEY",
    "QUEUE_NAME",
    "RouteAction",
    "RouteController",
    "RouteControllerOptions",
    "build",
    "equal_node_addresses",
    "get_route_action",
    "is_responsible_for_route",
    "node_update_is_relevant",
    "parse_cluster_cidrs",
]

_log = logging.getLogger(__name__)

CONTROLLER_NAME = "node-route-controller"
CONTROLLER_ALIAS = "route"
EVENT_COMPONENT = "route_controller"
QUEUE_NAME = "Routes"
QUEUE_KEY = "routes"
MAX_CONCURRENT_ROUTE_OPERATIONS = 200
MIN_ROUTE_RESYNC_INTERVAL = 10.0
CONDITION_NETWORK_UNAVAILABLE = "NetworkUnavailable"
UPDATE_NETWORK_CONDITION_BACKOFF = Backoff(steps=5, duration=0.1, jitter=1.0)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass
class RouteControllerOptions:
    """Upstream flags and constants, with upstream defaults.

    ``safety_reconcile_period`` (kccm): the non-sliding safety tick; ``None`` means
    ``route_reconciliation_period`` (upstream's default mode reconciles every period).
    ``min_resync_interval`` is upstream's ``minRouteResyncInterval`` (10 s).
    """

    configure_cloud_routes: bool = True
    cluster_cidr: str = ""
    route_reconciliation_period: float = 10.0
    safety_reconcile_period: float | None = None
    min_resync_interval: float = MIN_ROUTE_RESYNC_INTERVAL
    max_concurrent_route_operations: int = MAX_CONCURRENT_ROUTE_OPERATIONS


class RouteAction(StrEnum):
    KEEP = "keep"
    ADD = "add"
    REMOVE = "remove"
    UPDATE = "update"


# -- start conditions -------------------------------------------------------------------------


def parse_cluster_cidrs(value: str) -> list[IPNetwork]:
    """Upstream ``processCIDRs`` plus the checks of ``startRouteController``.

    The value is trimmed and comma-split; every entry must parse (so an empty value fails);
    two CIDRs must be one IPv4 and one IPv6; more than two are refused.
    """
    entries = value.strip().split(",")
    cidrs = [_parse_cidr(entry, value) for entry in entries]
    families = {cidr.version for cidr in cidrs}
    if len(cidrs) > 1 and len(families) < 2:
        raise ValueError(
            f"invalid --cluster-cidr {value!r}: len of ClusterCIDRs=={len(cidrs)} and they are "
            "not configured as dual stack (at least one from each IPFamily)"
        )
    if len(cidrs) > 2:
        raise ValueError(
            f"invalid --cluster-cidr {value!r}: length of clusterCIDRs is:{len(cidrs)} more "
            "than max allowed of 2"
        )
    return cidrs


def _parse_cidr(entry: str, value: str) -> IPNetwork:
    try:
        if "/" not in entry:
            raise ValueError("missing prefix length")
        return ipaddress.ip_network(entry, strict=False)
    except ValueError as err:
        raise ValueError(
            f"invalid --cluster-cidr {value!r}: failed to parse cidr value:{entry!r} "
            f"with error:{err}"
        ) from None


def build(context: ControllerContext, options: RouteControllerOptions) -> RouteController | None:
    """``startRouteController``: None (logged) when disabled or Routes are unsupported;
    ``ValueError`` for a bad ``--cluster-cidr`` (upstream makes that fatal)."""
    if not options.configure_cloud_routes:
        _log.info(
            "%s: will not configure cloud provider routes (--configure-cloud-routes=false)",
            CONTROLLER_NAME,
        )
        return None
    routes = context.cloud.routes()
    if routes is None:
        _log.warning(
            "%s: the cloud provider does not support routes; not starting", CONTROLLER_NAME
        )
        return None
    cidrs = parse_cluster_cidrs(options.cluster_cidr)
    return RouteController(context, routes, cidrs, options)


# -- pure helpers -----------------------------------------------------------------------------


def is_responsible_for_route(route: Route, cluster_cidrs: Sequence[IPNetwork]) -> bool:
    """``isResponsibleForRoute``: the route's first or last IP lies in a cluster CIDR; a route
    whose CIDR does not parse is ignored (False)."""
    try:
        net = ipaddress.ip_network(route.destination_cidr, strict=False)
    except ValueError:
        _log.error("ignoring route %s, unparsable CIDR %r", route.name, route.destination_cidr)
        return False
    first, last = net.network_address, net.broadcast_address
    return any(first in cidr or last in cidr for cidr in cluster_cidrs)


def _address_key(addr: NodeAddress | Mapping[str, Any]) -> tuple[str, str]:
    if isinstance(addr, NodeAddress):
        return (str(addr.type), addr.address)
    return (str(addr.get("type", "")), str(addr.get("address", "")))


def equal_node_addresses(
    a: Iterable[NodeAddress | Mapping[str, Any]], b: Iterable[NodeAddress | Mapping[str, Any]]
) -> bool:
    """``equalNodeAddrs``: same length and every entry of ``a`` found in ``b`` (unordered)."""
    left, right = [_address_key(x) for x in a], [_address_key(x) for x in b]
    return len(left) == len(right) and all(item in right for item in left)


def get_route_action(
    routes: Iterable[Route], cidr: str, node_addresses: Sequence[Mapping[str, Any]]
) -> RouteAction:
    """``getRouteAction``: keep a route with this CIDR unless it tracks addresses that changed
    (update); add when there is none."""
    for route in routes:
        if route.destination_cidr == cidr:
            if not route.enable_node_addresses or equal_node_addresses(
                node_addresses, route.target_node_addresses
            ):
                return RouteAction.KEEP
            _log.info(
                "node addresses changed from %s to %s", route.target_node_addresses, node_addresses
            )
            return RouteAction.UPDATE
    return RouteAction.ADD


def _pod_cidrs(node: Mapping[str, Any]) -> list[str]:
    return [str(c) for c in (node.get("spec") or {}).get("podCIDRs") or ()]


def _addresses(node: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {"type": str(a.get("type", "")), "address": str(a.get("address", ""))}
        for a in (node.get("status") or {}).get("addresses") or ()
    ]


def node_update_is_relevant(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Watch mode's update filter: podCIDRs or addresses changed, or a resync (same RV)."""
    old_rv = (old.get("metadata") or {}).get("resourceVersion")
    new_rv = (new.get("metadata") or {}).get("resourceVersion")
    if old_rv == new_rv:
        return True
    if _pod_cidrs(old) != _pod_cidrs(new):
        return True
    return _addresses(old) != _addresses(new)


# -- metrics ----------------------------------------------------------------------------------

_SYNC_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def _route_sync_total(registry: CollectorRegistry) -> Counter:
    """``route_controller_route_sync_total`` (one per registry)."""
    known = _SYNC_COUNTERS.get(registry)
    if known is not None:
        return known
    counter = Counter(
        "route_controller_route_sync",
        "A metric counting the amount of times routes have been synced with the cloud provider.",
        registry=registry,
    )
    _SYNC_COUNTERS[registry] = counter
    return counter


# -- the controller ---------------------------------------------------------------------------


@dataclass
class _NodeRoutes:
    """upstream ``routeNode``: a target node's existing routes and the action per pod CIDR.

    ``actions is None`` means the node has neither routes nor pod CIDRs.
    """

    routes: list[Route] = field(default_factory=list)
    actions: dict[str, RouteAction] | None = None


class RouteController(CloudController):
    """See the module docstring. ``reconcile`` may be called directly (tests do)."""

    def __init__(
        self,
        context: ControllerContext,
        routes: GatedRoutes,
        cluster_cidrs: Sequence[IPNetwork],
        options: RouteControllerOptions | None = None,
    ) -> None:
        if not cluster_cidrs:
            raise ValueError("RouteController: must specify clusterCIDR")
        super().__init__(context, CONTROLLER_NAME, CONTROLLER_ALIAS, _log)
        self.options = options or RouteControllerOptions()
        self.kube: KubeClient = context.kube
        self.routes = routes
        self.cluster_name = context.cluster_name
        self.cluster_cidrs = list(cluster_cidrs)
        self.recorder: EventRecorder = context.events.recorder(EVENT_COMPONENT)
        self.nodes: Informer = context.informers.informer(NODES)
        self.queue = self.work_queue(QUEUE_NAME, self._rate_limiter(), self._sync, workers=1)
        self.wait_for_caches(self.nodes)
        # the safety tick: upstream's default fixed cadence (NonSlidingUntil)
        self.every(self.safety_period, self._tick, sliding=False)
        self._semaphore = asyncio.Semaphore(max(1, self.options.max_concurrent_route_operations))
        self._sync_total = _route_sync_total(context.registry)
        self.nodes.add_event_handler(
            EventHandler(
                on_add=lambda _: self.enqueue(),
                on_update=self._on_update,
                on_delete=lambda _: self.enqueue(),
            )
        )

    def _rate_limiter(self) -> RateLimiter:
        interval = self.options.min_resync_interval
        if interval == MIN_ROUTE_RESYNC_INTERVAL:
            return route_controller_rate_limiter(clock=self.clock)
        return WithMaxWaitRateLimiter(
            BucketRateLimiter(1.0 / interval, 1, clock=self.clock), interval
        )

    # -- triggering ---------------------------------------------------------------------------

    def enqueue(self) -> None:
        """Ask for a reconcile, at most one per ``min_resync_interval`` (``AddRateLimited``)."""
        self.queue.add_rate_limited(QUEUE_KEY)

    def _on_update(self, old: Obj, new: Obj) -> None:
        if node_update_is_relevant(old, new):
            self.enqueue()

    @property
    def safety_period(self) -> float:
        period = self.options.safety_reconcile_period
        return self.options.route_reconciliation_period if period is None else period

    async def run(self) -> None:
        """Wait for the node cache, then run the queue worker and the safety tick."""
        _log.info("starting route controller")
        try:
            await super().run()
        finally:
            _log.info("shutting down route controller")

    async def _tick(self) -> None:
        # The safety tick bypasses the bucket: it is upstream's default fixed cadence, while
        # node events keep their own cap (upstream's watch-based mode).
        self.queue.add(QUEUE_KEY)

    async def _sync(self, key: str) -> None:
        self.queue.forget(key)  # upstream forgets before reconciling
        await self.reconcile_node_routes()

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile_node_routes(self) -> None:
        """``reconcileNodeRoutes``: list the cloud's routes (an error aborts) and reconcile
        them with the cached nodes."""
        self._sync_total.inc()
        try:
            routes = await self.routes.list_routes(self.cluster_name, priority=Priority.NORMAL)
        except Exception as err:
            raise RuntimeError(f"error listing routes: {err}") from err
        await self.reconcile(self.nodes.items(), list(routes))

    async def reconcile(self, nodes: Sequence[Mapping[str, Any]], routes: Sequence[Route]) -> None:
        """Upstream ``reconcile``; per-route failures are logged, never raised."""
        route_map = _index_routes(routes)
        _plan_actions(nodes, route_map)
        deletes = [
            asyncio.create_task(self._delete_route(route))
            for route in routes
            if is_responsible_for_route(route, self.cluster_cidrs)
            and (route.blackhole or _should_delete(route_map, route))
        ]
        if routes and routes[0].enable_node_addresses:
            await _gather(deletes)  # an update is a delete followed by a create
        creates = [
            asyncio.create_task(self._create_route(node, cidr, route_map))
            for node in nodes
            for cidr in _pod_cidrs(node)
            if _action(route_map, node, cidr) in (RouteAction.ADD, RouteAction.UPDATE)
        ]
        await _gather(deletes + creates)
        await _gather(
            [
                asyncio.create_task(self.update_networking_condition(node, created))
                for node, created in _condition_outcomes(nodes, route_map)
            ]
        )

    async def _delete_route(self, route: Route) -> None:
        start = self.clock.monotonic()
        async with self._semaphore:
            _log.info("deleting route %s %s", route.name, route.destination_cidr)
            try:
                await self.routes.delete_route(self.cluster_name, route, priority=Priority.NORMAL)
            except Exception as err:
                _log.error(
                    "could not delete route %s %s after %s: %s",
                    route.name,
                    route.destination_cidr,
                    self._since(start),
                    err,
                )
                return
        _log.info(
            "deleted route %s %s after %s", route.name, route.destination_cidr, self._since(start)
        )

    async def _create_route(
        self, node: Mapping[str, Any], cidr: str, route_map: dict[str, _NodeRoutes]
    ) -> None:
        name = node_name(node)
        name_hint = str((node.get("metadata") or {}).get("uid", ""))
        route = Route(
            target_node=name,
            destination_cidr=cidr,
            target_node_addresses=tuple(NodeAddress.from_dict(a) for a in _addresses(node)),
        )

        async def attempt() -> None:
            start = self.clock.monotonic()
            async with self._semaphore:
                try:
                    await self.routes.create_route(
                        self.cluster_name, name_hint, route, priority=Priority.NORMAL
                    )
                except Exception as err:
                    self._record_create_failure(name, name_hint, cidr, self._since(start), err)
                    raise
            actions = route_map[name].actions
            assert actions is not None
            actions[cidr] = RouteAction.KEEP
            _log.info(
                "created route for node %s %s with hint %s after %s",
                name,
                cidr,
                name_hint,
                self._since(start),
            )

        try:
            await retry_on_conflict(UPDATE_NETWORK_CONDITION_BACKOFF, attempt, clock=self.clock)
        except Exception as err:
            _log.error("could not create route %s %s for node %s: %s", name_hint, cidr, name, err)

    def _record_create_failure(
        self, node: str, name_hint: str, cidr: str, elapsed: str, err: BaseException
    ) -> None:
        message = (
            f"Could not create route {name_hint} {cidr} for node {node} after {elapsed}: {err}"
        )
        # v0.36.3's reference: apiVersion v1, kind Node, the Node's real UID (the name hint).
        ref = ObjectRef(kind="Node", name=node, uid=name_hint, api_version="v1")
        self.recorder.event(ref, EVENT_TYPE_WARNING, "FailedToCreateRoute", message)

    def _since(self, start: float) -> str:
        return format_duration(self.clock.monotonic() - start)

    async def update_networking_condition(
        self, node: Mapping[str, Any], routes_created: bool
    ) -> None:
        """``updateNetworkingCondition``: write NetworkUnavailable unless the node already has
        the wanted status *and* reason (so a CNI's own condition is overwritten)."""
        status, reason, message = (
            ("False", "RouteCreated", "RouteController created a route")
            if routes_created
            else ("True", "NoRouteCreated", "RouteController failed to create a route")
        )
        current = get_node_condition(node, CONDITION_NETWORK_UNAVAILABLE)
        if current and current.get("status") == status and current.get("reason") == reason:
            return
        name = node_name(node)
        condition = {
            "type": CONDITION_NETWORK_UNAVAILABLE,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_time(self.clock),
        }

        async def attempt() -> None:
            await set_node_condition(self.kube, name, condition, clock=self.clock)

        try:
            await retry_on_conflict(UPDATE_NETWORK_CONDITION_BACKOFF, attempt, clock=self.clock)
        except Exception as err:
            _log.error("error updating node %s: %s", name, err)


def _index_routes(routes: Iterable[Route]) -> dict[str, _NodeRoutes]:
    route_map: dict[str, _NodeRoutes] = {}
    for route in routes:
        if not route.target_node:
            continue
        entry = route_map.setdefault(route.target_node, _NodeRoutes(actions={}))
        entry.routes.append(route)
    return route_map


def _plan_actions(nodes: Iterable[Mapping[str, Any]], route_map: dict[str, _NodeRoutes]) -> None:
    for node in nodes:
        cidrs = _pod_cidrs(node)
        if not cidrs:
            continue
        name = node_name(node)
        entry = route_map.setdefault(name, _NodeRoutes())
        if entry.actions is None:
            entry.actions = {}
        for cidr in cidrs:
            action = get_route_action(entry.routes, cidr, _addresses(node))
            entry.actions[cidr] = action
            _log.info("action for node %r with CIDR %r: %r", name, cidr, str(action))


def _should_delete(route_map: Mapping[str, _NodeRoutes], route: Route) -> bool:
    entry = route_map.get(route.target_node)
    if entry is None or entry.actions is None:
        return True
    action = entry.actions.get(route.destination_cidr)
    return action is None or action in (RouteAction.REMOVE, RouteAction.UPDATE)


def _action(
    route_map: Mapping[str, _NodeRoutes], node: Mapping[str, Any], cidr: str
) -> RouteAction | None:
    entry = route_map.get(node_name(node))
    return None if entry is None or entry.actions is None else entry.actions.get(cidr)


def _condition_outcomes(
    nodes: Iterable[Mapping[str, Any]], route_map: Mapping[str, _NodeRoutes]
) -> list[tuple[Mapping[str, Any], bool]]:
    """Per node with an action map: all routes there (True) or not (False); an empty map (the
    node has routes in the cloud but no pod CIDRs) counts as not created."""
    outcomes: list[tuple[Mapping[str, Any], bool]] = []
    for node in nodes:
        entry = route_map.get(node_name(node))
        if entry is None or entry.actions is None:
            continue
        actions = entry.actions.values()
        created = bool(entry.actions) and all(
            a not in (RouteAction.ADD, RouteAction.UPDATE) for a in actions
        )
        outcomes.append((node, created))
    return outcomes


async def _gather(tasks: Sequence[asyncio.Task[None]]) -> None:
    if tasks:
        await asyncio.gather(*tasks)
