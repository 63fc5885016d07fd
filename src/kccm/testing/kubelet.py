"""A kubelet's heartbeat without a kubelet: the Node Lease it renews, for tests and the demo.

A kubelet proves it is alive by renewing the Lease ``kube-node-lease/<node>`` (every 10 s;
upstream ``pkg/kubelet/nodelease`` and ``k8s.io/component-helpers/apimachinery/lease``'s
``controller.go``), owned by its Node so the garbage collector removes it with the Node.
kube-controller-manager's node lifecycle controller
(``pkg/controller/nodelifecycle/node_lifecycle_controller.go``, ``tryUpdateNodeHealth``)
treats a renewal as a probe; when neither the Lease nor the Ready condition's heartbeat
moves for ``--node-monitor-grace-period``, it sets Ready (and every other condition) to
Unknown with reason ``NodeStatusUnknown`` and taints the Node ``node.kubernetes.io/unreachable``.

:class:`KubeletHeartbeat` renews that Lease until :meth:`~KubeletHeartbeat.stop` — "the
kubelet stops posting status" — so that the controller manager, not the test, marks the Node.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import datetime

from kccm.kube.errors import AlreadyExists, KubeError, NotFound
from kccm.kube.interface import KubeClient, Obj
from kccm.kube.resources import LEASES, NODES
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["NODE_LEASE_NAMESPACE", "KubeletHeartbeat", "micro_time"]

NODE_LEASE_NAMESPACE = "kube-node-lease"


def micro_time(when: datetime) -> str:
    """A metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class KubeletHeartbeat:
    """Renew ``kube-node-lease/<node>`` every ``interval`` seconds while running."""

    kube: KubeClient
    node: str
    interval: float = 1.0
    lease_duration_seconds: int = 40
    clock: Clock = REAL_CLOCK
    renewals: int = 0
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def start(self) -> None:
        """Create (or take over) the Lease, owned by the Node, and start renewing it."""
        node = await self.kube.get(NODES, self.node)
        lease = self._lease(node)
        try:
            await self.kube.create(LEASES, lease)  # the namespace is in its metadata
        except AlreadyExists:
            await self._renew()
        self.renewals += 1
        self._task = asyncio.create_task(self._loop(), name=f"kubelet-heartbeat-{self.node}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """Stop renewing: the Node's kubelet has gone silent."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _lease(self, node: Obj) -> Obj:
        now = micro_time(self.clock.now())
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node}
        owner["uid"] = node["metadata"]["uid"]
        return {
            "metadata": {
                "name": self.node,
                "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [owner],
            },
            "spec": {
                "holderIdentity": self.node,
                "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": now,
                "renewTime": now,
            },
        }

    async def _renew(self) -> None:
        patch = {"spec": {"renewTime": micro_time(self.clock.now())}}
        await self.kube.patch(LEASES, self.node, patch, namespace=NODE_LEASE_NAMESPACE)

    async def _loop(self) -> None:
        while True:
            await self.clock.sleep(self.interval)
            try:
                await self._renew()
            except NotFound:
                return  # the Node (and with it its Lease) was deleted
            except (KubeError, OSError):
                continue  # a kubelet retries on its next tick
            self.renewals += 1
