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

__all__ = [
    "NODE_LEASE_NAMESPACE",
    "UNINITIALIZED_TAINT",
    "KubeletHeartbeat",
    "kubelet_node",
    "micro_time",
    "ready_condition",
]

NODE_LEASE_NAMESPACE = "kube-node-lease"
UNINITIALIZED_TAINT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
"""The taint kubelet --cloud-provider=external registers a Node with (cloudproviderapi)."""


def micro_time(when: datetime) -> str:
    """A metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


READY_REASONS = {"True": "KubeletReady", "False": "KubeletNotReady"}
"""The Ready reasons kubelet posts (pkg/kubelet/nodestatus/setters.go, ReadyCondition); any
other status is the node lifecycle controller's once kubelet stopped posting
(NodeStatusUnknown)."""


def ready_condition(status: str = "True") -> dict[str, str]:
    """The Ready condition as kubelet posts it ("True", "False"), or as the node lifecycle
    controller leaves it once kubelet stopped posting ("Unknown")."""
    return {
        "type": "Ready",
        "status": status,
        "reason": READY_REASONS.get(status, "NodeStatusUnknown"),
        "message": "test",
        "lastHeartbeatTime": "2026-11-21T00:00:00Z",
        "lastTransitionTime": "2026-11-21T00:00:00Z",
    }


def kubelet_node(name: str, pod_cidr: str | None = None) -> Obj:
    """A Node as kubelet registers it with --cloud-provider=external: its host name as label
    and address, the uninitialized taint, Ready; ``pod_cidr`` as podCIDR(s) when given."""
    spec: Obj = {"taints": [dict(UNINITIALIZED_TAINT)]}
    if pod_cidr:
        spec |= {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": spec,
        "status": {
            "addresses": [{"type": "Hostname", "address": name}],
            "conditions": [ready_condition()],
        },
    }


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
