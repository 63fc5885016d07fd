"""The cloud-node-controller's unit-test harness: scripted fake clouds, kubelet-made Nodes, the
test environment and the builders the split test modules share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from kccm.cloudprovider import InstanceMetadata, NodeAddress
from kccm.cloudprovider.gate import CallGate
from kccm.controllers.node import CloudNodeController, NodeControllerOptions
from kccm.kube.errors import Conflict
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, Resource
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

UNINIT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
OTHER_TAINT = {"key": "example.com/other", "value": "x", "effect": "NoExecute"}
PID = "fake://12345"

INTERNAL = {"type": "InternalIP", "address": "10.0.0.1"}
INTERNAL2 = {"type": "InternalIP", "address": "10.0.0.2"}
EXTERNAL = {"type": "ExternalIP", "address": "132.143.154.163"}
KUBELET_HOSTNAME = {"type": "Hostname", "address": "node0.kubelet"}
KUBELET_IP = {"type": "InternalIP", "address": "192.168.0.9"}

TYPE_LABELS = {
    "beta.kubernetes.io/instance-type": "t1.micro",
    "node.kubernetes.io/instance-type": "t1.micro",
}
ZONE_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "us-west-1a",
    "topology.kubernetes.io/zone": "us-west-1a",
    "failure-domain.beta.kubernetes.io/region": "us-west",
    "topology.kubernetes.io/region": "us-west",
}
ALL_LABELS = {**TYPE_LABELS, **ZONE_LABELS}


def addr(d: dict[str, str]) -> NodeAddress:
    return NodeAddress.from_dict(d)


def kubelet_node(
    name: str = "node0",
    *,
    taints: list[Any] | None = None,
    provider_id: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    addresses: list[dict[str, str]] | None = None,
    ready: str | None = None,
) -> Obj:
    """A Node as a kubelet with --cloud-provider=external registers it."""
    spec: dict[str, Any] = {"taints": [UNINIT] if taints is None else taints}
    if provider_id:
        spec["providerID"] = provider_id
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any] = {
        "addresses": [KUBELET_HOSTNAME, KUBELET_IP] if addresses is None else addresses
    }
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"metadata": meta, "spec": spec, "status": status}


class ScriptedCloud(FakeCloud):
    """The fake cloud as upstream's fake: its ``OverrideInstanceMetadata`` knob, and no list
    call (so the periodic refresh asks ``instance_metadata`` per node, as upstream's tests
    describe)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.override: Callable[[Any], InstanceMetadata | None] | None = None

    def __getattribute__(self, name: str) -> Any:
        if name == "list_instance_metadata":
            raise AttributeError(name)
        return super().__getattribute__(name)

    async def instance_metadata(self, node: Any) -> InstanceMetadata | None:
        if self.override is None:
            return await super().instance_metadata(node)
        await self._enter("instance_metadata", node["metadata"]["name"])
        return self.override(node)


def make_cloud(v2: bool, *, clock: FakeClock, **instance: Any) -> ScriptedCloud:
    cloud = ScriptedCloud(clock=clock, enable_instances_v2=v2)
    fields: dict[str, Any] = {
        "name": "node0",
        "instance_id": "12345",
        "instance_type": "t1.micro",
        "addresses": (addr(INTERNAL), addr(EXTERNAL)),
        "zone": "us-west-1a",
        "region": "us-west",
    }
    fields.update(instance)
    cloud.add_instance(FakeInstance(**fields))
    return cloud


class ConflictOnceKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0
        self.sent: list[Any] = []

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> Obj:
        self.sent.append(patch)
        if self.conflicts > 0:
            self.conflicts -= 1
            self.requests.append(("patch", str(resource), name))
            raise Conflict("the object has been modified", reason="Conflict")
        return await super().patch(resource, name, patch, **kw)


@dataclass
class Env:
    kube: FakeKube
    cloud: ScriptedCloud
    clock: FakeClock
    registry: CollectorRegistry
    events: EventBroadcaster
    informers: SharedInformerFactory
    gate: CallGate
    ctrl: CloudNodeController
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    async def node(self, name: str = "node0") -> Obj:
        return await self.kube.get(NODES, name)

    async def events_written(self) -> list[tuple[str, str, str, str, str]]:
        await self.events.flush()
        return [
            (
                e["source"]["component"],
                e["involvedObject"]["name"],
                e["type"],
                e["reason"],
                e["message"],
            )
            for e in self.kube.objects(EVENTS)
        ]

    def writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.kube.requests if r[0] in ("patch", "replace", "delete")]

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(name) or 0.0


UPSTREAM_REFRESH = NodeControllerOptions(node_metadata_refresh_period=0)


def initialized(
    *,
    provider_id: str = PID,
    labels: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    addresses: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    node = kubelet_node(
        taints=taints or [],
        provider_id=provider_id,
        labels=ALL_LABELS if labels is None else labels,
        annotations=annotations,
        addresses=[INTERNAL, EXTERNAL, KUBELET_HOSTNAME] if addresses is None else addresses,
    )
    return node


def fail(method: str, error: BaseException) -> Callable[[ScriptedCloud], None]:
    return lambda cloud: cloud.fail(method, error)


def fails(*failures: tuple[str, BaseException]) -> Callable[[ScriptedCloud], None]:
    def apply(cloud: ScriptedCloud) -> None:
        for method, error in failures:
            cloud.fail(method, error)

    return apply


def override(meta: InstanceMetadata | None) -> Callable[[ScriptedCloud], None]:
    def apply(cloud: ScriptedCloud) -> None:
        cloud.override = lambda _node: meta

    return apply


class PerNodeCloud(FakeCloud):
    """A provider without the optional list call (it hides the fake's)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "list_instance_metadata":
            raise AttributeError(name)
        return super().__getattribute__(name)


def many_nodes(cloud: FakeCloud, count: int, address: dict[str, str]) -> list[Obj]:
    nodes = []
    for i in range(count):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(address),)))
        nodes.append(kubelet_node(f"node{i}", taints=[], addresses=[]))
    return nodes


async def run_for(env: Env, clock: FakeClock, seconds: float) -> None:
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(int(seconds // 60)):
        await clock.advance(60)
    await env.ctrl.stop(grace=1)
