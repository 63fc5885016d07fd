"""Draining a Node's targets before they go (docs/behaviour.md, "Draining a Node's targets").

Upstream removes a Node from every balancer at the node sync that sees it leave the stable
node set: the ``node.kubernetes.io/exclude-from-external-load-balancers`` label, the cluster
autoscaler's ``ToBeDeletedByClusterAutoscaler`` taint, or a deletion (since KEP-3458 a
NotReady Node stays). A Service asking for a drain time (:mod:`kccm.cloudprovider.drain`)
gets two phases instead: for that time the Node is passed to the provider's
:class:`~kccm.cloudprovider.interface.TargetDrainer` as *draining* (no new connections,
established ones kept), then it is left out as upstream leaves it out.

:class:`NodeDrains` keeps, once for every Service, when each Node left the set (on the
clock seam, so tests run on fake time) and, per Service, which Nodes its balancer was last
given as draining. The service controller asks it for a Service's draining Nodes at every
ensure and node sync; the Node sync is queued again for the earliest deadline
(``wake``) rather than polled. No drain time (no annotation, flag 0), or a provider without
the capability, is upstream: the draining set is empty and the plain calls are made.

Restart: the drain state is kept in memory only. A Node found outside the set when it is
first seen (the informer's initial list after a restart, or a Node created excluded) counts
as leaving then: its window starts again, in full, so a drain is never cut short by a restart.
A provider never adds a draining Node its balancer does not target, so a Node removed before
the restart stays removed.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Gauge

from kccm.cloudprovider.drain import MAX_DRAIN_SECONDS, DrainTime, drain_time_of
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.cloudprovider.nodes import node_name
from kccm.cloudprovider.types import LoadBalancerStatus
from kccm.controllers.service_nodes import NodeSetSnapshot
from kccm.controllers.syncstate import SyncStates
from kccm.kube.interface import Obj
from kccm.util.clock import Clock

__all__ = ["DRAIN_RECORD", "PRUNE_EVERY", "Draining", "NodeDrains"]

DRAIN_RECORD = "service-lb-controller/drain"
"""The sync-state record (``kccm explain service``) naming a Service's draining Nodes."""

Node = Mapping[str, Any]
Draining = tuple[Node, ...]
PRUNE_EVERY = 1024
"""Node events between two prunings of departures older than any drain time (deleted Nodes'
names do not pile up)."""


class NodeDrains:
    """When each Node left the node set, and what each Service's balancer drains; see the
    module docstring."""

    def __init__(
        self,
        balancer: GatedLoadBalancer,
        clock: Clock,
        default_seconds: int,
        *,
        states: SyncStates | None = None,
        gauge: Gauge | None = None,
        wake: Callable[[float], None] = lambda delay: None,
    ) -> None:
        self.balancer = balancer
        self.clock = clock
        self.default_seconds = default_seconds
        self.states = states
        self.gauge = gauge
        self.wake = wake
        """Called with the seconds until the next drain deadline (queues a node sync)."""
        self.left: dict[str, tuple[Node, float]] = {}
        """Node name -> (its last object, the monotonic time it left the set)."""
        self.given: dict[str, frozenset[str]] = {}
        """Service key -> the Nodes its balancer was last given as draining."""
        self.asking: dict[str, int] = {}
        """Service key -> its drain time, for the Services asking for one."""
        self._events = 0

    @property
    def supported(self) -> bool:
        return self.balancer.can_drain_targets

    # -- node events --------------------------------------------------------------------------

    def observe(self, old: Node | None, new: Node | None, was_in: bool, is_in: bool) -> bool:
        """One node event, once the backend set applied it (``was_in``/``is_in``: whether the
        Node was in the set before and after). True when the set changed while a Service asks
        for a drain time: worth a node sync even where upstream waits (a taint, a deletion)."""
        name = node_name(new if new is not None else old or {})
        self._events += 1
        if self._events % PRUNE_EVERY == 0:
            self._prune()
        if is_in:
            self.left.pop(name, None)
        elif was_in or (old is None and new is not None):
            self.left[name] = (new if new is not None else old or {}, self.clock.monotonic())
        elif new is not None and name in self.left:
            self.left[name] = (new, self.left[name][1])
        return was_in != is_in and bool(self.asking)

    # -- per Service --------------------------------------------------------------------------

    def time_of(self, service: Obj, key: str) -> DrainTime:
        """The Service's drain time (raises for an invalid annotation); remembered for
        :meth:`observe`."""
        drain = drain_time_of(service, self.default_seconds)
        if drain.seconds > 0 and self.supported:
            self.asking[key] = drain.seconds
        else:
            self.asking.pop(key, None)
        return drain

    def draining(self, service: Obj, key: str, serving: NodeSetSnapshot) -> Draining:
        """The Nodes the Service's balancer keeps draining now, by name; queues a node sync
        for the earliest of their deadlines."""
        seconds = self.time_of(service, key).seconds
        if seconds <= 0 or not self.left or not self.supported:
            return ()
        now = self.clock.monotonic()
        ends = {
            name: (node, since + seconds)
            for name, (node, since) in self.left.items()
            if since + seconds > now and name not in serving.identities
        }
        if ends:
            self.wake(min(end for _, end in ends.values()) - now)
        return tuple(ends[name][0] for name in sorted(ends))

    def behind(self, service: Obj, key: str, serving: NodeSetSnapshot) -> bool:
        """Whether the Service's draining Nodes differ from what its balancer was given."""
        try:
            now = self.draining(service, key, serving)
        except Exception:  # an invalid annotation: its own sync reports it
            return False
        return _names(now) != self.given.get(key, frozenset())

    def give(self, key: str, draining: Draining) -> None:
        """The Service's balancer is being given ``draining``: remembered, shown in the
        metric and in ``kccm explain`` (until when each Node drains)."""
        names = _names(draining)
        if names == self.given.get(key, frozenset()):
            return
        if names:
            self.given[key] = names
        else:
            self.given.pop(key, None)
            self._prune()
        self._publish(key, names)

    def forget(self, key: str) -> None:
        self.asking.pop(key, None)
        if self.given.pop(key, None) is not None:
            self._publish(key, frozenset())
        self._prune()

    async def ensure(
        self, cluster_name: str, service: Obj, key: str, nodes: NodeSetSnapshot
    ) -> LoadBalancerStatus:
        """``ensure_load_balancer``, or its draining variant while Nodes drain."""
        draining = self.draining(service, key, nodes)
        self.give(key, draining)
        if not draining:
            return await self.balancer.ensure_load_balancer(
                cluster_name, service, nodes.nodes, priority=Priority.NORMAL
            )
        return await self.balancer.ensure_load_balancer_draining(
            cluster_name, service, nodes.nodes, draining, priority=Priority.NORMAL
        )

    # -- explain and the metric -----------------------------------------------------------------

    def until(self, key: str) -> dict[str, str]:
        """Node -> when its drain ends (ISO 8601, UTC), for the Service's draining Nodes."""
        seconds = self.asking.get(key, 0)
        now, wall = self.clock.monotonic(), self.clock.now()
        out: dict[str, str] = {}
        for name in sorted(self.given.get(key, ())):
            found = self.left.get(name)
            if found is not None:
                end = wall + datetime.timedelta(seconds=found[1] + seconds - now)
                out[name] = end.isoformat(timespec="seconds")
        return out

    def _publish(self, key: str, names: frozenset[str]) -> None:
        if self.gauge is not None:
            self.gauge.set(sum(len(given) for given in self.given.values()))
        if self.states is None:
            return
        if not names:
            self.states.forget("service", key, DRAIN_RECORD)
            return
        detail = {"drain_seconds": self.asking.get(key, 0), "draining_until": self.until(key)}
        self.states.record("service", key, DRAIN_RECORD, detail=detail)

    def _prune(self) -> None:
        """Forget departures older than the longest drain time there is."""
        now = self.clock.monotonic()
        for name in [n for n, (_, t) in self.left.items() if t + MAX_DRAIN_SECONDS <= now]:
            del self.left[name]


def _names(nodes: Draining) -> frozenset[str]:
    return frozenset(node_name(node) for node in nodes)
