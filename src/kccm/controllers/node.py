"""``cloud-node-controller``: initialise Nodes registered by a kubelet run with
``--cloud-provider=external`` (upstream ``controllers/node/node_controller.go``).

What it mirrors (spec §2):

- every Node add/update event enqueues the node name on the ``Nodes`` queue (default controller
  rate limiter); ``sync_node`` initialises a node only while it carries the
  ``node.cloudprovider.kubernetes.io/uninitialized`` taint, otherwise it reconciles the GA
  topology/instance-type labels from their beta twins;
- initialisation reads the instance metadata (InstancesV2 first, legacy Instances + Zones as
  fallback, with upstream's error messages), validates the provided-node-ip annotation, sets
  providerID (only if empty), instance-type/zone/region labels (GA and beta), the provider's
  additional labels (never ``kubernetes.io``/``k8s.io`` ones, never overwriting), and removes
  every uninitialized taint, all in one write conditional on the resourceVersion, retried on
  conflict (20 steps of 50 ms, jittered); then it patches ``status.addresses`` at once and emits
  ``Normal Synced "Node synced successfully"``;
- at start and every ``node-status-update-frequency`` (5 min, sliding) the addresses of every
  initialised node are refreshed by ``concurrent-node-status-updates`` parallel workers;
  nothing else is touched. A provider implementing ``list_instance_metadata`` answers each
  tick for all of them in one call (kccm, docs/behaviour.md: the same freshness for one
  request instead of one per node). Opt-in: ``node-metadata-refresh-period`` > 0 reads a node
  at most once per period, the reads spread evenly over it (fewer calls for providers without
  a list call, staler addresses).

Cloud calls made for initialisation use ``Priority.INITIALIZE``; the periodic refresh uses
``Priority.PERIODIC``.
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from kccm.api.wellknown import (
    ANNOTATION_PROVIDED_NODE_IP,
    LABEL_INSTANCE_TYPE,
    LABEL_INSTANCE_TYPE_BETA,
    LABEL_REGION,
    LABEL_REGION_BETA,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
    TAINT_UNINITIALIZED,
)
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.metadata import instance_metadata
from kccm.cloudprovider.nodes import node_provider_id
from kccm.cloudprovider.types import InstanceMetadata
from kccm.controllers.base import CloudController, ControllerContext
from kccm.controllers.node_state import NodeInitRecorder
from kccm.controllers.nodestatus import NodeStatusRefresher, address_dicts, update_node_address
from kccm.controllers.nodeutil import (
    Backoff,
    NodeIPError,
    add_or_update_labels_on_node,
    get_node_addresses_from_node_ip,
    has_cloud_taint,
    retry_on_conflict,
)
from kccm.controllers.nodeutil import (
    node_name as _name,
)
from kccm.kube.errors import Conflict
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import NODES
from kccm.runtime.events import EVENT_TYPE_NORMAL, EventRecorder, ObjectRef
from kccm.runtime.informers import EventHandler, Informer, copy_obj
from kccm.runtime.ratelimiters import node_controller_rate_limiter
from kccm.util.clock import Clock

__all__ = [
    "CONTROLLER_NAME",
    "DEFAULT_CONCURRENT_NODE_SYNCS",
    "DEFAULT_NODE_METADATA_REFRESH_PERIOD",
    "EVENT_COMPONENT",
    "QUEUE_NAME",
    "SHORT_NAME",
    "UPDATE_NODE_SPEC_BACKOFF",
    "CloudNodeController",
    "NodeControllerOptions",
    "NodeMetrics",
    "build",
    "is_kubernetes_label",
]

CONTROLLER_NAME = "cloud-node-controller"
SHORT_NAME = "cloud-node"
EVENT_COMPONENT = "cloud-node-controller"
QUEUE_NAME = "Nodes"

DEFAULT_CONCURRENT_NODE_SYNCS = 32
"""kccm's default for ``--concurrent-node-syncs`` (upstream: 1, which serialises initialisation
of a large cluster). Workers are cheap tasks; the call gate's budget protects the cloud."""

DEFAULT_NODE_METADATA_REFRESH_PERIOD = 0.0
"""The default of ``--node-metadata-refresh-period``: 0, every initialised node is refreshed at
every status tick, as upstream."""

UPDATE_NODE_SPEC_BACKOFF = Backoff(steps=20, duration=0.05, jitter=1.0)

_KUBERNETES_LABEL = re.compile(r"(^|\.)(kubernetes|k8s)\.io/")

# (primary = beta, source of truth) -> (secondary = GA)
_LABEL_RECONCILE = (
    (LABEL_ZONE_BETA, LABEL_ZONE),
    (LABEL_REGION_BETA, LABEL_REGION),
    (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE),
)

_log = logging.getLogger(__name__)

NodeModifier = Callable[[Obj], None]


@dataclass
class NodeControllerOptions:
    """Flags of the cloud node controller (upstream names; kccm's sync default, see above)."""

    concurrent_node_syncs: int = DEFAULT_CONCURRENT_NODE_SYNCS
    concurrent_node_status_updates: int = 0
    """0 means "same as concurrent_node_syncs" (upstream ``NodeControllerOptions.ApplyTo``)."""
    node_status_update_frequency: float = 300.0
    node_metadata_refresh_period: float = DEFAULT_NODE_METADATA_REFRESH_PERIOD
    """kccm, opt-in: the least time between two periodic cloud metadata reads of one node;
    0 (default) reads every node at every status tick (upstream)."""

    @property
    def status_update_workers(self) -> int:
        if self.concurrent_node_status_updates > 0:
            return self.concurrent_node_status_updates
        return self.concurrent_node_syncs


# -- metrics ----------------------------------------------------------------------------------

_BUCKETS = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)  # ExponentialBuckets(1, 4, 6)


@dataclass(frozen=True)
class NodeMetrics:
    taint_removal_delay: Histogram
    initial_node_sync_delay: Histogram


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, NodeMetrics] = weakref.WeakKeyDictionary()


def node_metrics(registry: CollectorRegistry) -> NodeMetrics:
    """The node controller's two histograms on ``registry`` (registered once)."""
    metrics = _METRICS.get(registry)
    if metrics is None:
        metrics = NodeMetrics(
            Histogram(
                "node_controller_cloud_provider_taint_removal_delay_seconds",
                "Number of seconds after node creation when NodeController removed the cloud-"
                "provider taint of a single node.",
                buckets=_BUCKETS,
                registry=registry,
            ),
            Histogram(
                "node_controller_initial_node_sync_delay_seconds",
                "Number of seconds after node creation when NodeController finished the "
                "initial synchronization of a single node.",
                buckets=_BUCKETS,
                registry=registry,
            ),
        )
        _METRICS[registry] = metrics
    return metrics


# -- small pure helpers -----------------------------------------------------------------------


def is_kubernetes_label(key: str) -> bool:
    """Keys in the ``kubernetes.io`` / ``k8s.io`` namespaces (or a subdomain of them)."""
    return _KUBERNETES_LABEL.search(key) is not None


def _age_seconds(node: Mapping[str, Any], now: datetime) -> float | None:
    stamp = (node.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return None
    try:
        created = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (now - created).total_seconds()


class SyncError(Exception):
    """A node sync failed; the node is requeued with rate limiting."""


# -- the controller ---------------------------------------------------------------------------


class CloudNodeController(CloudController):
    """See the module docstring. Build it with :func:`build`."""

    def __init__(self, context: ControllerContext, options: NodeControllerOptions) -> None:
        super().__init__(context, CONTROLLER_NAME, SHORT_NAME, _log)
        self.options = options
        self._kube: KubeClient = context.kube
        self._cloud: GatedCloud = context.cloud
        self._clock: Clock = context.clock
        self.informer: Informer = context.informers.informer(NODES)
        self.recorder: EventRecorder = context.events.recorder(EVENT_COMPONENT)
        self.metrics = node_metrics(context.registry)
        self.sync_states = NodeInitRecorder(context.states, CONTROLLER_NAME, self.informer)
        self.queue = self.work_queue(
            QUEUE_NAME,
            node_controller_rate_limiter(clock=context.clock),
            self.sync_node,
            workers=options.concurrent_node_syncs,
            on_outcome=self.sync_states.outcome,
        )
        self.status = NodeStatusRefresher(
            context.kube,
            context.cloud,
            self.informer,
            workers=options.status_update_workers,
            refresh_period=options.node_metadata_refresh_period,
            clock=context.clock,
            states=context.states,
        )
        self.starts_informers = True
        self.wait_for_caches(self.informer)
        self.every(
            options.node_status_update_frequency, self.update_node_status, cancel_on_stop=True
        )
        self.informer.add_event_handler(
            EventHandler(on_add=self._enqueue, on_update=lambda _old, new: self._enqueue(new))
        )

    def _enqueue(self, node: Obj) -> None:
        """Upstream's Add and Update handlers: enqueue on every event, no filtering."""
        self.queue.add(_name(node))

    # -- syncNode -----------------------------------------------------------------------------

    async def sync_node(self, node_name: str) -> None:
        """Upstream ``syncNode``: initialise a tainted node, or reconcile labels of an
        initialised one."""
        cached = self.informer.get(node_name)
        if cached is None:
            return
        if not has_cloud_taint(cached):
            await self.reconcile_node_labels(node_name)
            return
        _log.info("Initializing node %s with cloud provider", node_name)
        try:
            meta = await self.get_instance_metadata(cached, priority=Priority.INITIALIZE)
        except Exception as err:
            raise SyncError(f"failed to get instance metadata for node {node_name}: {err}") from err
        if meta is None:
            _log.info("Skip sync node %s because cloud provided nil metadata", node_name)
            self.sync_states.not_initialized(node_name, "the cloud provider returned no metadata")
            return
        try:
            modifiers = self.node_modifiers(cached, meta)
        except NodeIPError as err:
            raise SyncError(f"failed to get node modifiers from cloud provider: {err}") from err
        modifiers.append(_remove_cloud_taint)
        await self._write_initialized(cached, modifiers, meta)
        self.sync_states.initialized(node_name, node_provider_id(cached) or meta.provider_id)
        self.recorder.event(
            _node_ref(cached, with_version=True),
            EVENT_TYPE_NORMAL,
            "Synced",
            "Node synced successfully",
        )
        self._observe(self.metrics.initial_node_sync_delay, cached)

    async def _write_initialized(
        self,
        cached: Mapping[str, Any],
        modifiers: Sequence[NodeModifier],
        meta: InstanceMetadata,
    ) -> None:
        """One atomic write of every modifier, conditional on the resourceVersion it was
        computed from, retried on Conflict (20 steps of 50 ms, jittered).

        Upstream PUTs the whole lister copy. kccm sends a strategic merge patch that carries the
        resourceVersion (so it conflicts exactly when the PUT would) holding only what the
        modifiers changed: a PUT from the slimmed informer cache would erase fields the cache
        drops (the last-applied annotation). The first attempt uses the cached copy; after a
        Conflict the node is re-read from the API server (the cache may still be stale).
        """
        node_name = _name(cached)
        base: Mapping[str, Any] | None = cached

        async def attempt() -> None:
            nonlocal base
            current = base if base is not None else await self._kube.get(NODES, node_name)
            desired = copy_obj(current)
            for modify in modifiers:
                modify(desired)
            try:
                written = await self._kube.patch(
                    NODES, node_name, _init_patch(current, desired), patch_type=PatchType.STRATEGIC
                )
            except Conflict:
                base = None
                raise
            self._observe(self.metrics.taint_removal_delay, written)
            await update_node_address(self._kube, written, meta)
            _log.info("Successfully initialized node %s with cloud provider", node_name)

        await retry_on_conflict(UPDATE_NODE_SPEC_BACKOFF, attempt, clock=self._clock)

    def _observe(self, histogram: Histogram, node: Mapping[str, Any]) -> None:
        age = _age_seconds(node, self._clock.now())
        if age is not None:
            histogram.observe(max(0.0, age))

    def node_modifiers(self, node: Mapping[str, Any], meta: InstanceMetadata) -> list[NodeModifier]:
        """Upstream ``getNodeModifiersFromCloudProvider``; raises :class:`NodeIPError` when the
        provided-node-ip annotation is invalid or not among the cloud's addresses."""
        modifiers: list[NodeModifier] = []
        name = _name(node)
        if not (node.get("spec") or {}).get("providerID") and meta.provider_id:
            modifiers.append(_set_provider_id(meta.provider_id))
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if ANNOTATION_PROVIDED_NODE_IP in annotations:
            try:
                get_node_addresses_from_node_ip(
                    str(annotations[ANNOTATION_PROVIDED_NODE_IP]), address_dicts(meta)
                )
            except NodeIPError as err:
                raise NodeIPError(
                    f'provided node ip for node "{name}" is not valid: {err}'
                ) from err
        if meta.instance_type:
            _log.debug(  # upstream: klog.V(2)
                "Adding node label from cloud provider: %s=%s",
                LABEL_INSTANCE_TYPE,
                meta.instance_type,
            )
            modifiers.append(
                _set_labels(
                    {
                        LABEL_INSTANCE_TYPE_BETA: meta.instance_type,
                        LABEL_INSTANCE_TYPE: meta.instance_type,
                    }
                )
            )
        if meta.zone:
            modifiers.append(_set_labels({LABEL_ZONE_BETA: meta.zone, LABEL_ZONE: meta.zone}))
        if meta.region:
            modifiers.append(
                _set_labels({LABEL_REGION_BETA: meta.region, LABEL_REGION: meta.region})
            )
        if meta.additional_labels:
            modifiers.append(_add_additional_labels(name, meta.additional_labels))
        return modifiers

    # -- metadata and addresses ---------------------------------------------------------------

    async def get_instance_metadata(
        self, node: Mapping[str, Any], *, priority: Priority = Priority.INITIALIZE
    ) -> InstanceMetadata | None:
        """Upstream ``getInstanceMetadata``, in :mod:`kccm.cloudprovider.metadata`."""
        return await instance_metadata(self._cloud, node, priority=priority)

    async def update_node_status(self) -> None:
        """One tick of the periodic status refresh (:mod:`kccm.controllers.nodestatus`)."""
        await self.status.update_node_status()

    # -- reconcileNodeLabels ------------------------------------------------------------------

    async def reconcile_node_labels(self, node_name: str) -> None:
        """Upstream ``reconcileNodeLabels``: copy each beta label (the source of truth) to its
        GA twin when the GA label is missing or differs. No cloud call."""
        node = self.informer.get(node_name)
        if node is None:
            return
        labels = (node.get("metadata") or {}).get("labels") or {}
        wanted = {
            secondary: labels[primary]
            for primary, secondary in _LABEL_RECONCILE
            if primary in labels and labels.get(secondary) != labels[primary]
        }
        if not wanted:
            return
        try:
            await add_or_update_labels_on_node(self._kube, node_name, wanted, clock=self._clock)
        except Exception as err:
            raise SyncError(f"failed update labels for node {node_name}: {err}") from err


# -- modifiers --------------------------------------------------------------------------------


def _set_provider_id(provider_id: str) -> NodeModifier:
    def modify(node: Obj) -> None:
        spec = node.setdefault("spec", {})
        if not spec.get("providerID"):
            spec["providerID"] = provider_id

    return modify


def _set_labels(labels: Mapping[str, str]) -> NodeModifier:
    def modify(node: Obj) -> None:
        meta = node.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), **labels}

    return modify


def _add_additional_labels(node_name: str, additional: Mapping[str, str]) -> NodeModifier:
    def modify(node: Obj) -> None:
        meta = node.setdefault("metadata", {})
        labels = dict(meta.get("labels") or {})
        for key, value in additional.items():
            if is_kubernetes_label(key):
                _log.warning(
                    "Discarding node label %s with kubernetes prefix for node %s", key, node_name
                )
                continue
            if key in labels:
                if labels[key] != value:
                    _log.warning(
                        "Not overwriting existing label %s=%s of node %s with %s",
                        key,
                        labels[key],
                        node_name,
                        value,
                    )
                continue
            labels[key] = value
        meta["labels"] = labels

    return modify


def _remove_cloud_taint(node: Obj) -> None:
    spec = node.setdefault("spec", {})
    spec["taints"] = [t for t in spec.get("taints") or () if t.get("key") != TAINT_UNINITIALIZED]


def _init_patch(base: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The strategic merge patch from ``base`` to ``desired`` for the fields node modifiers
    touch (labels are only ever added or changed; spec.taints is replaced as a whole), carrying
    ``base``'s resourceVersion for optimistic concurrency."""
    base_meta, desired_meta = base.get("metadata") or {}, desired.get("metadata") or {}
    base_labels = base_meta.get("labels") or {}
    labels = {
        k: v for k, v in (desired_meta.get("labels") or {}).items() if base_labels.get(k) != v
    }
    metadata: dict[str, Any] = {"resourceVersion": base_meta.get("resourceVersion")}
    if labels:
        metadata["labels"] = labels
    base_spec, desired_spec = base.get("spec") or {}, desired.get("spec") or {}
    spec = {
        key: desired_spec.get(key)
        for key in ("providerID", "taints")
        if desired_spec.get(key) != base_spec.get(key)
    }
    return {"metadata": metadata, "spec": spec}


def _node_ref(node: Mapping[str, Any], *, with_version: bool = False) -> ObjectRef:
    meta = node.get("metadata") or {}
    return ObjectRef(
        kind="Node",
        name=_name(node),
        uid=str(meta.get("uid", "")),
        api_version="v1",
        resource_version=str(meta.get("resourceVersion", "")) if with_version else "",
    )


def build(
    context: ControllerContext, options: NodeControllerOptions | None = None
) -> CloudNodeController | None:
    """The controller, or None (with a warning) when the provider has neither Instances nor
    InstancesV2 — upstream then skips the controller instead of failing."""
    if not context.has_instances(CONTROLLER_NAME, _log):
        return None
    return CloudNodeController(context, options or NodeControllerOptions())
