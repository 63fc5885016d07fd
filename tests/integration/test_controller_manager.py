"""kube-controller-manager beside kccm (the ``control_plane_kcm`` fixture, what ``kccm dev up``
runs): deleted namespaces go away, owner references are followed, a Node whose kubelet goes
silent is marked NotReady by kube-controller-manager's node lifecycle controller, and only then
does kccm's cloud-node-lifecycle controller act on it (delete it when its instance is gone,
taint it when its instance is shut down)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import nodelifecycle
from kccm.controllers.base import ControllerContext
from kccm.controllers.nodelifecycle import NodeLifecycleControllerOptions
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import NotFound
from kccm.kube.interface import Obj, WatchEventType
from kccm.kube.resources import CONFIG_MAPS, LEASES, NAMESPACES, NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.controllers import absent
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubelet import NODE_LEASE_NAMESPACE, KubeletHeartbeat
from kccm.testing.pytest_plugin import unique_name

UNREACHABLE = "node.kubernetes.io/unreachable"
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"


eventually = functools.partial(shared_eventually, within=60.0, interval=0.1)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace."""


@pytest.fixture
async def kcm_kube(control_plane_kcm: ControlPlane) -> AsyncIterator[KubeApiClient]:
    """An admin client on the control plane that runs kube-controller-manager."""
    client = KubeApiClient(load_cluster_config(str(control_plane_kcm.admin_kubeconfig)), qps=0)
    try:
        yield client
    finally:
        await client.close()


def ready_condition(node: Obj) -> dict[str, Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "Ready")


def taint_keys(node: Obj) -> set[str]:
    return {t["key"] for t in (node.get("spec") or {}).get("taints") or ()}


def kubelet_node(name: str) -> Obj:
    """A Node as a kubelet registers it: Ready, with a fresh heartbeat."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    return {
        "metadata": {"name": name},
        "spec": {"providerID": f"fake://{name}"},
        "status": {"conditions": [ready]},
    }


# -- namespaces and owner references ------------------------------------------------------------


async def test_deleting_a_namespace_completes(kcm_kube: KubeApiClient) -> None:
    name = unique_name("kcm-ns")
    await kcm_kube.create(NAMESPACES, {"metadata": {"name": name}})
    await kcm_kube.create(CONFIG_MAPS, {"metadata": {"name": "content", "namespace": name}})
    await kcm_kube.delete(NAMESPACES, name)
    await eventually(lambda: absent(kcm_kube, NAMESPACES, name))
    assert await absent(kcm_kube, CONFIG_MAPS, "content", name)


async def test_the_garbage_collector_follows_owner_references(kcm_kube: KubeApiClient) -> None:
    owner = await kcm_kube.create(
        CONFIG_MAPS, {"metadata": {"name": unique_name("owner")}}, namespace="default"
    )
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"]}
    ref["uid"] = owner["metadata"]["uid"]
    dependent = unique_name("dependent")
    meta = {"name": dependent, "namespace": "default", "ownerReferences": [ref]}
    await kcm_kube.create(CONFIG_MAPS, {"metadata": meta})
    await kcm_kube.delete(CONFIG_MAPS, owner["metadata"]["name"], namespace="default")
    await eventually(lambda: absent(kcm_kube, CONFIG_MAPS, dependent, "default"))


# -- silent kubelets ------------------------------------------------------------------------------


@dataclass
class Cluster:
    """Nodes with kubelet heartbeats, and kccm's node lifecycle controller on the fake cloud."""

    kube: KubeApiClient
    cloud: FakeCloud
    heartbeats: dict[str, KubeletHeartbeat] = field(default_factory=dict)

    async def node(self, name: str) -> Obj:
        return await self.kube.get(NODES, name)

    async def register(self, name: str) -> KubeletHeartbeat:
        await self.kube.create(NODES, kubelet_node(name))
        heartbeat = KubeletHeartbeat(self.kube, name, interval=0.5)
        await heartbeat.start()
        self.heartbeats[name] = heartbeat
        return heartbeat

    async def ready_status(self, name: str) -> str:
        return str(ready_condition(await self.node(name))["status"])

    async def marked_unknown(self, name: str) -> Obj | None:
        node = await self.node(name)
        return node if ready_condition(node)["status"] == "Unknown" else None


@pytest.fixture
async def cluster(kcm_kube: KubeApiClient) -> AsyncIterator[Cluster]:
    cloud = FakeCloud()
    registry = CollectorRegistry()
    gate = CallGate(registry=registry)
    informers = SharedInformerFactory(kcm_kube)
    events = EventBroadcaster(kcm_kube, registry=registry)
    events.start()
    context = ControllerContext(kcm_kube, informers, GatedCloud(cloud, gate), events, registry)
    ctrl = nodelifecycle.build(context, NodeLifecycleControllerOptions(node_monitor_period=0.5))
    assert ctrl is not None
    task = asyncio.create_task(ctrl.run())
    running = Cluster(kcm_kube, cloud)
    try:
        yield running
    finally:
        for heartbeat in running.heartbeats.values():
            await heartbeat.stop()
        for name in running.heartbeats:
            with contextlib.suppress(NotFound):  # kccm may delete it meanwhile
                await kcm_kube.delete(NODES, name)
        await ctrl.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await events.shutdown(grace=5)
        await informers.stop()
        gate.close()


async def test_a_silent_kubelet_is_marked_not_ready_by_the_controller_manager(
    cluster: Cluster, control_plane_kcm: ControlPlane
) -> None:
    name = unique_name("kcm-node")
    cluster.cloud.add_instance(FakeInstance(name=name))
    heartbeat = await cluster.register(name)
    grace = control_plane_kcm.controller_manager_settings.node_monitor_grace_period
    beats_past_grace = int(grace / heartbeat.interval) + 4

    async def renewed_past_the_grace_period() -> bool:
        return heartbeat.renewals >= beats_past_grace

    await eventually(renewed_past_the_grace_period)
    assert await cluster.ready_status(name) == "True", "heartbeats keep the Node Ready"

    await heartbeat.stop()
    stopped = time.monotonic()
    node = await eventually(lambda: cluster.marked_unknown(name))
    took = time.monotonic() - stopped
    condition = ready_condition(node)
    assert (condition["reason"], condition["message"]) == (
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )
    assert UNREACHABLE in await eventually(lambda: _taints_with(cluster, name, UNREACHABLE))
    # behaviour: not before the grace period (how late after it depends on the machine's
    # load, so no upper bound: that belongs in bench/)
    assert took >= grace - 1, f"marked after {took:.1f} s (grace {grace} s)"
    assert SHUTDOWN not in taint_keys(await cluster.node(name)), "the instance is running"


async def _taints_with(cluster: Cluster, name: str, key: str) -> set[str] | None:
    keys = taint_keys(await cluster.node(name))
    return keys if key in keys else None


async def last_state_before_deletion(kube: KubeApiClient, name: str, version: str) -> Obj:
    """The Node as it was when it was deleted: the object a watch's DELETED event carries.

    Polling for "marked Unknown" and then for "gone" races kccm, which may delete the Node
    between two polls; the watch sees every state in order, so nothing is missed."""
    selector = f"metadata.name={name}"
    async with asyncio.timeout(60):
        async for event in kube.watch(
            NODES, resource_version=version, field_selector=selector, timeout_seconds=60
        ):
            if event.type == WatchEventType.DELETED:
                return event.object
    raise AssertionError(f"Node {name} was not deleted")


async def test_kccm_deletes_a_silent_node_whose_instance_is_gone(cluster: Cluster) -> None:
    name = unique_name("kcm-gone")
    cluster.cloud.add_instance(FakeInstance(name=name))
    heartbeat = await cluster.register(name)
    version = (await cluster.node(name))["metadata"]["resourceVersion"]
    cluster.cloud.remove_instance(name)
    await heartbeat.stop()
    deleted = await last_state_before_deletion(cluster.kube, name, version)
    # kccm deleted it only after kube-controller-manager had marked it Unknown
    assert ready_condition(deleted)["status"] == "Unknown"
    # the garbage collector removes the Lease the Node owned
    await eventually(lambda: absent(cluster.kube, LEASES, name, NODE_LEASE_NAMESPACE))


async def test_kccm_taints_a_silent_node_whose_instance_is_shut_down(cluster: Cluster) -> None:
    name = unique_name("kcm-stopped")
    cluster.cloud.add_instance(FakeInstance(name=name))
    heartbeat = await cluster.register(name)
    cluster.cloud.set_shutdown(name)
    await heartbeat.stop()
    await eventually(lambda: cluster.marked_unknown(name))
    assert SHUTDOWN in await eventually(lambda: _taints_with(cluster, name, SHUTDOWN))


async def test_a_ready_node_whose_instance_is_gone_is_left_alone(cluster: Cluster) -> None:
    """kccm acts on what kube-controller-manager marked, never on a Node still heartbeating."""
    silent, alive = unique_name("kcm-silent"), unique_name("kcm-alive")
    heartbeat = await cluster.register(silent)  # no instance: deleted once it is NotReady
    await cluster.register(alive)  # no instance either, but its kubelet keeps posting
    await heartbeat.stop()
    await eventually(lambda: absent(cluster.kube, NODES, silent))
    assert await cluster.ready_status(alive) == "True"
