"""Two service controllers on one apiserver (the in-memory fake, the fake clock): ``a`` serves
class-less Services (upstream's default), ``b`` serves only ``loadBalancerClass: B``. A Service
that switches owner (LoadBalancer -> ClusterIP -> LoadBalancer with class B, and back) is
released by the old owner and ensured by the new one, whatever order their syncs run in: no
balancer leaked or doubled, and neither strips the shared finalizer the other still needs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from service_harness import NS, RecordingBroadcaster, RecordingKube, key, lb_spec

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.controllers.service import ServiceController, ServiceControllerOptions, build
from kccm.kube.interface import Obj
from kccm.kube.resources import SERVICES
from kccm.providers.fake import FakeCloud
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

B = "b.example.com/lb"
CLUSTER_IP = {"type": "ClusterIP", "ports": [{"name": "p", "protocol": "TCP", "port": 80}]}


@dataclass
class Daemon:
    cloud: FakeCloud
    factory: SharedInformerFactory
    gate: CallGate
    controller: ServiceController

    async def sync(self) -> None:
        """What its service workers would do now: every queued key, once."""
        while len(self.controller.service_queue):
            queued = await self.controller.service_queue.get()
            await self.controller.sync_service(queued)
            self.controller.service_queue.done(queued)

    def mutations(self) -> list[str]:
        return [c.method for c in self.cloud.call_log if c.method != "get_load_balancer"]


@dataclass
class Cluster:
    kube: RecordingKube
    clock: FakeClock
    a: Daemon
    b: Daemon

    async def settle(self) -> None:
        await self.clock.advance(0)

    async def service(self) -> Obj:
        return await self.kube.get(SERVICES, "svc", namespace=NS)

    async def set_spec(self, spec: dict[str, Any]) -> None:
        """A user's update of the spec (a replace, as kubectl apply of the whole spec)."""
        current = await self.service()
        await self.kube.replace(SERVICES, {**current, "spec": spec})
        await self.settle()

    async def finalizers(self) -> list[str]:
        return list((await self.service())["metadata"].get("finalizers") or [])


async def _daemon(kube: RecordingKube, clock: FakeClock, **options: Any) -> Daemon:
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    cloud = FakeCloud(clock=clock)
    factory = SharedInformerFactory(kube, clock=clock)
    context = ControllerContext(
        kube=kube,
        informers=factory,
        cloud=GatedCloud(cloud, gate),
        events=RecordingBroadcaster(kube, clock),
        registry=registry,
        clock=clock,
    )
    controller = build(context, ServiceControllerOptions(concurrent_service_syncs=1, **options))
    assert controller is not None
    return Daemon(cloud, factory, gate, controller)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    clock = FakeClock()
    kube = RecordingKube()
    a = await _daemon(kube, clock)
    b = await _daemon(kube, clock, load_balancer_classes=[B], load_balancer_class_only=True)
    yield Cluster(kube, clock, a, b)
    for daemon in (a, b):
        await daemon.factory.stop()
        daemon.gate.close()


async def _start(c: Cluster, *daemons: Daemon) -> None:
    for daemon in daemons:
        daemon.factory.start()
        await daemon.factory.wait_for_sync()
    await c.settle()


async def _create(c: Cluster, spec: dict[str, Any], finalizers: list[str] | None = None) -> Obj:
    meta: dict[str, Any] = {"name": "svc", "namespace": NS}
    if finalizers:
        meta["finalizers"] = finalizers
    created = await c.kube.create(SERVICES, {"metadata": meta, "spec": spec})
    await c.settle()
    return created


async def test_each_daemon_ensures_only_its_own_class(cluster: Cluster) -> None:
    c = cluster
    await _start(c, c.a, c.b)
    await c.kube.create(
        SERVICES, {"metadata": {"name": "mine", "namespace": NS}, "spec": lb_spec()}
    )
    await c.kube.create(
        SERVICES,
        {"metadata": {"name": "theirs", "namespace": NS}, "spec": lb_spec(loadBalancerClass=B)},
    )
    await c.settle()
    await c.a.sync()
    await c.b.sync()
    assert [call.args[1] for call in c.a.cloud.call_log] == [key("mine")]
    assert [call.args[1] for call in c.b.cloud.call_log] == [key("theirs")]


@pytest.mark.parametrize("a_first", [True, False], ids=["old-owner-first", "new-owner-first"])
async def test_switch_with_the_old_owner_watching(cluster: Cluster, a_first: bool) -> None:
    """LB (a) -> ClusterIP -> LB class B; each daemon syncs after both edits, in either order:
    a sees the final state only (its informer did see the ClusterIP event)."""
    c = cluster
    await _start(c, c.a, c.b)
    await _create(c, lb_spec())
    await c.a.sync()
    assert len(c.a.cloud.balancers) == 1
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]

    await c.set_spec(CLUSTER_IP)
    await c.set_spec(lb_spec(loadBalancerClass=B))
    for daemon in (c.a, c.b) if a_first else (c.b, c.a):
        await daemon.sync()
    await c.settle()
    await c.b.sync()  # the finalizer a removed comes back

    assert c.a.cloud.balancers == {}
    assert len(c.b.cloud.balancers) == 1
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]
    assert (await c.service())["status"]["loadBalancer"]["ingress"], "b's status stays"


async def test_switch_while_the_old_owner_was_down(cluster: Cluster) -> None:
    """a restarts after the switch: the Service has class B and the finalizer; a finds its
    balancer through the provider and deletes it (upstream needsCleanup would not look)."""
    c = cluster
    await _start(c, c.b)
    svc = await _create(c, lb_spec(loadBalancerClass=B), finalizers=[FINALIZER_LB_CLEANUP])
    await c.a.cloud.ensure_load_balancer("kubernetes", {**svc, "spec": lb_spec()}, [])
    await c.b.sync()
    await _start(c, c.a)
    await c.a.sync()
    await c.settle()
    await c.b.sync()
    assert c.a.cloud.balancers == {}
    assert c.a.mutations() == ["ensure_load_balancer", "ensure_load_balancer_deleted"]
    assert len(c.b.cloud.balancers) == 1
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]


async def test_the_new_owner_leaves_the_finalizer_the_old_owner_needs(cluster: Cluster) -> None:
    """b (class-only) syncs the ClusterIP state first: the finalizer is not its to remove, so
    a, which syncs only after the flip to class B, still finds and deletes its balancer."""
    c = cluster
    await _start(c, c.a, c.b)
    await _create(c, lb_spec())
    await c.a.sync()
    await c.set_spec(CLUSTER_IP)
    await c.b.sync()
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]
    assert c.b.mutations() == []

    await c.set_spec(lb_spec(loadBalancerClass=B))
    await c.b.sync()
    await c.a.sync()
    await c.settle()
    await c.b.sync()
    assert c.a.cloud.balancers == {}
    assert len(c.b.cloud.balancers) == 1
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]


async def test_switch_back_and_delete(cluster: Cluster) -> None:
    """class B -> ClusterIP -> class-less, then the Service is deleted: each balancer made
    is deleted by its owner and the Service goes."""
    c = cluster
    await _start(c, c.a, c.b)
    await _create(c, lb_spec(loadBalancerClass=B))
    await c.b.sync()
    await c.set_spec(CLUSTER_IP)
    await c.b.sync()
    await c.a.sync()
    assert c.b.cloud.balancers == {}
    await c.set_spec(lb_spec())
    await c.a.sync()
    await c.b.sync()
    assert len(c.a.cloud.balancers) == 1
    assert c.b.mutations() == ["ensure_load_balancer", "ensure_load_balancer_deleted"]

    await c.kube.delete(SERVICES, "svc", namespace=NS)
    await c.settle()
    await c.b.sync()
    await c.a.sync()
    await c.settle()
    assert c.a.cloud.balancers == {}
    assert not [s for s in c.kube.objects(SERVICES) if s["metadata"]["name"] == "svc"]
    assert c.b.mutations() == ["ensure_load_balancer", "ensure_load_balancer_deleted"]


async def test_a_foreign_service_being_deleted_keeps_its_finalizer(cluster: Cluster) -> None:
    """a never had a balancer for a class-B Service: its deletion is b's to finish."""
    c = cluster
    await _start(c, c.a)
    await _create(c, lb_spec(loadBalancerClass=B), finalizers=[FINALIZER_LB_CLEANUP])
    await c.kube.delete(SERVICES, "svc", namespace=NS)
    await c.settle()
    await c.a.sync()
    assert await c.finalizers() == [FINALIZER_LB_CLEANUP]
    assert c.a.mutations() == []


async def test_a_provider_declared_class_is_served_without_the_flag() -> None:
    """A provider that declares the classes it serves (``LoadBalancerClassServer``, as
    alibabacloud declares ``alibabacloud.com/nlb``) gets them besides the class-less Services;
    other classes stay another implementation's."""
    clock, kube = FakeClock(), RecordingKube()
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    cloud = FakeCloud(clock=clock)
    cloud.load_balancer_classes = lambda: [B]  # type: ignore[attr-defined]
    factory = SharedInformerFactory(kube, clock=clock)
    context = ControllerContext(
        kube=kube,
        informers=factory,
        cloud=GatedCloud(cloud, gate),
        events=RecordingBroadcaster(kube, clock),
        registry=registry,
        clock=clock,
    )
    controller = build(context, ServiceControllerOptions(concurrent_service_syncs=1))
    assert controller is not None
    daemon = Daemon(cloud, factory, gate, controller)
    try:
        factory.start()
        await factory.wait_for_sync()
        for name, spec in (
            ("plain", lb_spec()),
            ("declared", lb_spec(loadBalancerClass=B)),
            ("other", lb_spec(loadBalancerClass="other.example.com/lb")),
        ):
            await kube.create(SERVICES, {"metadata": {"name": name, "namespace": NS}, "spec": spec})
        await clock.advance(0)
        await daemon.sync()
        served = sorted(call.args[1] for call in cloud.call_log)
        assert served == sorted([key("declared"), key("plain")])
    finally:
        await factory.stop()
        gate.close()
