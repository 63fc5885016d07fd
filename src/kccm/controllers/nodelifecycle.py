"""``cloud-node-lifecycle-controller``: delete Nodes whose instance is gone, taint shut-down
ones (upstream ``controllers/nodelifecycle/node_lifecycle_controller.go``, spec §3).

Every ``node-monitor-period`` (5 s, sliding) ``monitor_nodes`` walks the node cache:

- ``Ready=True``: remove the ``node.cloudprovider.kubernetes.io/shutdown:NoSchedule`` taint if
  present (no API call otherwise) and never ask the cloud anything;
- otherwise ask whether the instance exists (InstancesV2 ``InstanceExists``; legacy
  ``InstanceExistsByProviderID`` with the providerID from the spec or ``InstanceID``, where
  ``InstanceNotFound`` means "does not exist"): a missing instance gets its Node deleted with
  ``Normal DeletingNode`` (``Warning DeletingNodeFailed`` when the delete fails); an existing
  one that is shut down gets the shutdown taint (no value). Any error skips the node until the
  next period.

Upstream checks nodes one after the other; kccm checks the not-Ready ones concurrently, at most
``concurrent_node_monitors`` at a time (v0.36.3's MonitorNodes is serial; see
docs/behaviour.md). Cloud calls use ``Priority.PERIODIC``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kccm.api.wellknown import TAINT_NODE_SHUTDOWN
from kccm.cloudprovider.errors import InstanceNotFound, NotImplementedByProvider, find_error
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import CloudController, ControllerContext
from kccm.controllers.node_state import NODE, forget_on_delete
from kccm.controllers.nodeutil import (
    add_or_update_taint_on_node,
    carries_taint,
    get_instance_provider_id,
    node_condition,
    node_name,
    remove_taint_off_node,
)
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import NODES
from kccm.runtime.events import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder, ObjectRef
from kccm.runtime.informers import Informer
from kccm.util.clock import Clock
from kccm.util.loop import for_each

__all__ = [
    "CONTROLLER_NAME",
    "DEFAULT_CONCURRENT_NODE_MONITORS",
    "EVENT_COMPONENT",
    "SHORT_NAME",
    "SHUTDOWN_TAINT",
    "CloudNodeLifecycleController",
    "NodeLifecycleControllerOptions",
    "build",
]

CONTROLLER_NAME = "cloud-node-lifecycle-controller"
SHORT_NAME = "cloud-node-lifecycle"
_READY = "none: Ready, no cloud check"
_READY_DETAIL: Mapping[str, Any] = MappingProxyType({"ready": "True", "action": _READY})
"""What a pass records for a Ready node (one shared detail for every Ready node)."""
EVENT_COMPONENT = "cloud-node-lifecycle-controller"
DELETE_NODE_EVENT = "DeletingNode"
DELETE_NODE_FAILED_EVENT = "DeletingNodeFailed"

SHUTDOWN_TAINT: Mapping[str, str] = {"key": TAINT_NODE_SHUTDOWN, "effect": "NoSchedule"}

DEFAULT_CONCURRENT_NODE_MONITORS = 10
"""How many not-Ready nodes are checked against the cloud at once (upstream snapshot: 1)."""

_log = logging.getLogger(__name__)


@dataclass
class NodeLifecycleControllerOptions:
    """``--node-monitor-period`` (5 s) and kccm's bound on concurrent not-Ready checks."""

    node_monitor_period: float = 5.0
    concurrent_node_monitors: int = DEFAULT_CONCURRENT_NODE_MONITORS


def ready_status(node: Mapping[str, Any]) -> str:
    """The Ready condition's status, ``Unknown`` when the node has none."""
    cond = node_condition(node, "Ready")
    return str(cond.get("status", "Unknown")) if cond is not None else "Unknown"


class InstancesUnsupportedError(Exception):
    """Neither Instances nor InstancesV2 is available."""


class CloudNodeLifecycleController(CloudController):
    """See the module docstring. Build it with :func:`build`. Like upstream, it does not wait
    for the node cache to sync (an unsynced cache only shortens a pass)."""

    def __init__(self, context: ControllerContext, options: NodeLifecycleControllerOptions) -> None:
        super().__init__(context, CONTROLLER_NAME, SHORT_NAME, _log)
        self.options = options
        self._kube: KubeClient = context.kube
        self._cloud: GatedCloud = context.cloud
        self._clock: Clock = context.clock
        self.informer: Informer = context.informers.informer(NODES)
        self.recorder: EventRecorder = context.events.recorder(EVENT_COMPONENT)
        self.starts_informers = True
        self.every(options.node_monitor_period, self.monitor_nodes)
        self.states = context.states
        forget_on_delete(self.states, self.informer, CONTROLLER_NAME)

    # -- MonitorNodes -------------------------------------------------------------------------

    async def monitor_nodes(self) -> None:
        """One pass over every cached node (upstream ``MonitorNodes``)."""
        not_ready: list[Obj] = []
        at = self.states.clock.now().timestamp()
        for node in self.informer.items():
            if ready_status(node) == "True":
                if carries_taint(node, SHUTDOWN_TAINT):
                    await self._ensure_no_shutdown_taint(node)
                name = node_name(node)
                self.states.record(
                    NODE, name, CONTROLLER_NAME, message=_READY, detail=_READY_DETAIL, at=at
                )
            else:
                not_ready.append(node)
        if not_ready:
            concurrency = self.options.concurrent_node_monitors
            await for_each(not_ready, self.check_not_ready_node, concurrency=concurrency)

    async def _ensure_no_shutdown_taint(self, node: Obj) -> None:
        try:
            await remove_taint_off_node(
                self._kube, node_name(node), node, SHUTDOWN_TAINT, clock=self._clock
            )
        except Exception as err:
            _log.error("error patching node taints: %s", err)

    async def check_not_ready_node(self, node: Obj) -> None:
        """Delete the node when its instance is gone; taint it when the instance is shut down."""
        name = node_name(node)
        checks: dict[str, Any] = {"ready": ready_status(node)}
        try:
            exists = await self.ensure_node_exists_by_provider_id(node)
        except Exception as err:
            _log.error("error checking if node %s exists: %s", name, err)
            self._record(name, checks, "existence check failed", err)
            return
        checks["exists"] = exists
        if not exists:
            self._record(name, checks, "deleted: the instance is gone from the cloud")
            await self._delete_node(node)
            return
        try:
            shutdown = await self.shutdown_in_cloud_provider(node)
        except Exception as err:
            _log.error("error checking if node %s is shutdown: %s", name, err)
            self._record(name, checks, "shutdown check failed", err)
            return
        checks["shutdown"] = shutdown
        self._record(name, checks, f"tainted {SHUTDOWN_TAINT['key']}" if shutdown else "none")
        if shutdown:
            try:
                await add_or_update_taint_on_node(
                    self._kube, name, SHUTDOWN_TAINT, clock=self._clock
                )
            except Exception as err:
                _log.error(
                    "failed to apply shutdown taint to node %s, it may have been deleted: %s",
                    name,
                    err,
                )

    def _record(
        self, name: str, checks: dict[str, Any], action: str, error: Exception | None = None
    ) -> None:
        """The last checks of a NotReady node (``kccm explain node``)."""
        detail = {**checks, "action": action}
        self.states.record(NODE, name, CONTROLLER_NAME, error=error, message=action, detail=detail)

    async def _delete_node(self, node: Obj) -> None:
        name = node_name(node)
        ref = ObjectRef(
            kind="Node",
            name=name,
            uid=str((node.get("metadata") or {}).get("uid", "")),
            api_version="v1",
        )
        _log.info("deleting node since it is no longer present in cloud provider: %s", name)
        self.recorder.event(
            ref,
            EVENT_TYPE_NORMAL,
            DELETE_NODE_EVENT,
            f"Deleting node {name} because it does not exist in the cloud provider",
        )
        try:
            await self._kube.delete(NODES, name)
        except Exception as err:
            _log.error("unable to delete node %r: %s", name, err)
            self.recorder.event(
                ref,
                EVENT_TYPE_WARNING,
                DELETE_NODE_FAILED_EVENT,
                f"Failed deleting node {name}: {err}",
            )

    # -- cloud checks -------------------------------------------------------------------------

    async def ensure_node_exists_by_provider_id(self, node: Mapping[str, Any]) -> bool:
        """Upstream ``ensureNodeExistsByProviderID``."""
        v2 = self._cloud.instances_v2()
        if v2 is not None:
            return await v2.instance_exists(node, priority=Priority.PERIODIC)
        instances = self._cloud.instances()
        if instances is None:
            raise InstancesUnsupportedError(
                "instances interface not supported in the cloud provider"
            )
        provider_id = str((node.get("spec") or {}).get("providerID") or "")
        if not provider_id:
            try:
                provider_id = await get_instance_provider_id(
                    self._cloud, node_name(node), priority=Priority.PERIODIC
                )
            except InstanceNotFound:
                return False
            if not provider_id:
                _log.warning(
                    "Cannot find valid providerID for node name %r, assuming non existence",
                    node_name(node),
                )
                return False
        return await instances.instance_exists_by_provider_id(
            provider_id, priority=Priority.PERIODIC
        )

    async def shutdown_in_cloud_provider(self, node: Mapping[str, Any]) -> bool:
        """Upstream ``shutdownInCloudProvider``: ``InstanceNotFound`` from the providerID lookup
        and ``NotImplemented`` from the shutdown check both mean "not shut down"."""
        v2 = self._cloud.instances_v2()
        if v2 is not None:
            return await v2.instance_shutdown(node, priority=Priority.PERIODIC)
        instances = self._cloud.instances()
        if instances is None:
            raise InstancesUnsupportedError("cloud provider does not support instances")
        try:
            provider_id = await self.get_provider_id(node)
        except InstanceNotFound:
            return False
        try:
            return await instances.instance_shutdown_by_provider_id(
                provider_id, priority=Priority.PERIODIC
            )
        except Exception as err:
            if find_error(err, NotImplementedByProvider) is not None:
                return False
            raise

    async def get_provider_id(self, node: Mapping[str, Any]) -> str:
        """Upstream ``getProviderID``: the spec's providerID, else InstancesV2 metadata, else
        the legacy ``InstanceID``."""
        provider_id = str((node.get("spec") or {}).get("providerID") or "")
        if provider_id:
            return provider_id
        v2 = self._cloud.instances_v2()
        if v2 is not None:
            meta = await v2.instance_metadata(node, priority=Priority.PERIODIC)
            return meta.provider_id if meta is not None else ""
        return await get_instance_provider_id(
            self._cloud, node_name(node), priority=Priority.PERIODIC
        )


def build(
    context: ControllerContext, options: NodeLifecycleControllerOptions | None = None
) -> CloudNodeLifecycleController | None:
    """The controller, or None (with a warning) when the provider has neither Instances nor
    InstancesV2 — upstream then skips the controller instead of failing."""
    if not context.has_instances(CONTROLLER_NAME, _log):
        return None
    return CloudNodeLifecycleController(context, options or NodeLifecycleControllerOptions())
