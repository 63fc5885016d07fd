"""A load balancer's hosts after a node change (upstream ``lockedUpdateLoadBalancerHosts``'s
cloud call and its events), and the turns the node sync and the service sync take on one
balancer (:class:`BalancerTurns`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.controllers.service_nodes import loggable_node_names
from kccm.controllers.service_predicates import service_key
from kccm.kube.interface import Obj
from kccm.runtime.events import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder, ObjectRef

__all__ = ["BalancerTurns", "service_ref", "update_hosts"]

_log = logging.getLogger("kccm.controllers.service")


class BalancerTurns:
    """One writer at a time per Service's balancer: its service sync or a node sync's update.

    kccm: upstream's service workers and node sync run side by side, so a node sync's
    ``UpdateLoadBalancer`` may still be writing when the Service's deletion has removed the
    balancer; a provider whose update ensures (aws's NLB branch) then makes again what the
    deletion removed (a target group, a listener), and nothing deletes it any more. Here a
    node sync leaves a Service whose sync runs alone (:attr:`syncing`; the sync triggers a node
    sync after it when the nodes changed meanwhile), and a service sync waits for the update
    a node sync is making of its balancer."""

    def __init__(self) -> None:
        self.syncing: set[str] = set()
        """The Services whose sync runs (or waits for its turn)."""
        self._updating: dict[str, asyncio.Event] = {}

    async def sync(self, key: str) -> None:
        """The service sync of ``key`` starts: no node sync starts an update of its balancer
        from now on (until :meth:`synced`), and the one under way is awaited."""
        self.syncing.add(key)
        while (updating := self._updating.get(key)) is not None:
            await updating.wait()

    def synced(self, key: str) -> None:
        self.syncing.discard(key)

    @contextlib.contextmanager
    def updating(self, key: str) -> Iterator[None]:
        """A node sync updates the balancer of ``key`` (never while its sync runs)."""
        done = self._updating[key] = asyncio.Event()
        try:
            yield
        finally:
            del self._updating[key]
            done.set()


def service_ref(service: Mapping[str, Any]) -> ObjectRef:
    """The Event's involvedObject. Listed objects carry no kind/apiVersion, so they are set
    here, as client-go's reference.GetReference fills them from the scheme."""
    return replace(ObjectRef.of(service), kind="Service", api_version="v1")


async def update_hosts(
    balancer: GatedLoadBalancer,
    cluster_name: str,
    recorder: EventRecorder,
    service: Obj,
    hosts: Sequence[Mapping[str, Any]],
    draining: Sequence[Mapping[str, Any]] = (),
) -> None:
    """``update_load_balancer`` with upstream's events; raises when the update failed and the
    load balancer still exists. With ``draining`` Nodes (kccm, :mod:`.service_drain`), its
    draining variant."""
    try:
        if draining:
            await balancer.update_load_balancer_draining(
                cluster_name, service, hosts, draining, priority=Priority.NORMAL
            )
        else:
            await balancer.update_load_balancer(
                cluster_name, service, hosts, priority=Priority.NORMAL
            )
    except ImplementedElsewhere:
        return
    except Exception as err:
        if not await _still_exists(balancer, cluster_name, service):
            return
        names = " ".join(loggable_node_names(hosts))
        message = (
            f"Error updating load balancer with new hosts [{names}] [node names limited, "
            f"total number of nodes: {len(hosts)}], error: {err}"
        )
        recorder.event(
            service_ref(service), EVENT_TYPE_WARNING, "UpdateLoadBalancerFailed", message
        )
        raise
    if hosts:
        reason, kind, message = (
            "UpdatedLoadBalancer",
            EVENT_TYPE_NORMAL,
            "Updated load balancer with new hosts",
        )
    else:
        reason, kind, message = (
            "UnAvailableLoadBalancer",
            EVENT_TYPE_WARNING,
            "There are no available nodes for LoadBalancer",
        )
    recorder.event(service_ref(service), kind, reason, message)


async def _still_exists(balancer: GatedLoadBalancer, cluster_name: str, service: Obj) -> bool:
    """After a failed update: only an existing LB makes it a failure. A failed check is
    logged and counts as a failure, as upstream."""
    try:
        _, exists = await balancer.get_load_balancer(
            cluster_name, service, priority=Priority.NORMAL
        )
    except Exception as err:
        _log.error(
            "failed to check if load balancer exists for service %s: %s", service_key(service), err
        )
        return True
    return exists
