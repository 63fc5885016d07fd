"""The provider's warnings about a Service become Warning Events on it (servicewarnings.py):
through the call gate and the thread pool, on success and on failure, for ensure, update and
delete, before the controller's own Event for the call."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from service_harness import Harness, create_node, create_service, key, lb_spec, start

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.annotations import OnInvalid, annotations_of, bool_annotation
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.controllers.service import ServiceSyncError
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import LocalStore

ANNOTATION = "example.com/flag"


def warning_first(
    real: Callable[..., Awaitable[Any]], *, fail: bool = False
) -> Callable[..., Awaitable[Any]]:
    """A plain ``def`` (so the call gate runs it in its thread pool) that warns, then calls
    the fake's own method (or fails)."""

    def method(*args: Any) -> Awaitable[Any]:
        warn_service("SomethingIgnored", "the provider ignored something")
        if fail:
            raise RuntimeError("cloud down")
        return real(*args)

    return method


@pytest.mark.parametrize("fail", [False, True], ids=["succeeds", "fails"])
async def test_ensure_warnings_are_events_before_the_outcome(harness: Harness, fail: bool) -> None:
    h = harness
    await create_node(h, "node-a")
    svc = await create_service(h)
    h.cloud.ensure_load_balancer = warning_first(h.cloud.ensure_load_balancer, fail=fail)  # type: ignore[method-assign]
    controller = await start(h)
    if fail:
        with pytest.raises(ServiceSyncError):
            await controller.process_service_create_or_update(svc, key())
    else:
        await controller.process_service_create_or_update(svc, key())
    outcome = "SyncLoadBalancerFailed" if fail else "EnsuredLoadBalancer"
    assert h.events.reasons() == ["EnsuringLoadBalancer", "SomethingIgnored", outcome]
    warning = h.events.recorded[1]
    assert warning[:4] == (
        "Warning",
        "SomethingIgnored",
        "the provider ignored something",
        "Service/svc",
    )


async def test_update_warnings_are_events(harness: Harness) -> None:
    h = harness
    node = await create_node(h, "node-a")
    svc = await create_service(h)
    controller = await start(h)
    await controller.process_service_create_or_update(svc, key())
    h.cloud.update_load_balancer = warning_first(h.cloud.update_load_balancer)  # type: ignore[method-assign]
    await controller.locked_update_load_balancer_hosts(svc, [node])
    assert h.events.reasons()[-2:] == ["SomethingIgnored", "UpdatedLoadBalancer"]


async def test_delete_warnings_are_events(harness: Harness) -> None:
    h = harness
    svc = await create_service(h, finalizers=[FINALIZER_LB_CLEANUP], deleting=True)
    await h.cloud.ensure_load_balancer("kubernetes", svc, [])
    h.cloud.ensure_load_balancer_deleted = warning_first(h.cloud.ensure_load_balancer_deleted)  # type: ignore[method-assign]
    controller = await start(h)
    await controller.sync_load_balancer_if_needed(svc, key())
    assert h.events.reasons() == ["DeletingLoadBalancer", "SomethingIgnored", "DeletedLoadBalancer"]


@pytest.mark.parametrize(
    ("on_invalid", "reasons"),
    [
        pytest.param(
            OnInvalid.REFUSE, ["EnsuringLoadBalancer", "SyncLoadBalancerFailed"], id="refuse"
        ),
        pytest.param(
            OnInvalid.FALLBACK,
            ["EnsuringLoadBalancer", "InvalidAnnotation", "EnsuredLoadBalancer"],
            id="fallback",
        ),
    ],
)
async def test_a_bad_annotation_is_a_warning_never_a_silent_ensure(
    harness: Harness, on_invalid: OnInvalid, reasons: list[str]
) -> None:
    h = harness
    await create_node(h, "node-a")
    svc = await create_service(h)
    svc["metadata"]["annotations"] = {ANNOTATION: "maybe"}
    real = h.cloud.ensure_load_balancer

    async def reading(cluster: str, service: Any, nodes: Any) -> Any:
        bool_annotation(annotations_of(service), ANNOTATION, False, on_invalid=on_invalid)
        return await real(cluster, service, nodes)

    h.cloud.ensure_load_balancer = reading  # type: ignore[method-assign]
    controller = await start(h)
    try:
        await controller.process_service_create_or_update(svc, key())
    except ServiceSyncError:
        assert on_invalid is OnInvalid.REFUSE
    assert h.events.reasons() == reasons
    message = h.events.recorded[1][2]
    assert ANNOTATION in message
    assert '"maybe"' in message


async def test_local_retain_ip_maybe_is_a_warning_and_no_ensured_balancer(
    harness: Harness, tmp_path: Path
) -> None:
    """The operator's slip (issue 36): ``local.kccm.io/retain-ip: "maybe"`` was read as false
    and the Service got a Normal EnsuredLoadBalancer."""
    h = harness
    store = LocalStore(tmp_path / "state.db")
    try:
        h.cloud = LocalCloud(store, load_local_config(io.StringIO("")))  # type: ignore[assignment]
        await create_node(h, "node-a")
        spec = lb_spec()
        spec["ports"][0]["nodePort"] = 30080
        svc = await create_service(h, spec=spec)
        svc["metadata"]["annotations"] = {"local.kccm.io/retain-ip": "maybe"}
        controller = await start(h)
        with contextlib.suppress(ServiceSyncError):
            await controller.process_service_create_or_update(svc, key())
    finally:
        store.close()
    assert h.events.reasons() == ["EnsuringLoadBalancer", "SyncLoadBalancerFailed"]
    kind, _, message, *_ = h.events.recorded[-1]
    assert kind == "Warning"
    assert 'local.kccm.io/retain-ip: invalid value "maybe"' in message
