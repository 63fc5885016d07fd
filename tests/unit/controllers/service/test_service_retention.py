"""Address retention in the service controller's release path (service_retention.py): the
annotation or the flag asks, a capable provider keeps the address, an incapable one is named
in a Warning Event and upstream's delete happens; nothing asked, nothing changes."""

from __future__ import annotations

import inspect
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from service_harness import Harness, create_node, create_service, key, lb_spec, start

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS
from kccm.controllers.service import ServiceSyncError
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import LocalStore


@dataclass(frozen=True)
class Case:
    annotation: str | None
    flag: bool
    local: bool
    """The local provider (keeps addresses) rather than the fake (cannot)."""
    reasons: tuple[str, ...]
    kept: bool


DELETED = ("DeletingLoadBalancer", "DeletedLoadBalancer")
KEPT = ("DeletingLoadBalancer", "RetainedAddress", "DeletedLoadBalancer")
WARNED = ("DeletingLoadBalancer", "AddressRetentionUnsupported", "DeletedLoadBalancer")

CASES = {
    "nothing-asked-local": Case(None, False, True, DELETED, False),
    "nothing-asked-fake": Case(None, False, False, DELETED, False),
    "annotation-local-keeps": Case("true", False, True, KEPT, True),
    "flag-local-keeps": Case(None, True, True, KEPT, True),
    "annotation-false-beats-flag": Case("false", True, True, DELETED, False),
    "annotation-fake-warns-and-deletes": Case("true", False, False, WARNED, False),
    "flag-fake-warns-and-deletes": Case(None, True, False, WARNED, False),
}


async def settled(result: Any) -> Any:
    """A provider method's result, sync (local) or async (fake)."""
    return await result if inspect.isawaitable(result) else result


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    opened = LocalStore(tmp_path / "state.db")
    yield opened
    opened.close()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_release_keeps_the_address_only_when_asked_and_never_silently_drops_it(
    harness: Harness, store: LocalStore, case: Case
) -> None:
    h = harness
    if case.local:
        h.cloud = LocalCloud(store, load_local_config(io.StringIO("")))  # type: ignore[assignment]
    await create_node(h, "node-a")
    spec = lb_spec()
    spec["ports"][0]["nodePort"] = 30080
    svc = await create_service(h, spec=spec, finalizers=[FINALIZER_LB_CLEANUP], deleting=True)
    if case.annotation is not None:
        svc["metadata"]["annotations"] = {ANNOTATION_RETAIN_ADDRESS: case.annotation}
    status = await settled(h.cloud.ensure_load_balancer("kubernetes", svc, []))
    controller = await start(h, retain=case.flag)
    await controller.sync_load_balancer_if_needed(svc, key())
    assert tuple(h.events.reasons()) == case.reasons
    if case.reasons == WARNED:
        message = h.events.recorded[1][2]
        assert "provider fake" in message
        assert (
            ANNOTATION_RETAIN_ADDRESS if case.annotation else "--default-retain-address"
        ) in message
    if case.local:
        kept = [c.ip for c in store.list_ip_claims() if c.retain]
        assert kept == ([status.ingress[0].ip] if case.kept else [])
        assert store.list_load_balancers() == []
    else:
        assert (await settled(h.cloud.get_load_balancer("kubernetes", svc)))[1] is False


async def test_a_bad_annotation_refuses_the_release(harness: Harness) -> None:
    """kccm's own annotation refuses a value it cannot read: the address is never lost to a
    typo (the release fails with the annotation named, and is retried)."""
    h = harness
    svc = await create_service(h, finalizers=[FINALIZER_LB_CLEANUP], deleting=True)
    svc["metadata"]["annotations"] = {ANNOTATION_RETAIN_ADDRESS: "maybe"}
    await settled(h.cloud.ensure_load_balancer("kubernetes", svc, []))
    controller = await start(h)
    with pytest.raises(ServiceSyncError, match=ANNOTATION_RETAIN_ADDRESS):
        await controller.sync_load_balancer_if_needed(svc, key())
    assert (await settled(h.cloud.get_load_balancer("kubernetes", svc)))[1] is True
