"""service-lb-controller, mirroring upstream's controller_test.go: finalizers,
TestProcessServiceCreateOrUpdate(K8sError), TestSyncService, TestProcessServiceDeletion,
TestAdd/RemoveFinalizer, TestPatchStatus."""

from __future__ import annotations

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
from kccm.cloudprovider.errors import RetryError
from kccm.controllers.service import (
    ServiceSyncError,
)
from kccm.kube.errors import Conflict, KubeError, NotFound
from kccm.kube.interface import Obj
from kccm.kube.resources import SERVICES
from kccm.providers.fake import FakeCloudError


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
