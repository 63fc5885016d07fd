"""service-lb-controller on the in-memory kube fake and the fake provider, mirroring upstream's
controller_test.go TestSyncLoadBalancerIfNeeded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from service_harness import (
    ENSURED,
    NS,
    Harness,
    _gone,
    create_node,
    create_service,
    fake_ingress,
    key,
    lb_spec,
    start,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.controllers.service import (
    LoadBalancerOperation,
    ServiceSyncError,
)
from kccm.kube.interface import PatchType
from kccm.kube.resources import SERVICES
from kccm.providers.fake import FakeCloudError

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
