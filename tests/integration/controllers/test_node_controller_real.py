"""cloud-node-controller against the real apiserver: kubelet-shaped tainted Nodes get
initialised (providerID, labels, addresses, taint removal, Synced event), label reconcile on
update, periodic address refresh."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kccm.cloudprovider import NodeAddress
from kccm.controllers import node as node_controller
from kccm.controllers import nodestatus
from kccm.controllers.node import CloudNodeController, NodeControllerOptions
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.controllers import event_summaries, eventually
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

UNINIT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
OTHER = {"key": "example.com/dedicated", "value": "infra", "effect": "NoSchedule"}
NOT_READY = "node.kubernetes.io/not-ready"
PROVIDED_IP = "alpha.kubernetes.io/provided-node-ip"


def kubelet_node(
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    """What a kubelet with --cloud-provider=external registers."""
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"kubernetes.io/hostname": name, **(labels or {})},
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {"taints": [UNINIT] if taints is None else taints},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "192.168.10.10"},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


@dataclass
class Running:
    kube: KubeApiClient
    cloud: FakeCloud
    ctrl: CloudNodeController
    cleanup: KubeCleanup

    def instance(self, name: str, **fields: Any) -> FakeInstance:
        values: dict[str, Any] = {
            "name": name,
            "instance_id": f"i-{name}",
            "instance_type": "m5.large",
            "addresses": (
                NodeAddress("InternalIP", "10.0.0.1"),
                NodeAddress("ExternalIP", "203.0.113.7"),
            ),
            "zone": "zone-a",
            "region": "region-1",
        }
        values.update(fields)
        return self.cloud.add_instance(FakeInstance(**values))

    async def create(self, node: Obj) -> Obj:
        self.cleanup.add(NODES, node["metadata"]["name"])
        return await self.kube.create(NODES, node)

    async def get(self, name: str) -> Obj:
        return await self.kube.get(NODES, name)

    async def initialised(self, name: str) -> Obj | None:
        node = await self.get(name)
        taints = node["spec"].get("taints") or []
        if any(t["key"] == UNINIT["key"] for t in taints):
            return None
        if not node["status"].get("addresses") or node["status"]["addresses"][0][
            "address"
        ].startswith("192.168."):
            return None  # address patch not seen yet
        return node

    async def events(self, name: str) -> list[tuple[str, str, str, str]]:
        return await event_summaries(self.kube, "default", name)


@pytest.fixture
async def running(
    controller_runs: OpenControllerRun, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> Callable[..., Awaitable[Running]]:
    async def start(options: NodeControllerOptions | None = None) -> Running:
        cloud = FakeCloud()
        run = await controller_runs(cloud)
        ctrl = node_controller.build(run.context, options)
        assert ctrl is not None
        run.start(ctrl)
        return Running(kube, cloud, ctrl, kube_cleanup)

    return start


async def test_kubelet_node_is_initialised(running: Callable[..., Awaitable[Running]]) -> None:
    env = await running()
    name = unique_name("node")
    env.instance(name)
    await env.create(kubelet_node(name, taints=[OTHER, UNINIT]))
    node = await eventually(lambda: env.initialised(name))
    assert node["spec"]["providerID"] == f"fake://i-{name}"
    # the apiserver's TaintNodesByCondition admission adds node.kubernetes.io/not-ready
    assert [t for t in node["spec"]["taints"] if t["key"] != NOT_READY] == [OTHER]
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "m5.large",
        "beta.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "zone-a",
        "failure-domain.beta.kubernetes.io/zone": "zone-a",
        "topology.kubernetes.io/region": "region-1",
        "failure-domain.beta.kubernetes.io/region": "region-1",
    }
    assert node["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "ExternalIP", "address": "203.0.113.7"},
        {"type": "Hostname", "address": name},
    ]
    assert node["status"]["conditions"][0]["reason"] == "KubeletNotReady"  # untouched
    events = await eventually(lambda: env.events(name))
    assert events == [("cloud-node-controller", "Normal", "Synced", "Node synced successfully")]


async def test_provided_node_ip_selects_the_address(
    running: Callable[..., Awaitable[Running]],
) -> None:
    env = await running()
    name = unique_name("node")
    env.instance(
        name,
        addresses=(
            NodeAddress("InternalIP", "10.0.0.1"),
            NodeAddress("InternalIP", "10.0.0.2"),
            NodeAddress("ExternalIP", "203.0.113.7"),
        ),
    )
    await env.create(kubelet_node(name, annotations={PROVIDED_IP: "10.0.0.2"}))
    node = await eventually(lambda: env.initialised(name))
    assert node["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.2"},
        {"type": "ExternalIP", "address": "203.0.113.7"},
        {"type": "Hostname", "address": name},
    ]


async def test_provided_node_ip_not_in_cloud_blocks_initialisation(
    running: Callable[..., Awaitable[Running]],
) -> None:
    env = await running()
    name = unique_name("node")
    env.instance(name)
    await env.create(kubelet_node(name, annotations={PROVIDED_IP: "10.9.9.9"}))

    async def retried() -> bool:
        return env.cloud.calls.count("instance_metadata") >= 3

    await eventually(retried)  # requeued with rate limiting
    node = await env.get(name)
    assert [t for t in node["spec"]["taints"] if t["key"] != NOT_READY] == [UNINIT]
    assert "providerID" not in node["spec"]
    assert await env.events(name) == []


async def test_additional_labels_filtered_and_existing_kept(
    running: Callable[..., Awaitable[Running]],
) -> None:
    env = await running()
    name = unique_name("node")
    env.instance(
        name,
        additional_labels={
            "example.com/pool": "blue",
            "team": "new",
            "topology.kubernetes.io/rack": "r1",
            "k8s.io/forbidden": "x",
        },
    )
    await env.create(kubelet_node(name, labels={"team": "old"}))
    node = await eventually(lambda: env.initialised(name))
    labels = node["metadata"]["labels"]
    assert labels["example.com/pool"] == "blue"
    assert labels["team"] == "old"
    assert "topology.kubernetes.io/rack" not in labels
    assert "k8s.io/forbidden" not in labels


async def status_pass_done(caplog: pytest.LogCaptureFixture) -> bool:
    """The periodic status refresh has finished a pass (it logs each one)."""
    return any("nodes status took" in r.getMessage() for r in caplog.records)


async def test_beta_labels_reconciled_to_ga_on_update(
    running: Callable[..., Awaitable[Running]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=nodestatus.__name__)
    env = await running()
    name = unique_name("node")
    await env.create(
        kubelet_node(name, taints=[], labels={"failure-domain.beta.kubernetes.io/zone": "z1"})
    )

    async def ga(value: str) -> bool:
        node = await env.get(name)
        return node["metadata"]["labels"].get("topology.kubernetes.io/zone") == value

    await eventually(lambda: ga("z1"))
    # the status loop's pass at start (the next is minutes away) may ask the cloud about the
    # node: count from its end, not from a moment it may still be running
    await eventually(lambda: status_pass_done(caplog))
    calls_before = len(env.cloud.calls)
    await env.kube.patch(
        NODES,
        name,
        {"metadata": {"labels": {"failure-domain.beta.kubernetes.io/zone": "z2"}}},
        patch_type=PatchType.MERGE,
    )
    await eventually(lambda: ga("z2"))
    assert len(env.cloud.calls) == calls_before  # label reconcile never asks the cloud


async def test_periodic_refresh_updates_addresses_only(
    running: Callable[..., Awaitable[Running]],
) -> None:
    env = await running(
        NodeControllerOptions(node_status_update_frequency=0.3, node_metadata_refresh_period=0)
    )
    name = unique_name("node")
    env.instance(name)
    await env.create(kubelet_node(name))
    before = await eventually(lambda: env.initialised(name))
    env.instance(
        name,
        instance_type="changed",
        zone="zone-z",
        addresses=(NodeAddress("InternalIP", "10.0.0.99"),),
    )

    async def refreshed() -> Obj | None:
        node = await env.get(name)
        return node if node["status"]["addresses"][0]["address"] == "10.0.0.99" else None

    after = await eventually(refreshed)
    assert after["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.99"},
        {"type": "Hostname", "address": name},
    ]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"] == before["spec"]
