"""The cloud node controller's periodic status refresh (upstream ``UpdateNodeStatus`` and
``updateNodeAddress`` in ``controllers/node/node_controller.go``).

At start and every ``node-status-update-frequency`` (sliding) the addresses of every initialised
node are refreshed by ``concurrent-node-status-updates`` parallel workers; nothing else is
touched. A provider implementing ``list_instance_metadata`` answers each tick for all of them in
one call (kccm, docs/behaviour.md). Opt-in: ``node-metadata-refresh-period`` > 0 reads a node
at most once per period, the reads spread evenly over it. Cloud calls use ``Priority.PERIODIC``.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kccm.api.wellknown import ANNOTATION_PROVIDED_NODE_IP
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedCloud, GatedInstancesV2
from kccm.cloudprovider.metadata import instance_node_addresses
from kccm.cloudprovider.types import InstanceMetadata
from kccm.controllers.node_state import record_address_refresh
from kccm.controllers.nodeutil import (
    NodeIPError,
    get_node_addresses_from_node_ip,
    has_cloud_taint,
    node_addresses_change_detected,
    node_name,
    patch_node_status,
)
from kccm.controllers.syncstate import SyncStates
from kccm.kube.interface import KubeClient, Obj
from kccm.runtime.informers import Informer
from kccm.util.clock import Clock

__all__ = ["NodeStatusRefresher", "address_dicts", "update_node_address"]

_log = logging.getLogger(__name__)
_NODES_PER_TURN = 500
"""A listed refresh lets the loop run after this many nodes (/metrics, /healthz, watches)."""


def address_dicts(meta: InstanceMetadata) -> list[dict[str, str]]:
    return [a.to_dict() for a in meta.node_addresses]


async def update_node_address(
    kube: KubeClient, node: Mapping[str, Any], meta: InstanceMetadata
) -> str:
    """Upstream ``updateNodeAddress``; errors are logged, never raised. Returns what happened
    in a few words (``kccm explain node``)."""
    name = node_name(node)
    if has_cloud_taint(node):
        return "skipped: not initialised"
    addresses = address_dicts(meta)
    if not addresses:
        _log.debug(
            "Skipping node address update for node %s since cloud provider did not return any",
            name,
        )
        return "skipped: the cloud provider returned no addresses"
    if not any(a["type"] == "Hostname" for a in addresses):
        addresses.extend(
            {"type": "Hostname", "address": str(a.get("address", ""))}
            for a in (node.get("status") or {}).get("addresses") or ()
            if a.get("type") == "Hostname"
        )
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    if ANNOTATION_PROVIDED_NODE_IP in annotations:
        try:
            addresses = get_node_addresses_from_node_ip(
                str(annotations[ANNOTATION_PROVIDED_NODE_IP]), addresses
            )
        except NodeIPError as err:
            _log.error("Failed to update node addresses for node %r: %s", name, err)
            return f"invalid: {err}"
    old = list((node.get("status") or {}).get("addresses") or ())
    if not node_addresses_change_detected(old, addresses):
        return "unchanged"
    new = {**node, "status": {**(node.get("status") or {}), "addresses": addresses}}
    try:
        await patch_node_status(kube, name, node, new)
    except Exception as err:
        _log.error("Error patching node with cloud ip addresses = [%s]", err)
        return f"failed: patching the Node's addresses: {err}"
    return "updated"


class NodeStatusRefresher:
    """One tick of the periodic refresh is :meth:`update_node_status`: ``workers`` parallel
    workers (the node controller's ``status_update_workers``), each node read at most once per
    ``refresh_period`` (``node-metadata-refresh-period``; 0: at every tick)."""

    def __init__(
        self,
        kube: KubeClient,
        cloud: GatedCloud,
        informer: Informer,
        *,
        workers: int,
        refresh_period: float,
        clock: Clock,
        states: SyncStates | None = None,
    ) -> None:
        self._states = states
        self._kube = kube
        self._cloud = cloud
        self._informer = informer
        self._workers = workers
        self._refresh_period = refresh_period
        self._clock = clock
        self._refreshed: dict[str, float] = {}
        """node name -> monotonic time of its last periodic metadata read (or its spread-out
        virtual one when first seen)."""

    async def update_node_status(self) -> None:
        """Upstream ``UpdateNodeStatus``: refresh the addresses of initialised nodes with
        ``workers`` parallel workers (``workqueue.ParallelizeUntil``), or in one
        list call when the provider offers one (only the nodes due, with a refresh period)."""
        started = self._clock.monotonic()
        due = self._due_nodes(started)
        v2 = self._cloud.instances_v2()
        if due and v2 is not None and v2.can_list_metadata:
            await self._update_listed_status(v2, due)
        else:
            await _parallelize(self._workers, due, self._update_one_status)
        _log.info("Update %d nodes status took %.3fs.", len(due), self._clock.monotonic() - started)

    def _due_nodes(self, now: float) -> list[Obj]:
        """Initialised nodes whose metadata was last read a refresh period ago or more. A node
        seen for the first time gets a virtual last read spread by its name over the period,
        so a large cluster is refreshed evenly, not all in one tick."""
        period = self._refresh_period
        nodes = [n for n in self._informer.items() if not has_cloud_taint(n)]
        if period <= 0:
            return nodes
        seen = {node_name(n) for n in nodes}
        for gone in self._refreshed.keys() - seen:
            del self._refreshed[gone]
        due = []
        for node in nodes:
            name = node_name(node)
            last = self._refreshed.get(name)
            if last is None:
                last = self._refreshed[name] = now - period * _spread(name)
            if now - last >= period:
                due.append(node)
        return due

    def _read(self, node: Mapping[str, Any]) -> None:
        """The cloud answered for ``node``: its next periodic read is a period away (a
        failed read leaves it due at the next tick, as upstream retries every tick)."""
        self._refreshed[node_name(node)] = self._clock.monotonic()

    async def _update_listed_status(self, v2: GatedInstancesV2, nodes: list[Obj]) -> None:
        try:
            found = await v2.list_instance_metadata(nodes, priority=Priority.PERIODIC)
        except Exception as err:
            _log.error("Error listing instance metadata for node addresses: %s", err)
            for node in nodes:
                self._record(node, "", err)
            return
        for done, node in enumerate(nodes, 1):
            if done % _NODES_PER_TURN == 0:
                await asyncio.sleep(0)  # 10,000 unchanged nodes would hold the loop ~0.2 s
            meta = found.get(node_name(node))
            if meta is None:
                # left out (unknown instance): a failed read, due again next tick
                self._record(node, "not found: the cloud's listing left the instance out")
                continue
            self._read(node)
            self._record(node, await update_node_address(self._kube, node, meta))

    async def _update_one_status(self, node: Obj) -> None:
        """``node`` is one of :meth:`_due_nodes`: initialised (no uninitialized taint)."""
        try:
            meta = await instance_node_addresses(self._cloud, node)
        except Exception as err:
            _log.error("Error getting instance metadata for node addresses: %s", err)
            self._record(node, "", err)
            return
        self._read(node)
        if meta is None:
            self._record(node, "skipped: the cloud provider returned no metadata")
            return
        self._record(node, await update_node_address(self._kube, node, meta))

    def _record(self, node: Mapping[str, Any], result: str, error: Exception | None = None) -> None:
        if self._states is not None:
            record_address_refresh(self._states, node, result, error)


def _spread(name: str) -> float:
    """A stable fraction in [0, 1) derived from a node name."""
    return zlib.crc32(name.encode()) / 2**32


async def _parallelize(
    workers: int, items: Sequence[Obj], fn: Callable[[Obj], Awaitable[None]]
) -> None:
    """``workqueue.ParallelizeUntil``: ``workers`` tasks pulling pieces from a shared index."""
    if not items:
        return
    pieces = iter(items)

    async def worker() -> None:
        for item in pieces:
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(max(1, min(workers, len(items))))))
