"""The service-lb-controller's unit-test harness: the in-memory kube fake that records
patches, the recording event broadcaster, the fake provider, and the builders the tests share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.controllers.service import (
    ServiceController,
    ServiceControllerOptions,
    build,
)
from kccm.kube.errors import KubeError
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

NS = "default"
EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"
ENSURED = ["EnsuringLoadBalancer", "EnsuredLoadBalancer"]


# -- harness ------------------------------------------------------------------------------------


@dataclass
class Patch:
    name: str
    body: Any
    patch_type: PatchType
    subresource: str | None


class RecordingKube(FakeKube):
    """FakeKube that records service patches and can fail the next ones."""

    def __init__(self) -> None:
        super().__init__()
        self.patches: list[Patch] = []
        self.patch_errors: list[KubeError] = []

    async def patch(self, resource: Any, name: str, patch: Any, **kwargs: Any) -> Obj:
        if resource == SERVICES:
            self.patches.append(
                Patch(
                    name,
                    patch,
                    kwargs.get("patch_type", PatchType.STRATEGIC),
                    kwargs.get("subresource"),
                )
            )
            if self.patch_errors:
                raise self.patch_errors.pop(0)
        return await super().patch(resource, name, patch, **kwargs)


class RecordingBroadcaster(EventBroadcaster):
    """Keeps every submitted event as (type, reason, message, object name, component)."""

    def __init__(self, kube: FakeKube, clock: FakeClock) -> None:
        super().__init__(kube, clock=clock)
        self.recorded: list[tuple[str, str, str, str, str]] = []

    def submit(self, event: Obj) -> None:
        self.recorded.append(
            (
                event["type"],
                event["reason"],
                event["message"],
                f"{event['involvedObject']['kind']}/{event['involvedObject']['name']}",
                event["source"]["component"],
            )
        )

    def reasons(self) -> list[str]:
        return [reason for _, reason, *_ in self.recorded]


@dataclass
class Harness:
    kube: RecordingKube
    cloud: FakeCloud
    clock: FakeClock
    registry: CollectorRegistry
    events: RecordingBroadcaster
    factory: SharedInformerFactory
    gate: CallGate
    controller: ServiceController = field(init=False)

    async def settle(self) -> None:
        """Let the informers catch up with what was written."""
        await self.clock.advance(0)

    async def service(self, name: str) -> Obj:
        return await self.kube.get(SERVICES, name, namespace=NS)

    def metric(self, name: str) -> float:
        value = self.registry.get_sample_value(name)
        return 0.0 if value is None else value


async def start(
    h: Harness,
    *,
    workers: int = 1,
    classes: Sequence[str] = (),
    retain: bool = False,
    drain_seconds: int = 0,
) -> ServiceController:
    """Build the controller (serving ``classes`` besides the class-less Services, as
    ``--load-balancer-class``) and sync its informers with what the fake holds now."""
    context = ControllerContext(
        kube=h.kube,
        informers=h.factory,
        cloud=GatedCloud(h.cloud, h.gate),
        events=h.events,
        registry=h.registry,
        clock=h.clock,
    )
    options = ServiceControllerOptions(
        concurrent_service_syncs=workers,
        load_balancer_classes=list(classes),
        default_retain_address=retain,
        default_drain_seconds=drain_seconds,
    )
    controller = build(context, options)
    assert controller is not None
    h.controller = controller
    h.factory.start()
    await h.factory.wait_for_sync()
    return controller


def lb_spec(protocol: str = "TCP", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "type": "LoadBalancer",
        "ports": [{"name": "p", "protocol": protocol, "port": 80, "targetPort": 80}],
        "externalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
    }
    spec.update(extra)
    return spec


async def create_service(
    h: Harness,
    name: str = "svc",
    *,
    spec: dict[str, Any] | None = None,
    finalizers: list[str] | None = None,
    ingress: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if finalizers:
        meta["finalizers"] = finalizers
    created = await h.kube.create(
        SERVICES, {"metadata": meta, "spec": spec if spec is not None else lb_spec()}
    )
    if ingress is not None:
        created = await h.kube.patch(
            SERVICES,
            name,
            {"status": {"loadBalancer": {"ingress": ingress}}},
            namespace=NS,
            subresource="status",
        )
    if deleting:
        deleted = await h.kube.delete(SERVICES, name, namespace=NS)
        assert deleted is not None, "a service being deleted needs a finalizer"
        created = deleted
    return created


async def create_node(
    h: Harness,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    provider_id: str = "",
    taints: list[dict[str, str]] | None = None,
) -> Obj:
    spec: dict[str, Any] = {}
    if provider_id:
        spec["providerID"] = provider_id
    if taints:
        spec["taints"] = taints
    return await h.kube.create(
        NODES, {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}
    )


def fake_ingress(ip: str = "192.0.2.1", protocol: str = "TCP") -> list[dict[str, Any]]:
    return [{"ip": ip, "ipMode": "VIP", "ports": [{"port": 80, "protocol": protocol}]}]


def key(name: str = "svc") -> str:
    return f"{NS}/{name}"


def _gone(h: Harness) -> bool:
    return not any(o["metadata"]["name"] == "svc" for o in h.kube.objects(SERVICES))


async def ensure_all(h: Harness, controller: ServiceController, names: list[str]) -> None:
    """Sync ``names`` as the service workers would, then empty the queue and the logs."""
    await h.settle()
    for name in names:
        await controller.sync_service(key(name))
    await h.settle()
    while len(controller.service_queue):
        done = await controller.service_queue.get()
        controller.service_queue.done(done)
    h.cloud.clear_calls()
    h.events.recorded.clear()


def update_calls(h: Harness) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (str(call.args[1]), tuple(call.args[2]))
        for call in h.cloud.call_log
        if call.method == "update_load_balancer"
    ]


def calls_for(h: Harness, name: str) -> list[str]:
    return [c.method for c in h.cloud.call_log if c.args[1:2] == (key(name),)]


async def run_until_quiet(h: Harness, controller: ServiceController) -> None:
    """Let the running controller work until nothing is queued, delayed or in flight."""
    quiet = 0
    for _ in range(2000):
        await h.clock.advance(0)
        busy = (
            len(controller.service_queue)
            or len(controller.node_queue)
            or controller.service_queue.processing
            or controller.node_queue.processing
            or controller.service_queue.waiting
        )
        quiet = 0 if busy else quiet + 1
        if quiet >= 5:
            return
    raise AssertionError("the controller never went quiet")
