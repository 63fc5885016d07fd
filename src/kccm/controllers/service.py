"""``service-lb-controller``: cloud load balancers for ``type: LoadBalancer`` Services.

A port of upstream ``k8s.io/cloud-provider/controllers/service``:

- Services of ``type: LoadBalancer`` without ``spec.loadBalancerClass`` get a load balancer
  through the provider's ``ensure_load_balancer``; the finalizer
  ``service.kubernetes.io/load-balancer-cleanup`` is added *before* the cloud call and removed
  only after ``ensure_load_balancer_deleted`` succeeded, both as strategic-merge patches of
  the ``status`` subresource (upstream ``PatchService``);
- ``status.loadBalancer`` is written with what the provider returned, only when the ingress
  differs, and cleared on delete;
- node changes that alter a service's eligible node set (not deleting, not excluded by
  label, not tainted ``ToBeDeletedByClusterAutoscaler``; kccm: and chosen by its
  ``service.kccm.io/target-node-selector``, :mod:`.service_selection`) call
  ``update_load_balancer`` for that service only; a failed host update escalates to a full
  sync of the service;
- node events are coalesced: every event marks the one node-sync key, so a burst costs one
  pass; the eligible node set is maintained event by event (:class:`BackendNodeSet`) and a
  pass compares each service's last synced set in O(1) when nothing changed. Only services
  whose load balancer this process has ensured are updated (upstream's service cache), and
  never while a service worker is syncing them: a sync that finishes with a stale node set
  triggers a node sync of its own;
- every sync of a service that wants a load balancer calls ``ensure_load_balancer``, the
  first one after a start included (upstream: every Service is added to the queue when the
  informer starts, and ``syncService`` ensures it): the start-up ensure repairs whatever
  changed in the cloud while kccm was not running. The economy lies in the providers, whose
  ensure reads the balancer and writes only the difference (a restart with unchanged
  balancers makes reads only);
- ``--load-balancer-class`` adds classes to serve, ``--load-balancer-class-only`` drops the
  class-less Services; a class switch releases and ensures (docs/behaviour.md);
- kccm keeps nothing of its own on Services. The annotation
  ``service.kccm.io/load-balancer-spec-hash`` an earlier kccm wrote is removed by the next
  patch kccm sends that Service anyway (finalizer or status), never by a write of its own;
- per-service retries back off 5 s → 300 s; a ``RetryError`` (or an error raised from one)
  retries after exactly its delay.

Events come from component ``service-controller``; the workqueues are named ``service``
and ``node``. Every cloud call goes through the gate with :attr:`Priority.NORMAL`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.cloudprovider.lbclasses import served_load_balancer_classes
from kccm.cloudprovider.types import LoadBalancerStatus
from kccm.controllers.base import CloudController, ControllerContext
from kccm.controllers.service_drain import NodeDrains
from kccm.controllers.service_endpointslices import EndpointSliceIndex
from kccm.controllers.service_hosts import BalancerTurns, service_ref, update_hosts
from kccm.controllers.service_marks import ServiceMarks
from kccm.controllers.service_metrics import ServiceControllerMetrics
from kccm.controllers.service_nodes import BackendNodeSet, NodeSetSnapshot, should_sync_updated_node
from kccm.controllers.service_patches import LEGACY_ANNOTATIONS, ServiceSyncError, ServiceWrites
from kccm.controllers.service_predicates import (
    LoadBalancerClasses,
    lost_finalizer,
    may_hold_released_balancer,
    needs_cleanup,
    needs_update,
    service_key,
    wants_load_balancer,
)
from kccm.controllers.service_selection import TargetNodes
from kccm.controllers.service_sharing import SharingBalancer
from kccm.controllers.service_state import ServiceSyncRecorder
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import NODES, SERVICES
from kccm.runtime.events import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder
from kccm.runtime.informers import EventHandler, Informer, copy_obj, object_key
from kccm.runtime.ratelimiters import service_controller_rate_limiter

__all__ = [
    "CONTROLLER_NAME",
    "DEFAULT_CONCURRENT_SERVICE_SYNCS",
    "EVENT_COMPONENT",
    "METRICS_NAME",
    "SERVICE_SYNC_PERIOD",
    "LoadBalancerOperation",
    "ServiceController",
    "ServiceControllerMetrics",
    "ServiceControllerOptions",
    "ServiceSyncError",
    "build",
]

CONTROLLER_NAME = "service-lb-controller"
METRICS_NAME = "service"
"""Legacy short name: ``running_managed_controllers{name="service"}``."""
EVENT_COMPONENT = "service-controller"
SERVICE_QUEUE = "service"
NODE_QUEUE = "node"
NODE_SYNC_KEY = "nodes"  # the node queue's one key: a burst of node events is one node sync
YIELD_EVERY = 256  # loops over services give the event loop a turn this often
SERVICE_SYNC_PERIOD = 30.0
"""Upstream ``serviceSyncPeriod``: how often services needing cleanup are re-enqueued."""
WORKER_RESTART_PERIOD = 1.0

DEFAULT_CONCURRENT_SERVICE_SYNCS = 10
"""Upstream defaults ``--concurrent-service-syncs`` to 1: after a restart or a leader failover
every LoadBalancer Service is re-ensured one at a time, which takes tens of minutes in a
large cluster. Ten syncs in flight shorten that tenfold; the number of cloud calls is the
same, and their rate is bounded by the call gate's load-balancer budget, not by this value."""

_log = logging.getLogger(__name__)


class LoadBalancerOperation(enum.Enum):
    DELETE = "delete"
    ENSURE = "ensure"


@dataclass
class ServiceControllerOptions:
    """Options of ``service-lb-controller``, each the flag of its name (``_`` as ``-``;
    ``load_balancer_classes`` is the repeatable ``--load-balancer-class``)."""

    concurrent_service_syncs: int = DEFAULT_CONCURRENT_SERVICE_SYNCS
    load_balancer_classes: list[str] = field(default_factory=list)
    load_balancer_class_only: bool = False
    default_retain_address: bool = False
    default_drain_seconds: int = 0

    def classes(self) -> LoadBalancerClasses:
        return LoadBalancerClasses.of(self.load_balancer_classes, self.load_balancer_class_only)


class ServiceController(CloudController):
    """The service load-balancer controller; see the module docstring."""

    def __init__(
        self,
        context: ControllerContext,
        balancer: GatedLoadBalancer,
        options: ServiceControllerOptions,
    ) -> None:
        super().__init__(context, CONTROLLER_NAME, METRICS_NAME, _log)
        self.options = options
        self.kube: KubeClient = context.kube
        self.services: Informer = context.informers.informer(SERVICES)
        self.nodes: Informer = context.informers.informer(NODES)
        self.recorder: EventRecorder = context.events.recorder(EVENT_COMPONENT)
        self.balancer = SharingBalancer.of(balancer, self.recorder, context.cloud, options)
        self.cluster_name = context.cluster_name
        self.workers = options.concurrent_service_syncs
        self.classes = options.classes().serving(served_load_balancer_classes(balancer.impl))
        self._releasing: set[str] = set()
        """Keys whose balancer this process deleted and whose finalizer is still to go."""
        self.metrics = ServiceControllerMetrics.on(context.registry)
        self.sync_states = ServiceSyncRecorder(
            context.states,
            CONTROLLER_NAME,
            self.services,
            self.nodes,
            balancer.impl,
            self._wants,
        )
        self.service_queue = self.work_queue(
            SERVICE_QUEUE,
            service_controller_rate_limiter(),
            self.sync_service,
            workers=self.workers,
            loop_name=SERVICE_QUEUE,
            on_outcome=self.sync_states.outcome,
        )
        self.node_queue = self.work_queue(
            NODE_QUEUE,
            service_controller_rate_limiter(),
            self._process_node_key,
            workers=1,
            loop_name=NODE_QUEUE,
        )
        self._service_loop, self._node_loop = self._loops
        self.balancer.watch(self.services.items, self.service_queue.add)  # share groups
        self.wait_for_caches(self.services, self.nodes)
        self.endpoint_slices = EndpointSliceIndex.serving(  # only for a provider that asks
            context.informers, balancer.impl, self.services, self._wants, self.service_queue.add
        )
        if self.endpoint_slices is not None:
            self.wait_for_caches(self.endpoint_slices.informer)
        self.every(SERVICE_SYNC_PERIOD, self._resync_services)
        self.cache: dict[str, Obj] = {}
        """Upstream ``serviceCache``: the last state synced, per key (deletion needs it)."""
        self.backends = BackendNodeSet()
        """The eligible nodes, maintained from node events."""
        self.targets = TargetNodes(self.backends, self.kube, self.recorder)
        self.last_synced: dict[str, NodeSetSnapshot] = {}
        """Upstream ``lastSyncedNodes``: the node set each service was last given."""
        self.ensured: set[str] = set()
        """Services whose load balancer this process has ensured: the only ones node syncs
        update."""
        self._turns = BalancerTurns()
        self.drains = NodeDrains(
            self.balancer,
            self.clock,
            options.default_drain_seconds,
            states=context.states,
            gauge=self.metrics.draining_targets,
            wake=lambda delay: self.node_queue.add_after(NODE_SYNC_KEY, delay),
        )
        writes = ServiceWrites(self.kube, ServiceMarks.of(balancer.impl))  # kccm: marks
        self._add_finalizer, self._remove_finalizer = writes.add_finalizer, writes.remove_finalizer
        self._patch_status, self._set_labels = writes.patch_status, writes.set_labels
        self._finalizer_of = writes.marks.finalizer
        self._needs_cleanup = partial(needs_cleanup, finalizer_of=self._finalizer_of)
        self.node_syncs = 0
        """Node-sync passes run (one per burst of node events)."""
        self.services.add_event_handler(
            EventHandler(on_add=self._on_service_add, on_update=self._on_service_update)
        )
        self.nodes.add_event_handler(
            EventHandler(
                on_add=self._on_node_add,
                on_update=self._on_node_update,
                on_delete=self._on_node_delete,
            )
        )

    # -- informer handlers (upstream New) ------------------------------------------------------

    def _on_service_add(self, service: Obj) -> None:
        if self._wants(service) or self._needs_cleanup(service) or self._may_hold(service):
            self.service_queue.add(object_key(service))

    def _on_service_update(self, old: Obj, new: Obj) -> None:
        if (
            needs_update(old, new, ignored_annotations=LEGACY_ANNOTATIONS, classes=self.classes)
            or self._needs_cleanup(new)
            or lost_finalizer(old, new, self.classes, self._finalizer_of)
        ):
            self.service_queue.add(object_key(new))

    def _wants(self, service: Obj) -> bool:
        return wants_load_balancer(service, self.classes)

    def _may_hold(self, service: Obj) -> bool:
        return may_hold_released_balancer(service, self.classes, self._finalizer_of)

    def _on_node_add(self, node: Obj) -> None:
        self._apply(None, node)
        self.node_queue.add(NODE_SYNC_KEY)

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        drain = self._apply(old, new)  # kccm: a taint or a deletion starts a drain
        relabel = self.targets.relabel_matters(old, new)
        if drain or relabel or should_sync_updated_node(old, new):
            self.node_queue.add(NODE_SYNC_KEY)

    def _on_node_delete(self, node: Obj) -> None:
        self._apply(node, None)
        self.node_queue.add(NODE_SYNC_KEY)

    def _apply(self, old: Obj | None, new: Obj | None) -> bool:
        """The backend set and the drains learn a node event; True when a drain needs a node
        sync upstream would not make."""
        name = (new if new is not None else old or {}).get("metadata", {}).get("name")
        was_in = name in self.backends
        self.backends.apply(old, new)
        return self.drains.observe(old, new, was_in, name in self.backends)

    async def _resync_services(self) -> None:
        """The 30 s resync of the service handler: update(x, x) only enqueues services that
        need cleanup."""
        for i, service in enumerate(self.services.items()):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if self._needs_cleanup(service):
                self.service_queue.add(object_key(service))

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Wait for the service and node caches, then run ``workers`` service workers, one
        node worker and the 30 s resync until stopped or cancelled."""
        _log.info("Starting service controller")
        try:
            await super().run()
        finally:
            self.service_queue.shutdown()
            self.node_queue.shutdown()
            _log.info("Shutting down service controller")

    # -- service sync (upstream syncService and friends) --------------------------------------

    async def sync_service(self, key: str) -> None:
        """Upstream ``syncService``: the informer cache says what the service is now.

        Node syncs leave the service alone meanwhile (one updating its balancer finishes
        first); if the node set changed while it was being ensured, a node sync follows."""
        try:
            await self._turns.sync(key)
            service = self.services.get(key)
            if service is None:
                await self.process_service_deletion(key)
                return
            await self.process_service_create_or_update(copy_obj(service), key)
        finally:
            self._turns.synced(key)
            if key in self.ensured and self.targets.behind(self.last_synced.get(key)):
                self.node_queue.add(NODE_SYNC_KEY)

    async def process_service_deletion(self, key: str) -> None:
        """The service is gone: delete its load balancer if the cache remembers one."""
        cached = self.cache.get(key)
        if cached is None:
            return
        _log.info("Service %s has been deleted. Attempting to cleanup load balancer", key)
        await self._process_load_balancer_delete(cached)
        self._forget(key)

    async def _process_load_balancer_delete(self, service: Obj) -> None:
        if not self._wants(service):
            return
        self._event(service, EVENT_TYPE_NORMAL, "DeletingLoadBalancer", "Deleting load balancer")
        try:
            await self.balancer.ensure_load_balancer_deleted(
                self.cluster_name, service, priority=Priority.NORMAL
            )
        except Exception as err:
            message = f"Error deleting load balancer: {err}"
            self._event(service, EVENT_TYPE_WARNING, "DeleteLoadBalancerFailed", message)
            raise
        self._event(service, EVENT_TYPE_NORMAL, "DeletedLoadBalancer", "Deleted load balancer")

    async def process_service_create_or_update(self, service: Obj, key: str) -> None:
        """Upstream ``processServiceCreateOrUpdate``."""
        cached = self.cache.get(key)
        if cached is not None and _uid(cached) != _uid(service):
            # Deleted and re-created (without a finalizer) faster than we noticed.
            self.ensured.discard(key)
            await self._process_load_balancer_delete(cached)
        self.cache[key] = service
        try:
            op = await self.sync_load_balancer_if_needed(service, key)
        except Exception as err:
            message = f"Error syncing load balancer: {err}"
            self._event(service, EVENT_TYPE_WARNING, "SyncLoadBalancerFailed", message)
            # the balancer's state is unknown: node syncs leave it alone until a retry ensures
            self.ensured.discard(key)
            raise
        if op is LoadBalancerOperation.DELETE:
            self._forget(key)

    def _forget(self, key: str) -> None:
        self.cache.pop(key, None)
        self.targets.forget(key)
        self.drains.forget(key)
        self.last_synced.pop(key, None)
        self.ensured.discard(key)

    async def sync_load_balancer_if_needed(self, service: Obj, key: str) -> LoadBalancerOperation:
        """Upstream ``syncLoadBalancerIfNeeded``: delete or ensure, then patch the status."""
        previous = dict((service.get("status") or {}).get("loadBalancer") or {})
        if not self._wants(service) or self._needs_cleanup(service):
            if await self._delete_load_balancer(service, key):
                await self._patch_status(service, previous, LoadBalancerStatus())
            return LoadBalancerOperation.DELETE
        try:  # kccm: the target-node selector (service_selection)
            nodes = self.targets.for_ensure(service, key)
        except Exception as err:
            raise ServiceSyncError(f"failed to choose the load balancer's nodes: {err}") from err
        status = await self._ensure_branch(service, key, nodes)
        if status is None:  # implemented elsewhere: not ours to update
            self.ensured.discard(key)
            return LoadBalancerOperation.ENSURE
        self.ensured.add(key)
        await self._set_labels(service)
        await self._patch_status(service, previous, status)
        return LoadBalancerOperation.ENSURE

    async def _delete_load_balancer(self, service: Obj, key: str) -> bool:
        """Upstream's delete branch; whether the status is ours to clear (:meth:`_was_ours`)."""
        try:
            _, exists = await self.balancer.get_load_balancer(
                self.cluster_name, service, priority=Priority.NORMAL
            )
        except Exception as err:
            raise ServiceSyncError(
                f"failed to check if load balancer exists before cleanup: {err}"
            ) from err
        if exists:
            _log.info("Deleting existing load balancer for service %s", key)
            self._event(
                service, EVENT_TYPE_NORMAL, "DeletingLoadBalancer", "Deleting load balancer"
            )
            await self._ensure_deleted_ignoring_elsewhere(service, key)
            self._releasing.add(key)
        ours = self._was_ours(service, key)
        try:
            if ours:
                await self._remove_finalizer(service)
        except Exception as err:
            raise ServiceSyncError(
                f"failed to remove load balancer cleanup finalizer: {err}"
            ) from err
        self._releasing.discard(key)
        self._event(service, EVENT_TYPE_NORMAL, "DeletedLoadBalancer", "Deleted load balancer")
        return ours and self.classes.keeps_status(service)

    def _was_ours(self, service: Obj, key: str) -> bool:
        """kccm: the shared finalizer is ours to remove if we serve the class or just deleted
        our balancer for the Service; the status is not, once another class owns the Service
        (docs/behaviour.md, "Serving a load-balancer class")."""
        return key in self._releasing or self.classes.serves_class(service)

    async def _ensure_deleted_ignoring_elsewhere(self, service: Obj, key: str) -> None:
        try:
            await self.balancer.ensure_load_balancer_deleted(
                self.cluster_name, service, priority=Priority.NORMAL
            )
        except ImplementedElsewhere:
            _log.debug("LoadBalancer for service %s implemented elsewhere; ignoring", key)
        except Exception as err:
            raise ServiceSyncError(f"failed to delete load balancer: {err}") from err

    async def _ensure_branch(
        self, service: Obj, key: str, nodes: NodeSetSnapshot
    ) -> LoadBalancerStatus | None:
        """Finalizer first, then the cloud; None when the LB is implemented elsewhere."""
        _log.info("Ensuring load balancer for service %s", key)
        self._event(service, EVENT_TYPE_NORMAL, "EnsuringLoadBalancer", "Ensuring load balancer")
        try:
            await self._add_finalizer(service)
        except Exception as err:
            raise ServiceSyncError(f"failed to add load balancer cleanup finalizer: {err}") from err
        try:
            status: LoadBalancerStatus | None = await self._ensure_load_balancer(
                service, key, nodes
            )
        except ImplementedElsewhere:
            _log.debug("LoadBalancer for service %s implemented elsewhere; ignoring", key)
            return None
        except Exception as err:
            raise ServiceSyncError(f"failed to ensure load balancer: {err}") from err
        if status is None:
            raise ServiceSyncError("service status returned by EnsureLoadBalancer is nil")
        self._event(service, EVENT_TYPE_NORMAL, "EnsuredLoadBalancer", "Ensured load balancer")
        return status

    async def _ensure_load_balancer(
        self, service: Obj, key: str, nodes: NodeSetSnapshot
    ) -> LoadBalancerStatus:
        if not nodes.nodes:
            no_nodes = "There are no available nodes for LoadBalancer"
            self._event(service, EVENT_TYPE_WARNING, "UnAvailableLoadBalancer", no_nodes)
        self.last_synced[key] = nodes
        status = await self.drains.ensure(self.cluster_name, service, key, nodes)
        await self.targets.given(service, nodes)
        return status

    # -- node sync (upstream syncNodes and friends) -------------------------------------------

    async def _process_node_key(self, key: str) -> None:
        """One node sync (for a whole burst of node events): failures go to the service queue
        as plain adds (a full ensure). Never raises, so the node queue never retries."""
        for service_to_retry in await self.sync_nodes():
            self.service_queue.add(service_to_retry)

    async def sync_nodes(self) -> set[str]:
        """Upstream ``syncNodes`` over the services this process ensured: returns the keys
        of the services to retry."""
        start = self.clock.monotonic()
        self.node_syncs += 1
        try:
            if not self.ensured:  # no balancer to update: no node set to build
                return set()
            nodes = self.backends.snapshot()
            stale = await self._services_behind(nodes)
            return await self.update_load_balancer_hosts(stale, self.workers, nodes)
        finally:
            self.metrics.nodesync_latency.observe(self.clock.monotonic() - start)

    async def _services_behind(self, nodes: NodeSetSnapshot) -> list[Obj]:
        """The ensured services whose last synced node set differs from ``nodes``; those
        whose set is equal are brought to the new version without a cloud call."""
        stale: list[Obj] = []
        for i, key in enumerate(list(self.ensured)):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            service = self.cache.get(key)
            if service is None or key in self._turns.syncing or not self._wants(service):
                continue
            mine = self.targets.for_node_sync(service, nodes)
            if mine is not None and mine.same_backends(self.last_synced.get(key)):
                self.last_synced[key] = mine
                if not self.drains.behind(service, key, mine):
                    continue
            stale.append(service)
        return stale

    async def update_load_balancer_hosts(
        self, services: Sequence[Obj], workers: int, nodes: NodeSetSnapshot | None = None
    ) -> set[str]:
        """``node_sync_service`` for each service, ``workers`` at a time."""
        nodes = nodes or self.backends.snapshot()
        retry: set[str] = set()
        limit = asyncio.Semaphore(max(1, workers))

        async def one(service: Obj) -> None:
            async with limit:
                if await self.node_sync_service(service, nodes):
                    retry.add(service_key(service))

        await asyncio.gather(*(one(service) for service in services))
        return retry

    async def node_sync_service(self, service: Obj, nodes: NodeSetSnapshot) -> bool:
        """Upstream ``nodeSyncService``: True when the service must be retried."""
        key = service_key(service)
        mine = self.targets.for_node_sync(service, nodes)
        if mine is None or not self._wants(service) or key in self._turns.syncing:
            return False  # kccm: a running service sync triggers a node sync, if need be
        nodes = mine
        # Stored before the update: a failure goes to the service queue for a full ensure.
        previous = self.last_synced.get(key)
        self.last_synced[key] = nodes
        try:
            draining = self.drains.draining(service, key, nodes)
            if nodes.same_backends(previous) and not self.drains.behind(service, key, nodes):
                return False
            self.drains.give(key, draining)
            with self._turns.updating(key):
                await self.locked_update_load_balancer_hosts(service, nodes.nodes, draining)
            await self.targets.given(service, nodes)
        except Exception as err:
            _log.error("failed to update load balancer hosts for service %s: %s", key, err)
            self.metrics.nodesync_error.inc()
            return True
        return False

    async def locked_update_load_balancer_hosts(
        self,
        service: Obj,
        hosts: Sequence[Mapping[str, Any]],
        draining: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Upstream ``lockedUpdateLoadBalancerHosts``: update_load_balancer and its events."""
        start = self.clock.monotonic()
        self.metrics.loadbalancer_sync.inc()
        try:
            await update_hosts(
                self.balancer, self.cluster_name, self.recorder, service, hosts, draining
            )
        finally:
            self.metrics.update_host_latency.observe(self.clock.monotonic() - start)

    def _event(self, service: Obj, event_type: str, reason: str, message: str) -> None:
        self.recorder.event(service_ref(service), event_type, reason, message)


def _uid(service: Mapping[str, Any]) -> str:
    return str((service.get("metadata") or {}).get("uid", ""))


def build(
    context: ControllerContext, options: ServiceControllerOptions | None = None
) -> ServiceController | None:
    """The controller, or None (with a warning) when the provider has no load balancers:
    upstream then skips ``service-lb-controller`` instead of failing."""
    options = options or ServiceControllerOptions()
    balancer = context.cloud.load_balancer()
    if balancer is None:
        _log.warning(
            "%s: the cloud provider does not support external load balancers; skipping",
            CONTROLLER_NAME,
        )
        return None
    return ServiceController(context, balancer, options)
