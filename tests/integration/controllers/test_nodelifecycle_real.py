"""cloud-node-lifecycle-controller against the real apiserver: a NotReady Node whose instance is
gone is deleted (DeletingNode event), a shut-down instance gets the shutdown taint until the
node is Ready again, a Ready node never costs a cloud call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kccm.cloudprovider.types import Node
from kccm.controllers import nodelifecycle
from kccm.controllers.nodelifecycle import NodeLifecycleControllerOptions
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.controllers import absent, event_summaries, eventually
from kccm.testing.kubelet import ready_condition as _ready
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
PREFIX = "lc-node"


class ScopedCloud(FakeCloud):
    """The fake cloud, answering "exists, running" for nodes this test module did not create
    (so other Nodes on the shared apiserver are left alone)."""

    async def instance_exists(self, node: Node) -> bool:
        if not node["metadata"]["name"].startswith(PREFIX):
            return True
        return await super().instance_exists(node)

    async def instance_shutdown(self, node: Node) -> bool:
        if not node["metadata"]["name"].startswith(PREFIX):
            return False
        return await super().instance_shutdown(node)


def kubelet_node(name: str, ready: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"providerID": f"fake://{name}"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "conditions": [_ready(ready)],
        },
    }


@dataclass
class Running:
    kube: KubeApiClient
    cloud: ScopedCloud
    cleanup: KubeCleanup

    async def create(self, name: str, ready: str) -> Obj:
        self.cleanup.add(NODES, name)
        return await self.kube.create(NODES, kubelet_node(name, ready))

    async def set_ready(self, name: str, status: str) -> None:
        await self.kube.patch(
            NODES,
            name,
            {"status": {"conditions": [_ready(status)]}},
            patch_type=PatchType.STRATEGIC,
            subresource="status",
        )

    async def shutdown_taints(self, name: str) -> list[Any]:
        node = await self.kube.get(NODES, name)
        return [t for t in node["spec"].get("taints") or () if t["key"] == SHUTDOWN["key"]]

    async def events(self, name: str) -> list[tuple[str, str, str, str]]:
        return await event_summaries(self.kube, "default", name)

    def calls_for(self, name: str) -> list[str]:
        return [c.method for c in self.cloud.call_log if c.args and c.args[0] == name]


@pytest.fixture
async def running(
    controller_runs: OpenControllerRun, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> Running:
    cloud = ScopedCloud()
    run = await controller_runs(cloud)
    options = NodeLifecycleControllerOptions(node_monitor_period=0.2)
    run.start(nodelifecycle.build(run.context, options))
    return Running(kube, cloud, kube_cleanup)


async def test_not_ready_node_without_instance_is_deleted(running: Running) -> None:
    name = unique_name(PREFIX)
    await running.create(name, "False")

    await eventually(lambda: absent(running.kube, NODES, name))
    events = await eventually(lambda: running.events(name))
    assert [e for e in events if e[1] == "Normal"] == [
        (
            "cloud-node-lifecycle-controller",
            "Normal",
            "DeletingNode",
            f"Deleting node {name} because it does not exist in the cloud provider",
        )
    ]
    # a monitor pass may still find the Node in its cache before the watch drops it: that
    # second delete finds nothing (DeleteNodeFailed, not found); no other failure
    assert all("not found" in e[3] for e in events if e[1] != "Normal"), events


async def test_shut_down_instance_is_tainted_until_ready(running: Running) -> None:
    name = unique_name(PREFIX)
    running.cloud.add_instance(FakeInstance(name=name, shutdown=True))
    await running.create(name, "False")
    assert await eventually(lambda: running.shutdown_taints(name)) == [SHUTDOWN]
    running.cloud.set_shutdown(name, False)
    await running.set_ready(name, "True")

    async def untainted() -> bool:
        return await running.shutdown_taints(name) == []

    await eventually(untainted)
    assert (await running.kube.get(NODES, name))["metadata"]["name"] == name


async def test_ready_node_is_left_alone_and_costs_no_cloud_call(running: Running) -> None:
    name = unique_name(PREFIX)  # no instance in the cloud at all
    await running.create(name, "True")
    other = unique_name(PREFIX)
    await running.create(other, "Unknown")
    await eventually(lambda: running.events(other))  # the monitor has run over both nodes
    assert running.calls_for(name) == []
    node = await running.kube.get(NODES, name)
    assert await running.shutdown_taints(name) == []
    assert node["metadata"]["name"] == name
    assert await running.events(name) == []
