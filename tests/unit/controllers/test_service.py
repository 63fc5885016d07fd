"""service-lb-controller on the in-memory kube fake and the fake provider, mirroring upstream's
controller_test.go: TestSyncLoadBalancerIfNeeded, TestProcessServiceCreateOrUpdate(K8sError),
TestSyncService, TestProcessServiceDeletion, TestAdd/RemoveFinalizer, TestPatchStatus,
TestUpdateNodesInExternalLoadBalancer, TestNodeChangesInExternalLoadBalancer,
TestServiceQueueDelay, plus the informer handlers, metrics and build()."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.apicalls import APICallCounts
from kccm.cloudprovider.errors import ImplementedElsewhere, RetryError
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.types import LoadBalancerIPMode
from kccm.controllers.base import ControllerContext
from kccm.controllers.service import (
    LoadBalancerOperation,
    ServiceController,
    ServiceControllerOptions,
    ServiceSyncError,
    build,
)
from kccm.kube.errors import Conflict, KubeError, NotFound
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, SERVICES
from kccm.providers.fake import FakeBalancer, FakeCloud, FakeCloudError
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


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    clock = FakeClock()
    kube = RecordingKube()
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    h = Harness(
        kube=kube,
        cloud=FakeCloud(clock=clock),
        clock=clock,
        registry=registry,
        events=RecordingBroadcaster(kube, clock),
        factory=SharedInformerFactory(kube, clock=clock),
        gate=gate,
    )
    yield h
    await h.factory.stop()
    gate.close()


async def start(h: Harness, *, workers: int = 1) -> ServiceController:
    """Build the controller and sync its informers with what the fake holds now."""
    context = ControllerContext(
        kube=h.kube,
        informers=h.factory,
        cloud=GatedCloud(h.cloud, h.gate),
        events=h.events,
        registry=h.registry,
        clock=h.clock,
    )
    options = ServiceControllerOptions(concurrent_service_syncs=workers)
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


# -- TestSyncLoadBalancerIfNeeded ---------------------------------------------------------------


@dataclass(frozen=True)
class SyncCase:
    spec: dict[str, Any] = field(default_factory=lb_spec)
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    lb_exists: bool = False
    ingress: tuple[dict[str, Any], ...] | None = None
    nodes: tuple[str, ...] = ("node-a",)
    fail: tuple[str, BaseException] | None = None
    ensure_returns_none: bool = False
    # expectations
    op: LoadBalancerOperation | None = LoadBalancerOperation.ENSURE
    error: str | None = None
    calls: tuple[str, ...] = ("ensure_load_balancer",)
    events: tuple[str, ...] = tuple(ENSURED)
    patches: int = 2
    final_finalizers: tuple[str, ...] = (FINALIZER_LB_CLEANUP,)
    final_ingress: tuple[dict[str, Any], ...] | None = tuple(fake_ingress())


SYNC_CASES = [
    pytest.param(
        SyncCase(
            spec={"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]},
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer",),
            events=("DeletedLoadBalancer",),
            patches=0,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="service-that-doesnt-want-lb-still-gets-deleted-event",
    ),
    pytest.param(
        SyncCase(spec=lb_spec("UDP"), final_ingress=tuple(fake_ingress(protocol="UDP"))),
        id="udp-service-that-wants-lb",
    ),
    pytest.param(SyncCase(spec=lb_spec("TCP")), id="tcp-service-that-wants-lb"),
    pytest.param(
        SyncCase(spec=lb_spec("SCTP"), final_ingress=tuple(fake_ingress(protocol="SCTP"))),
        id="sctp-service-that-wants-lb",
    ),
    pytest.param(
        SyncCase(
            spec=lb_spec(loadBalancerClass="example.com/lb"),
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer",),
            events=("DeletedLoadBalancer",),
            patches=0,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="service-with-load-balancer-class-is-not-ensured",
    ),
    pytest.param(
        SyncCase(
            finalizers=(FINALIZER_LB_CLEANUP,),
            deleting=True,
            lb_exists=True,
            ingress=tuple(fake_ingress()),
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer", "ensure_load_balancer_deleted"),
            events=("DeletingLoadBalancer", "DeletedLoadBalancer"),
            patches=2,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="service-that-needs-cleanup-deletes-lb-then-finalizer-then-status",
    ),
    pytest.param(
        SyncCase(
            spec={"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]},
            finalizers=(FINALIZER_LB_CLEANUP,),
            lb_exists=True,
            ingress=tuple(fake_ingress()),
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer", "ensure_load_balancer_deleted"),
            events=("DeletingLoadBalancer", "DeletedLoadBalancer"),
            patches=2,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="type-changed-to-clusterip-cleans-up",
    ),
    pytest.param(
        SyncCase(
            finalizers=(FINALIZER_LB_CLEANUP,),
            deleting=True,
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer",),
            events=("DeletedLoadBalancer",),
            patches=1,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="cleanup-without-an-lb-removes-finalizer-and-says-deleted",
    ),
    pytest.param(
        SyncCase(finalizers=(FINALIZER_LB_CLEANUP,), patches=1),
        id="service-with-finalizer-that-wants-lb-patches-status-only",
    ),
    pytest.param(
        SyncCase(lb_exists=True, ingress=tuple(fake_ingress()), patches=1),
        id="same-ingress-patches-finalizer-only",
    ),
    pytest.param(
        SyncCase(ingress=tuple(fake_ingress("203.0.113.9")), patches=2),
        id="different-ingress-is-replaced-by-provider-status",
    ),
    pytest.param(
        SyncCase(
            nodes=(), events=("EnsuringLoadBalancer", "UnAvailableLoadBalancer", *ENSURED[1:])
        ),
        id="zero-nodes-warns-and-still-ensures",
    ),
    pytest.param(
        SyncCase(
            fail=("ensure_load_balancer", ImplementedElsewhere()),
            events=("EnsuringLoadBalancer",),
            patches=1,
            final_ingress=None,
        ),
        id="ensure-implemented-elsewhere-keeps-finalizer-no-status-no-ensured-event",
    ),
    pytest.param(
        SyncCase(
            fail=("ensure_load_balancer", FakeCloudError("quota exceeded")),
            op=None,
            error="failed to ensure load balancer: quota exceeded",
            events=("EnsuringLoadBalancer",),
            patches=1,
            final_ingress=None,
        ),
        id="ensure-error-keeps-finalizer-and-fails",
    ),
    pytest.param(
        SyncCase(
            ensure_returns_none=True,
            op=None,
            error="service status returned by EnsureLoadBalancer is nil",
            events=("EnsuringLoadBalancer",),
            patches=1,
            final_ingress=None,
        ),
        id="nil-status-is-an-error",
    ),
    pytest.param(
        SyncCase(
            finalizers=(FINALIZER_LB_CLEANUP,),
            deleting=True,
            lb_exists=True,
            fail=("ensure_load_balancer_deleted", ImplementedElsewhere()),
            op=LoadBalancerOperation.DELETE,
            calls=("get_load_balancer", "ensure_load_balancer_deleted"),
            events=("DeletingLoadBalancer", "DeletedLoadBalancer"),
            patches=1,
            final_finalizers=(),
            final_ingress=None,
        ),
        id="delete-implemented-elsewhere-is-ignored",
    ),
    pytest.param(
        SyncCase(
            finalizers=(FINALIZER_LB_CLEANUP,),
            deleting=True,
            lb_exists=True,
            fail=("ensure_load_balancer_deleted", FakeCloudError("busy")),
            op=None,
            error="failed to delete load balancer: busy",
            calls=("get_load_balancer", "ensure_load_balancer_deleted"),
            events=("DeletingLoadBalancer",),
            patches=0,
            final_finalizers=(FINALIZER_LB_CLEANUP,),
            final_ingress=None,
        ),
        id="delete-error-keeps-the-finalizer",
    ),
    pytest.param(
        SyncCase(
            finalizers=(FINALIZER_LB_CLEANUP,),
            deleting=True,
            fail=("get_load_balancer", FakeCloudError("api down")),
            op=None,
            error="failed to check if load balancer exists before cleanup: api down",
            calls=("get_load_balancer",),
            events=(),
            patches=0,
            final_finalizers=(FINALIZER_LB_CLEANUP,),
            final_ingress=None,
        ),
        id="get-error-before-cleanup",
    ),
]


@pytest.mark.parametrize("case", SYNC_CASES)
async def test_sync_load_balancer_if_needed(harness: Harness, case: SyncCase) -> None:
    h = harness
    for name in case.nodes:
        await create_node(h, name)
    svc = await create_service(
        h,
        spec=case.spec,
        finalizers=list(case.finalizers),
        ingress=list(case.ingress) if case.ingress is not None else None,
        deleting=case.deleting,
    )
    if case.lb_exists:
        await h.cloud.ensure_load_balancer("kubernetes", svc, [])
    h.cloud.clear_calls()
    if case.fail is not None:
        h.cloud.fail(*case.fail)
    controller = await start(h)
    if case.ensure_returns_none:

        async def none(*_: Any, **__: Any) -> None:
            return None

        controller.balancer.ensure_load_balancer = none  # type: ignore[method-assign]
    h.kube.patches.clear()

    if case.error is None:
        op = await controller.sync_load_balancer_if_needed(svc, key())
        assert op is case.op
    else:
        with pytest.raises(ServiceSyncError) as raised:
            await controller.sync_load_balancer_if_needed(svc, key())
        assert str(raised.value) == case.error

    expected_calls = () if case.ensure_returns_none else case.calls
    assert tuple(h.cloud.calls) == expected_calls
    assert tuple(h.events.reasons()) == case.events
    assert len(h.kube.patches) == case.patches
    assert all(p.subresource == "status" for p in h.kube.patches)
    assert all(p.patch_type is PatchType.STRATEGIC for p in h.kube.patches)
    after = await h.kube.get(SERVICES, "svc", namespace=NS) if not _gone(h) else None
    if after is not None:
        assert tuple(after["metadata"].get("finalizers") or ()) == case.final_finalizers
        ingress = after.get("status", {}).get("loadBalancer", {}).get("ingress")
        assert (tuple(ingress) if ingress else None) == case.final_ingress


def _gone(h: Harness) -> bool:
    return not any(o["metadata"]["name"] == "svc" for o in h.kube.objects(SERVICES))


async def test_finalizer_is_added_before_the_cloud_is_called(harness: Harness) -> None:
    h = harness
    svc = await create_service(h)
    controller = await start(h)
    seen: list[list[str]] = []
    real_ensure = controller.balancer.ensure_load_balancer

    async def spying_ensure(*args: Any, **kwargs: Any) -> Any:
        stored = await h.kube.get(SERVICES, "svc", namespace=NS)
        seen.append(list(stored["metadata"].get("finalizers") or []))
        return await real_ensure(*args, **kwargs)

    controller.balancer.ensure_load_balancer = spying_ensure  # type: ignore[method-assign]
    await controller.sync_load_balancer_if_needed(svc, key())
    assert seen == [[FINALIZER_LB_CLEANUP]]
    assert h.kube.patches[0].body == {"metadata": {"finalizers": [FINALIZER_LB_CLEANUP]}}


async def test_finalizer_is_removed_only_after_the_lb_is_gone(harness: Harness) -> None:
    h = harness
    svc = await create_service(h, finalizers=[FINALIZER_LB_CLEANUP], deleting=True)
    await h.cloud.ensure_load_balancer("kubernetes", svc, [])
    controller = await start(h)
    h.kube.patches.clear()
    await controller.sync_load_balancer_if_needed(svc, key())
    assert h.cloud.balancers == {}
    assert [p.body for p in h.kube.patches] == [{"metadata": {"finalizers": None}}]
    assert _gone(h), "the last finalizer went, so the fake finished the deletion"


async def test_status_carries_every_field_the_provider_returned(harness: Harness) -> None:
    h = harness
    spec = lb_spec()
    spec["ports"].append({"name": "q", "protocol": "UDP", "port": 53, "targetPort": 53})
    svc = await create_service(h, spec=spec)
    controller = await start(h)
    await controller.sync_load_balancer_if_needed(svc, key())
    stored = await h.service("svc")
    assert stored["status"]["loadBalancer"] == {
        "ingress": [
            {
                "ip": "192.0.2.1",
                "ipMode": "VIP",
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            }
        ]
    }


async def test_events_come_from_service_controller_about_the_service(harness: Harness) -> None:
    h = harness
    await create_node(h, "node-a")
    svc = await create_service(h)
    controller = await start(h)
    await controller.sync_load_balancer_if_needed(svc, key())
    assert h.events.recorded == [
        (
            "Normal",
            "EnsuringLoadBalancer",
            "Ensuring load balancer",
            "Service/svc",
            "service-controller",
        ),
        (
            "Normal",
            "EnsuredLoadBalancer",
            "Ensured load balancer",
            "Service/svc",
            "service-controller",
        ),
    ]


# -- TestProcessServiceCreateOrUpdate(K8sError) -------------------------------------------------


@pytest.mark.parametrize(
    ("patch_errors", "error", "final_reasons"),
    [
        pytest.param(
            [Conflict("the object has been modified")],
            "failed to add load balancer cleanup finalizer: the object has been modified",
            ["EnsuringLoadBalancer", "SyncLoadBalancerFailed"],
            id="finalizer-patch-conflict-fails-the-sync",
        ),
        pytest.param(
            [NotFound("gone")],
            "failed to add load balancer cleanup finalizer: gone",
            ["EnsuringLoadBalancer", "SyncLoadBalancerFailed"],
            id="finalizer-patch-not-found-fails-the-sync",
        ),
        pytest.param(
            [],
            None,
            ENSURED,
            id="no-error",
        ),
    ],
)
async def test_process_service_create_or_update_k8s_errors(
    harness: Harness, patch_errors: list[KubeError], error: str | None, final_reasons: list[str]
) -> None:
    h = harness
    await create_node(h, "node-a")
    svc = await create_service(h)
    controller = await start(h)
    h.kube.patch_errors.extend(patch_errors)
    if error is None:
        await controller.process_service_create_or_update(svc, key())
    else:
        with pytest.raises(ServiceSyncError, match="^" + error + "$"):
            await controller.process_service_create_or_update(svc, key())
        assert h.events.recorded[-1][2] == f"Error syncing load balancer: {error}"
    assert h.events.reasons() == final_reasons
    assert key() in controller.cache


async def test_status_patch_not_found_is_ignored(harness: Harness) -> None:
    h = harness
    await create_node(h, "node-a")
    svc = await create_service(h)
    controller = await start(h)

    real_patch = h.kube.patch
    calls = 0

    async def second_patch_not_found(resource: Any, name: str, patch: Any, **kw: Any) -> Obj:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise NotFound('services "svc" not found')
        return await real_patch(resource, name, patch, **kw)

    h.kube.patch = second_patch_not_found  # type: ignore[method-assign]
    await controller.process_service_create_or_update(svc, key())
    assert h.events.reasons() == ENSURED


async def test_status_patch_other_error_fails(harness: Harness) -> None:
    h = harness
    svc = await create_service(h, finalizers=[FINALIZER_LB_CLEANUP])
    controller = await start(h)
    h.kube.patch_errors.append(Conflict("nope"))
    with pytest.raises(ServiceSyncError, match=r"^failed to update load balancer status: nope$"):
        await controller.process_service_create_or_update(svc, key())


async def test_recreated_service_with_new_uid_deletes_the_old_lb_first(harness: Harness) -> None:
    h = harness
    await create_node(h, "node-a")
    old = await create_service(h)
    controller = await start(h)
    await controller.process_service_create_or_update(old, key())
    # Deleted and re-created under the same name without the finalizer being honoured.
    h.kube._objects.clear()  # simulate a lost deletion
    new = await create_service(h)
    h.cloud.clear_calls()
    h.events.recorded.clear()
    await controller.process_service_create_or_update(new, key())
    assert h.cloud.calls == ["ensure_load_balancer_deleted", "ensure_load_balancer"]
    assert h.events.reasons() == ["DeletingLoadBalancer", "DeletedLoadBalancer", *ENSURED]
    assert controller.cache[key()]["metadata"]["uid"] == new["metadata"]["uid"]


async def test_sync_failure_with_retry_error_is_wrapped_so_the_delay_is_found(
    harness: Harness,
) -> None:
    h = harness
    svc = await create_service(h)
    controller = await start(h)
    h.cloud.fail("ensure_load_balancer", RetryError("wait for it", 42))
    with pytest.raises(ServiceSyncError) as raised:
        await controller.process_service_create_or_update(svc, key())
    assert isinstance(raised.value.__cause__, RetryError)
    assert h.events.recorded[-1][1:3] == (
        "SyncLoadBalancerFailed",
        "Error syncing load balancer: failed to ensure load balancer: wait for it",
    )


# -- TestSyncService / TestProcessServiceDeletion -----------------------------------------------


async def test_sync_service_unknown_key_is_a_no_op(harness: Harness) -> None:
    controller = await start(harness)
    await controller.sync_service(key("never-existed"))
    assert harness.cloud.calls == []
    assert harness.events.recorded == []


async def test_sync_service_present_service_is_ensured(harness: Harness) -> None:
    h = harness
    await create_service(h)
    controller = await start(h)
    await controller.sync_service(key())
    assert h.cloud.calls == ["ensure_load_balancer"]
    assert key() in controller.cache


@pytest.mark.parametrize(
    ("fail", "error", "reasons", "cached_after"),
    [
        pytest.param(
            None,
            None,
            ["DeletingLoadBalancer", "DeletedLoadBalancer"],
            False,
            id="deleted-service-lb-deleted-and-forgotten",
        ),
        pytest.param(
            FakeCloudError("stuck"),
            "stuck",
            ["DeletingLoadBalancer", "DeleteLoadBalancerFailed"],
            True,
            id="delete-failure-keeps-cache-for-retry",
        ),
    ],
)
async def test_process_service_deletion(
    harness: Harness,
    fail: BaseException | None,
    error: str | None,
    reasons: list[str],
    cached_after: bool,
) -> None:
    h = harness
    controller = await start(h)
    controller.cache[key()] = {
        "metadata": {"name": "svc", "namespace": NS, "uid": "u"},
        "spec": lb_spec(),
    }
    if fail is not None:
        h.cloud.fail("ensure_load_balancer_deleted", fail)
    if error is None:
        await controller.sync_service(key())
    else:
        with pytest.raises(FakeCloudError, match=error):
            await controller.sync_service(key())
        assert h.events.recorded[-1][2] == f"Error deleting load balancer: {error}"
    assert h.events.reasons() == reasons
    assert (key() in controller.cache) is cached_after


async def test_process_service_deletion_of_non_lb_cached_service_does_nothing(
    harness: Harness,
) -> None:
    h = harness
    controller = await start(h)
    controller.cache[key()] = {
        "metadata": {"name": "svc", "namespace": NS, "uid": "u"},
        "spec": {"type": "ClusterIP"},
    }
    await controller.sync_service(key())
    assert h.cloud.calls == []
    assert key() not in controller.cache


# -- TestAddFinalizer / TestRemoveFinalizer / TestPatchStatus ----------------------------------


@pytest.mark.parametrize(
    ("finalizers", "expect_patch", "final"),
    [
        pytest.param([FINALIZER_LB_CLEANUP], False, [FINALIZER_LB_CLEANUP], id="no-op-add"),
        pytest.param([], True, [FINALIZER_LB_CLEANUP], id="add-finalizer"),
        pytest.param(
            ["example.com/other"],
            True,
            ["example.com/other", FINALIZER_LB_CLEANUP],
            id="add-next-to-another",
        ),
    ],
)
async def test_add_finalizer(
    harness: Harness, finalizers: list[str], expect_patch: bool, final: list[str]
) -> None:
    h = harness
    svc = await create_service(h, finalizers=finalizers)
    controller = await start(h)
    h.kube.patches.clear()
    await controller._add_finalizer(svc)
    assert bool(h.kube.patches) is expect_patch
    assert (await h.service("svc"))["metadata"].get("finalizers", []) == final


@pytest.mark.parametrize(
    ("finalizers", "expect_patch", "final"),
    [
        pytest.param([], False, [], id="no-op-remove"),
        pytest.param([FINALIZER_LB_CLEANUP], True, [], id="remove-finalizer"),
    ],
)
async def test_remove_finalizer(
    harness: Harness, finalizers: list[str], expect_patch: bool, final: list[str]
) -> None:
    h = harness
    svc = await create_service(h, finalizers=finalizers)
    controller = await start(h)
    h.kube.patches.clear()
    await controller._remove_finalizer(svc)
    assert bool(h.kube.patches) is expect_patch
    assert (await h.service("svc"))["metadata"].get("finalizers", []) == final


@pytest.mark.parametrize(
    ("previous", "new_ip", "expect_patch"),
    [
        pytest.param(None, "192.0.2.1", True, id="new-status"),
        pytest.param(fake_ingress("192.0.2.1"), "192.0.2.1", False, id="same-status-no-patch"),
        pytest.param(fake_ingress("192.0.2.7"), "192.0.2.1", True, id="changed-status"),
        pytest.param(fake_ingress("192.0.2.7"), None, True, id="cleared-status"),
        pytest.param(None, None, False, id="already-clear"),
    ],
)
async def test_patch_status(
    harness: Harness, previous: list[dict[str, Any]] | None, new_ip: str | None, expect_patch: bool
) -> None:
    from kccm.cloudprovider.types import LoadBalancerStatus

    h = harness
    svc = await create_service(h, ingress=previous)
    controller = await start(h)
    new = (
        LoadBalancerStatus.from_dict({"ingress": fake_ingress(new_ip)})
        if new_ip
        else LoadBalancerStatus()
    )
    prev = svc.get("status", {}).get("loadBalancer", {})
    h.kube.patches.clear()
    await controller._patch_status(svc, prev, new)
    assert bool(h.kube.patches) is expect_patch
    stored = (await h.service("svc")).get("status", {}).get("loadBalancer", {})
    assert stored.get("ingress") == (fake_ingress(new_ip) if new_ip else None)


# -- node sync: TestUpdateNodesInExternalLoadBalancer / TestNodeChangesInExternalLoadBalancer ----


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


async def test_update_nodes_no_services_no_calls(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    controller = await start(h)
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []


async def test_node_added_updates_every_lb_service_once(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for name in ("s1", "s2", "s3"):
        await create_service(h, name)
    await create_service(h, "plain", spec={"type": "ClusterIP", "ports": []})
    controller = await start(h, workers=2)
    await ensure_all(h, controller, ["s1", "s2", "s3", "plain"])
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert sorted(update_calls(h)) == [
        (f"{NS}/s1", ("a", "b")),
        (f"{NS}/s2", ("a", "b")),
        (f"{NS}/s3", ("a", "b")),
    ]
    assert h.events.reasons() == ["UpdatedLoadBalancer"] * 3
    assert h.metric("service_controller_loadbalancer_sync_total") == 3
    # Nothing changed since: a second sync costs nothing.
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []


async def test_excluded_node_updates_only_services_whose_set_changed(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_node(h, "b")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])  # s1 synced with {a, b}
    await h.kube.patch(NODES, "b", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await ensure_all(h, controller, ["s2"])  # s2 synced with {a} already
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(f"{NS}/s1", ("a",))]


@pytest.mark.parametrize(
    ("change", "hosts"),
    [
        pytest.param({"metadata": {"labels": {EXCLUDE: ""}}}, ("a",), id="exclude-label"),
        pytest.param(
            {
                "spec": {
                    "taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]
                }
            },
            ("a",),
            id="autoscaler-taint",
        ),
        pytest.param({"spec": {"providerID": "fake://b2"}}, ("a", "b"), id="provider-id-change"),
        pytest.param({"metadata": {"labels": {EXCLUDE: "false"}}}, None, id="exclude-false-no-op"),
        pytest.param({"metadata": {"labels": {"x": "y"}}}, None, id="other-label-no-op"),
    ],
)
async def test_node_changes_in_external_load_balancer(
    harness: Harness, change: dict[str, Any], hosts: tuple[str, ...] | None
) -> None:
    h = harness
    await create_node(h, "a")
    await create_node(h, "b", provider_id="fake://b")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.kube.patch(NODES, "b", change)
    await h.settle()
    await controller.sync_nodes()
    assert update_calls(h) == ([] if hosts is None else [(f"{NS}/s1", hosts)])


async def test_failed_host_update_escalates_to_a_full_ensure(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h)
    await ensure_all(h, controller, ["s1", "s2"])
    h.cloud.fail("update_load_balancer", FakeCloudError("backend pool busy"), times=1)
    await create_node(h, "b")
    await h.settle()
    controller.service_queue.add(key("placeholder"))  # make queue order observable
    await controller._process_node_key("b")
    failed = [e for e in h.events.recorded if e[1] == "UpdateLoadBalancerFailed"]
    assert len(failed) == 1
    assert failed[0][2] == (
        "Error updating load balancer with new hosts [a b] [node names limited, total number "
        "of nodes: 2], error: backend pool busy"
    )
    assert h.metric("service_controller_nodesync_error_total") == 1
    # A plain add (no rate limit): the failed service is ready at once, in the service queue.
    assert len(controller.service_queue) == 2
    assert controller.service_queue.num_requeues(f"{NS}/{failed[0][3].split('/')[1]}") == 0
    # The new node set was stored before the call: the next node sync does not retry it.
    h.cloud.clear_calls()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == []


async def test_failed_update_of_a_vanished_lb_is_not_an_error(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    svc = await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.cloud.ensure_load_balancer_deleted("kubernetes", svc)  # the fake now fails updates
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls[-2:] == ["update_load_balancer", "get_load_balancer"]
    assert h.events.recorded == []


async def test_update_implemented_elsewhere_is_silent_success(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", ImplementedElsewhere())
    await create_node(h, "b")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.events.recorded == []


async def test_update_to_zero_hosts_warns_unavailable(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    await h.kube.patch(NODES, "a", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(f"{NS}/s1", ())]
    assert h.events.recorded == [
        (
            "Warning",
            "UnAvailableLoadBalancer",
            "There are no available nodes for LoadBalancer",
            "Service/s1",
            "service-controller",
        )
    ]


async def test_update_failed_message_lists_twenty_names(harness: Harness) -> None:
    h = harness
    for i in range(22):
        await create_node(h, f"n{i:02d}")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", FakeCloudError("boom"))
    await create_node(h, "n22")
    await h.settle()
    assert await controller.sync_nodes() == {key("s1")}
    names = " ".join(f"n{i:02d}" for i in range(20))
    assert h.events.recorded[-1][2] == (
        f"Error updating load balancer with new hosts [{names} <3 more>] [node names limited, "
        "total number of nodes: 23], error: boom"
    )


# -- informer handlers -------------------------------------------------------------------------


async def test_service_add_handler_enqueues_only_managed_or_cleanup(harness: Harness) -> None:
    h = harness
    await create_service(h, "lb")
    await create_service(h, "classed", spec=lb_spec(loadBalancerClass="x.io/lb"))
    await create_service(h, "plain", spec={"type": "ClusterIP", "ports": []})
    await create_service(
        h,
        "leftover",
        spec={"type": "ClusterIP", "ports": []},
        finalizers=[FINALIZER_LB_CLEANUP],
    )
    controller = await start(h)
    queued = {await controller.service_queue.get() for _ in range(len(controller.service_queue))}
    assert queued == {key("lb"), key("leftover")}


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"externalTrafficPolicy": "Local"}, id="traffic-policy"),
        pytest.param({"loadBalancerSourceRanges": ["10.0.0.0/8"]}, id="source-ranges"),
        pytest.param({"type": "ClusterIP"}, id="type-no-longer-loadbalancer"),
        pytest.param({"loadBalancerIP": "192.0.2.9"}, id="load-balancer-ip"),
        pytest.param({"externalIPs": ["192.0.2.10"]}, id="external-ips"),
    ],
)
async def test_service_update_handler_enqueues_on_needs_update_without_an_event(
    harness: Harness, change: dict[str, Any]
) -> None:
    """v0.36.3's needsUpdate only logs its reasons (V(2)); it records no Event."""
    h = harness
    await create_service(h, "lb")
    controller = await start(h)
    await controller.service_queue.get()
    controller.service_queue.done(key("lb"))
    await h.kube.patch(SERVICES, "lb", {"metadata": {"labels": {"a": "b"}}}, namespace=NS)
    await h.settle()
    assert len(controller.service_queue) == 0, "a label change is not worth a sync"
    await h.kube.patch(SERVICES, "lb", {"spec": change}, namespace=NS)
    await h.settle()
    assert len(controller.service_queue) == 1
    assert h.events.recorded == []


async def test_node_handlers_enqueue_add_delete_and_relevant_updates(harness: Harness) -> None:
    h = harness
    controller = await start(h)
    await create_node(h, "a")
    await h.settle()
    assert len(controller.node_queue) == 1
    assert await controller.node_queue.get() == "nodes"
    controller.node_queue.done("nodes")
    await h.kube.patch(NODES, "a", {"status": {"conditions": [{"type": "Ready"}]}})
    await h.settle()
    assert len(controller.node_queue) == 0, "readiness does not trigger a node sync"
    await h.kube.patch(NODES, "a", {"metadata": {"labels": {EXCLUDE: "true"}}})
    await h.settle()
    assert len(controller.node_queue) == 1
    await controller.node_queue.get()
    controller.node_queue.done("nodes")
    await h.kube.patch(
        NODES,
        "a",
        {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
        subresource="status",
    )
    await h.settle()
    assert len(controller.node_queue) == 1, "new addresses trigger a node sync (kccm)"
    await controller.node_queue.get()
    controller.node_queue.done("nodes")
    await h.kube.delete(NODES, "a")
    await h.settle()
    assert len(controller.node_queue) == 1


async def test_resync_reenqueues_only_services_needing_cleanup(harness: Harness) -> None:
    h = harness
    await create_service(h, "lb")
    await create_service(
        h, "leftover", spec={"type": "ClusterIP", "ports": []}, finalizers=[FINALIZER_LB_CLEANUP]
    )
    controller = await start(h)
    while len(controller.service_queue):
        done = await controller.service_queue.get()
        controller.service_queue.done(done)
    await controller._resync_services()
    assert len(controller.service_queue) == 1
    assert await controller.service_queue.get() == key("leftover")


# -- TestServiceQueueDelay and the full loop ----------------------------------------------------


@pytest.mark.parametrize(
    ("error", "delays"),
    [
        pytest.param(RetryError("retry me", 42), [42.0, 42.0], id="retry-error-42s-exactly"),
        pytest.param(FakeCloudError("plain"), [5.0, 10.0], id="plain-error-backs-off-5s-10s"),
    ],
)
async def test_service_queue_delay(
    harness: Harness, error: BaseException, delays: list[float]
) -> None:
    h = harness
    await create_service(h)
    h.cloud.fail("ensure_load_balancer", error)
    controller = await start(h)
    loop = controller._service_loop
    for expected in delays:
        before = h.clock.monotonic()
        assert await loop.process_next()
        assert len(controller.service_queue) == 0
        assert controller.service_queue.waiting == 1
        await h.clock.advance(0)
        deadline = h.clock.next_deadline()
        assert deadline is not None
        assert deadline - before == pytest.approx(expected)
        await h.clock.advance(expected)
        assert len(controller.service_queue) == 1
    expected_requeues = 0 if isinstance(error, RetryError) else 2
    assert controller.service_queue.num_requeues(key()) == expected_requeues


async def test_node_queue_never_retries(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    h.cloud.fail("update_load_balancer", FakeCloudError("nope"))
    await create_node(h, "b")
    await h.settle()
    loop = controller._node_loop
    while len(controller.node_queue):
        await loop.process_next()
    assert controller.node_queue.waiting == 0
    assert controller.node_queue.num_requeues("b") == 0
    assert h.metric("service_controller_nodesync_latency_seconds_count") >= 1
    assert h.metric("service_controller_update_loadbalancer_host_latency_seconds_count") >= 1


async def test_run_ensures_services_and_reports_running(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    await create_service(h, "s2")
    controller = await start(h, workers=2)
    gauge = 'running_managed_controllers{manager="cloud-controller-manager",name="service"}'
    task = asyncio.create_task(controller.run())
    for _ in range(100):
        await h.clock.advance(0)
        stored = [await h.service(n) for n in ("s1", "s2")]
        if all(s["status"].get("loadBalancer") for s in stored):
            break
    assert [s["status"]["loadBalancer"]["ingress"][0]["ip"] for s in stored] == sorted(
        s["status"]["loadBalancer"]["ingress"][0]["ip"] for s in stored
    )
    assert (
        h.registry.get_sample_value(
            "running_managed_controllers",
            {"manager": "cloud-controller-manager", "name": "service"},
        )
        == 1
    ), gauge
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)
    assert (
        h.registry.get_sample_value(
            "running_managed_controllers",
            {"manager": "cloud-controller-manager", "name": "service"},
        )
        == 0
    )
    assert h.registry.get_sample_value("workqueue_adds_total", {"name": "service"}) is not None
    assert h.registry.get_sample_value("workqueue_adds_total", {"name": "node"}) is not None


async def test_build_skips_when_provider_has_no_load_balancers(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    context = ControllerContext(
        kube=h.kube,
        informers=h.factory,
        cloud=GatedCloud(FakeCloud(enable_load_balancers=False), h.gate),
        events=h.events,
        registry=h.registry,
        clock=h.clock,
    )
    with caplog.at_level(logging.WARNING):
        assert build(context) is None
    assert "does not support external load balancers" in caplog.text


def test_default_concurrency_does_not_serialise() -> None:
    assert ServiceControllerOptions().concurrent_service_syncs == 10


# -- concurrency (checklist 40, issue item 7) -----------------------------------------------------


async def test_service_workers_ensure_in_parallel(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for i in range(5):
        await create_service(h, f"s{i}")
    h.cloud.set_latency("ensure_load_balancer", 10.0)
    controller = await start(h, workers=3)
    task = asyncio.create_task(controller.run())
    await h.clock.advance(0)
    assert h.cloud.calls.count("ensure_load_balancer") == 3, "three workers, three in flight"
    await h.clock.advance(10)
    assert h.cloud.calls.count("ensure_load_balancer") == 5
    await h.clock.advance(10)
    stopping = asyncio.create_task(controller.stop(grace=30))
    await h.clock.advance(0)
    assert await asyncio.wait_for(stopping, 5)
    await asyncio.wait_for(task, 5)


async def test_node_sync_fans_out_with_the_same_parallelism(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    for i in range(4):
        await create_service(h, f"s{i}")
    controller = await start(h, workers=2)
    await ensure_all(h, controller, [f"s{i}" for i in range(4)])
    h.cloud.set_latency("update_load_balancer", 10.0)
    await create_node(h, "b")
    await h.settle()
    sync = asyncio.create_task(controller.sync_nodes())
    await h.clock.advance(0)
    assert h.cloud.calls.count("update_load_balancer") == 2
    await h.clock.advance(10)
    assert h.cloud.calls.count("update_load_balancer") == 4
    await h.clock.advance(10)
    assert await sync == set()
    assert h.metric("service_controller_nodesync_latency_seconds_sum") == 20.0
    assert (
        h.registry.get_sample_value(
            "service_controller_update_loadbalancer_host_latency_seconds_bucket", {"le": "16384.0"}
        )
        == 4
    )


async def test_latency_histograms_use_exponential_buckets_1_2_15(harness: Harness) -> None:
    await start(harness)
    bounds = [
        sample.labels["le"]
        for metric in harness.registry.collect()
        if metric.name == "service_controller_nodesync_latency_seconds"
        for sample in metric.samples
        if sample.name.endswith("_bucket")
    ]
    assert bounds == [str(float(2**i)) for i in range(15)] + ["+Inf"]


# -- issue 11.3 / 10.3: node sync only touches ensured services, coalesced, cheap ----------------


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


async def test_node_sync_leaves_services_not_yet_ensured_alone(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    controller.cache[key("s1")] = await h.service("s1")  # known, not ensured yet
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []
    assert controller.ensured == set()


async def test_nodes_arriving_while_services_are_first_ensured_never_update_them_early(
    harness: Harness,
) -> None:
    """Services exist before the controller starts; nodes register and initialise while the
    first ensures are in flight: every service is ensured before any update, no spurious
    UpdateLoadBalancerFailed, and the late nodes still reach every load balancer."""
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    names = ["s1", "s2", "s3"]
    for name in names:
        await create_service(h, name)
    h.cloud.set_latency("ensure_load_balancer", 5.0)
    controller = await start(h, workers=3)
    task = asyncio.create_task(controller.run())
    await h.clock.advance(0)
    assert h.cloud.calls.count("ensure_load_balancer") == 3, "all three ensures in flight"
    await create_node(h, "b")
    await h.settle()
    await h.kube.patch(NODES, "b", {"spec": {"providerID": "fake://b"}})
    await h.settle()
    assert "update_load_balancer" not in h.cloud.calls
    await h.clock.advance(5.0)
    for _ in range(20):
        await h.clock.advance(0)
    for name in names:
        assert calls_for(h, name) == ["ensure_load_balancer", "update_load_balancer"], name
    assert set(update_calls(h)) == {(key(n), ("a", "b")) for n in names}
    assert "UpdateLoadBalancerFailed" not in h.events.reasons()
    assert {b.hosts for b in h.cloud.balancers.values()} == {("a", "b")}
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


async def test_a_burst_of_node_events_is_one_node_sync(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    syncs, builds = controller.node_syncs, controller.backends.recomputations
    for i in range(50):
        await create_node(h, f"burst-{i:02d}")
    await h.settle()
    assert len(controller.node_queue) == 1, "fifty node events, one queued node sync"
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert controller.node_syncs - syncs == 1
    assert controller.backends.recomputations - builds == 1, "one node-set build per burst"
    assert len(update_calls(h)) == 1
    assert len(update_calls(h)[0][1]) == 51


async def test_start_up_with_existing_nodes_and_services_builds_the_node_set_once(
    harness: Harness,
) -> None:
    h = harness
    for i in range(200):
        await create_node(h, f"n{i:03d}", provider_id=f"fake://n{i:03d}")
    names = [f"s{i:02d}" for i in range(40)]
    for name in names:
        await create_service(h, name)
    controller = await start(h, workers=4)
    task = asyncio.create_task(controller.run())
    await run_until_quiet(h, controller)
    assert h.cloud.calls.count("ensure_load_balancer") == 40
    assert "update_load_balancer" not in h.cloud.calls
    assert controller.backends.recomputations == 1, "every ensure shares one node set"
    assert controller.node_syncs == 1, "the start-up burst of node adds is one node sync"
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"metadata": {"labels": {"x": "y"}}}, id="other-label"),
        pytest.param(
            {"spec": {"taints": [{"key": "example.com/t", "effect": "NoSchedule"}]}},
            id="other-taint",
        ),
        pytest.param({"metadata": {"labels": {EXCLUDE: "false"}}}, id="exclude-false"),
    ],
)
async def test_node_changes_that_keep_the_backends_cost_nothing(
    harness: Harness, change: dict[str, Any]
) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    version, builds = controller.backends.version, controller.backends.recomputations
    await h.kube.patch(NODES, "a", change)
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert h.cloud.calls == []
    assert controller.backends.version == version
    assert controller.backends.recomputations == builds
    # ... yet the next ensure is given the newest node object.
    current = controller.backends.snapshot().nodes[0]
    assert current == await h.kube.get(NODES, "a")


async def test_node_sync_gives_the_event_loop_a_turn(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    controller = await start(h)
    old = controller.backends.snapshot()
    for i in range(1000):
        name = f"s{i}"
        controller.cache[key(name)] = {
            "metadata": {"name": name, "namespace": NS},
            "spec": lb_spec(),
        }
        controller.ensured.add(key(name))
        controller.last_synced[key(name)] = old
    await create_node(h, "b")
    await create_node(h, "c")
    await h.kube.delete(NODES, "c")  # a new version, but the same backends as... not quite
    await h.kube.delete(NODES, "b")  # ... now the same backends as `old`
    await h.settle()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    assert await controller.sync_nodes() == set()
    other.cancel()
    assert h.cloud.calls == [], "same backends: no cloud call"
    assert ticks - before >= 1000 // 256, "the pass over 1000 services yields regularly"
    assert {s.version for s in controller.last_synced.values()} == {controller.backends.version}


# -- issue 13.3: addresses arriving after initialisation reach the load balancers ---------------


async def test_addresses_arriving_after_initialisation_resync_backends(harness: Harness) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    seen: list[list[Any]] = []
    original = h.cloud.update_load_balancer

    async def spy(cluster: str, service: Obj, nodes: Any) -> None:
        seen.append([(n["metadata"]["name"], n.get("status", {}).get("addresses")) for n in nodes])
        await original(cluster, service, nodes)

    h.cloud.update_load_balancer = spy  # type: ignore[method-assign]
    # A node registers without addresses; the cloud-node controller sets its providerID,
    # then patches its addresses.
    await create_node(h, "b")
    await h.settle()
    await h.kube.patch(NODES, "b", {"spec": {"providerID": "fake://b"}})
    await h.settle()
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert seen[-1] == [("a", None), ("b", None)]
    address = [{"type": "InternalIP", "address": "10.0.0.2"}]
    await h.kube.patch(NODES, "b", {"status": {"addresses": address}}, subresource="status")
    await h.settle()
    assert len(controller.node_queue) == 1
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert seen[-1] == [("a", None), ("b", address)]


# -- issue 16: every start ensures; economy is the provider's read-compare-write ---------------

LEGACY_HASH = "service.kccm.io/load-balancer-spec-hash"
"""The annotation kccm wrote up to issue 16: never written now, removed with the next write."""


async def restart(h: Harness) -> ServiceController:
    """A new controller process: fresh informers and caches, the same apiserver and cloud."""
    await h.factory.stop()
    h.factory = SharedInformerFactory(h.kube, clock=h.clock)
    h.cloud.clear_calls()
    h.events.recorded.clear()
    h.kube.patches.clear()
    return await start(h)


def kccm_marks(obj: Obj) -> list[str]:
    """Annotations and labels of kccm's own on ``obj`` (none may be left)."""
    meta = obj.get("metadata") or {}
    keys = [*(meta.get("annotations") or {}), *(meta.get("labels") or {})]
    return [k for k in keys if "kccm.io" in k]


async def first_run(h: Harness, names: list[str]) -> ServiceController:
    await create_node(h, "a", provider_id="fake://a")
    await create_node(h, "b", provider_id="fake://b")
    for name in names:
        await create_service(h, name)
    controller = await start(h)
    await ensure_all(h, controller, names)
    return controller


def writes_since(h: Harness, before: APICallCounts) -> dict[str, int]:
    return dict(h.cloud.cloud_api_calls().snapshot().since(before).writes)


async def test_ensure_writes_nothing_of_kccms_own_on_the_service(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    controller = await start(h)
    await controller.sync_service(key("s1"))
    assert [p.body for p in h.kube.patches] == [
        {"metadata": {"finalizers": [FINALIZER_LB_CLEANUP]}},
        {"status": {"loadBalancer": {"ingress": fake_ingress()}}},
    ]
    assert kccm_marks(await h.service("s1")) == []


async def test_restart_ensures_every_balancer_with_upstreams_events_and_no_cloud_write(
    harness: Harness,
) -> None:
    """Upstream ensures every Service on start; the fake's read-compare-write makes that
    cost reads only, and nothing is written to the apiserver either."""
    h = harness
    names = ["s1", "s2", "s3"]
    await first_run(h, names)
    controller = await restart(h)
    before = h.cloud.cloud_api_calls().snapshot()
    task = asyncio.create_task(controller.run())
    await run_until_quiet(h, controller)
    assert sorted(h.cloud.calls) == ["ensure_load_balancer"] * 3
    assert writes_since(h, before) == {}
    assert h.kube.patches == [], "status and finalizer are unchanged: nothing to write"
    assert sorted(h.events.reasons()) == sorted(ENSURED * 3)
    assert controller.ensured == {key(n) for n in names}
    # Those services are now ensured by this process: node changes reach them.
    await create_node(h, "c", provider_id="fake://c")
    await run_until_quiet(h, controller)
    assert sorted(update_calls(h)) == [(key(n), ("a", "b", "c")) for n in names]
    assert await controller.stop(grace=1.0)
    await asyncio.wait_for(task, 5)


def _balancer(h: Harness) -> FakeBalancer:
    (balancer,) = h.cloud.balancers.values()
    return balancer


async def _lose_the_balancer(h: Harness) -> None:
    h.cloud.remove_balancer(_balancer(h).name)


async def _tamper_ports(h: Harness) -> None:
    h.cloud.alter_balancer(_balancer(h).name, ports=())


async def _tamper_hosts(h: Harness) -> None:
    h.cloud.alter_balancer(_balancer(h).name, hosts=("a",))


async def _change_the_cloud_config(h: Harness) -> None:
    h.cloud.load_balancer_ip_mode = LoadBalancerIPMode.PROXY


async def _annotate(h: Harness) -> None:
    await h.kube.patch(SERVICES, "s1", {"metadata": {"annotations": {"x": "1"}}}, namespace=NS)


async def _change_ports(h: Harness) -> None:
    ports = [{"name": "p", "protocol": "TCP", "port": 8080, "targetPort": 80}]
    await h.kube.patch(SERVICES, "s1", {"spec": {"ports": ports}}, namespace=NS)


async def _add_node(h: Harness) -> None:
    await create_node(h, "c", provider_id="fake://c")


async def _nothing(h: Harness) -> None:
    return None


@pytest.mark.parametrize(
    ("while_down", "writes"),
    [
        pytest.param(_nothing, {}, id="nothing-changed-no-cloud-write"),
        pytest.param(_annotate, {}, id="annotation-changed-same-balancer-no-write"),
        pytest.param(
            _lose_the_balancer, {"create_load_balancer": 1}, id="deleted-balancer-re-created"
        ),
        pytest.param(_tamper_ports, {"set_load_balancer_ports": 1}, id="drifted-ports-repaired"),
        pytest.param(_tamper_hosts, {"set_load_balancer_hosts": 1}, id="drifted-hosts-repaired"),
        pytest.param(
            _change_the_cloud_config,
            {"set_load_balancer_ip_mode": 1},
            id="changed-cloud-config-applied",
        ),
        pytest.param(_change_ports, {"set_load_balancer_ports": 1}, id="ports-changed-written"),
        pytest.param(_add_node, {"set_load_balancer_hosts": 1}, id="node-added-written"),
    ],
)
async def test_restart_repairs_what_changed_while_kccm_was_down(
    harness: Harness,
    while_down: Callable[[Harness], Awaitable[None]],
    writes: dict[str, int],
) -> None:
    h = harness
    await first_run(h, ["s1"])
    await while_down(h)
    controller = await restart(h)
    before = h.cloud.cloud_api_calls().snapshot()
    await controller.sync_service(key("s1"))
    assert h.cloud.calls == ["ensure_load_balancer"]
    assert h.events.reasons() == ENSURED
    assert writes_since(h, before) == writes
    service = await h.service("s1")
    balancer = _balancer(h)
    assert [p.port for p in balancer.ports] == [p["port"] for p in service["spec"]["ports"]]
    assert balancer.hosts == tuple(sorted(controller.backends.snapshot().identities))
    assert balancer.ip_mode == h.cloud.load_balancer_ip_mode
    ingress = service["status"]["loadBalancer"]["ingress"]
    assert ingress[0]["ipMode"] == balancer.ip_mode.value, "the status follows the balancer"


async def _status_changes(h: Harness) -> None:
    h.cloud.remove_balancer(_balancer(h).name)  # re-created with a new address


async def _type_changes(h: Harness) -> None:
    await h.kube.patch(SERVICES, "s1", {"spec": {"type": "ClusterIP"}}, namespace=NS)


@pytest.mark.parametrize(
    ("change", "patches"),
    [
        pytest.param(_nothing, 0, id="no-write-due-the-leftover-stays"),
        pytest.param(_status_changes, 1, id="removed-with-the-status-patch"),
        pytest.param(_type_changes, 2, id="removed-with-the-finalizer-and-status-patches"),
    ],
)
async def test_a_leftover_spec_hash_goes_with_the_next_write_kccm_makes_anyway(
    harness: Harness, change: Callable[[Harness], Awaitable[None]], patches: int
) -> None:
    h = harness
    await first_run(h, ["s1"])
    leftover = {"metadata": {"annotations": {LEGACY_HASH: "v1-0123"}}}
    await h.kube.patch(SERVICES, "s1", leftover, namespace=NS)
    await change(h)
    controller = await restart(h)
    assert await controller.service_queue.get() == key("s1"), "the start-up add"
    controller.service_queue.done(key("s1"))
    await controller.sync_service(key("s1"))
    assert all(
        LEGACY_HASH in p.body["metadata"]["annotations"]
        for p in h.kube.patches
        if "metadata" in p.body
    )
    assert len(h.kube.patches) == patches, "never a write of its own"
    annotations = (await h.service("s1"))["metadata"].get("annotations") or {}
    assert (LEGACY_HASH not in annotations) is (patches > 0)
    await h.settle()
    assert len(controller.service_queue) == 0, "removing the leftover is no reason to sync"


async def test_a_leftover_spec_hash_rides_on_the_finalizer_patch(harness: Harness) -> None:
    h = harness
    await create_node(h, "a")
    await create_service(h, "s1")
    leftover = {"metadata": {"annotations": {LEGACY_HASH: "v1-0123", "keep": "me"}}}
    await h.kube.patch(SERVICES, "s1", leftover, namespace=NS)
    controller = await start(h)
    h.kube.patches.clear()
    await controller.sync_service(key("s1"))
    assert h.kube.patches[0].body == {
        "metadata": {"finalizers": [FINALIZER_LB_CLEANUP], "annotations": {LEGACY_HASH: None}}
    }
    annotations = (await h.service("s1"))["metadata"]["annotations"]
    assert annotations == {"keep": "me"}


async def test_node_sync_writes_nothing_to_the_service(harness: Harness) -> None:
    h = harness
    controller = await first_run(h, ["s1"])
    h.kube.patches.clear()
    await create_node(h, "c", provider_id="fake://c")
    await h.settle()
    assert await controller.sync_nodes() == set()
    assert update_calls(h) == [(key("s1"), ("a", "b", "c"))]
    assert h.kube.patches == []
    # A failed update leaves the balancer's state unknown: the service goes for a full ensure.
    h.cloud.fail("update_load_balancer", FakeCloudError("busy"))
    await create_node(h, "d", provider_id="fake://d")
    await h.settle()
    assert await controller.sync_nodes() == {key("s1")}
    assert h.kube.patches == []


async def test_a_node_change_during_the_start_up_ensure_still_reaches_the_balancer(
    harness: Harness,
) -> None:
    h = harness
    await first_run(h, ["s1"])
    controller = await restart(h)
    h.cloud.set_latency("ensure_load_balancer", 5.0)
    sync = asyncio.create_task(controller.sync_service(key("s1")))
    await h.clock.advance(0)
    await create_node(h, "c", provider_id="fake://c")  # arrives while the ensure is in flight
    await h.settle()
    await h.clock.advance(5.0)
    await sync
    assert h.cloud.calls == ["ensure_load_balancer"]
    assert len(controller.node_queue) == 1, "the balancer has {a, b}: a node sync follows"
    while len(controller.node_queue):
        await controller._node_loop.process_next()
    assert update_calls(h) == [(key("s1"), ("a", "b", "c"))]


# -- a failed ensure: node syncs leave the service alone until a retry ensures ----------------

EXTRA_PORT = {"name": "q", "protocol": "TCP", "port": 81, "targetPort": 81}


async def _fail_ensure_of_a_new_port(h: Harness, controller: ServiceController) -> None:
    ports = [*lb_spec()["ports"], EXTRA_PORT]
    await h.kube.patch(SERVICES, "s1", {"spec": {"ports": ports}}, namespace=NS)
    await h.settle()
    h.cloud.fail("ensure_load_balancer", FakeCloudError("half-applied"), times=1)
    with pytest.raises(ServiceSyncError):
        await controller.sync_service(key("s1"))


async def _node_joins(h: Harness, controller: ServiceController) -> None:
    await create_node(h, "late", provider_id="fake://late")
    await h.settle()
    await controller.sync_nodes()


async def _spec_reverted(h: Harness, controller: ServiceController) -> None:
    patch = {"spec": {"ports": lb_spec()["ports"]}}
    await h.kube.patch(SERVICES, "s1", patch, namespace=NS, patch_type=PatchType.MERGE)
    await h.settle()


@pytest.mark.parametrize(
    "then",
    [
        pytest.param(_node_joins, id="a-node-sync-cannot-stand-for-the-failed-ensure"),
        pytest.param(_spec_reverted, id="reverting-the-spec-still-ensures"),
    ],
)
async def test_after_a_failed_ensure_the_retry_really_ensures(
    then: Callable[[Harness, ServiceController], Awaitable[None]], harness: Harness
) -> None:
    controller = await first_run(harness, ["s1"])
    await _fail_ensure_of_a_new_port(harness, controller)
    assert key("s1") not in controller.ensured, "node syncs leave it alone"
    await then(harness, controller)
    assert "update_load_balancer" not in harness.cloud.calls
    harness.cloud.clear_calls()
    await controller.sync_service(key("s1"))
    assert "ensure_load_balancer" in harness.cloud.calls
    assert key("s1") in controller.ensured


async def test_a_load_balancer_implemented_elsewhere_is_not_node_synced(
    harness: Harness,
) -> None:
    h = harness
    await create_node(h, "a", provider_id="fake://a")
    await create_service(h, "s1")
    h.cloud.fail("ensure_load_balancer", ImplementedElsewhere())
    controller = await start(h)
    await ensure_all(h, controller, ["s1"])
    assert key("s1") not in controller.ensured
    await _node_joins(h, controller)
    assert "update_load_balancer" not in h.cloud.calls
    assert kccm_marks(await h.service("s1")) == []
