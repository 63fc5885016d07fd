"""Shared balancers in the service controller (service_sharing.py): a provider without the
capability is named in a Warning and makes nothing; with it (local), a group's Services get one
VIP, a clash is refused naming the first Service, and the refused one is queued again once the
first one is gone."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_harness import Harness, create_node, create_service, key, lb_spec, start

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP
from kccm.controllers.service import ServiceSyncError
from kccm.kube.resources import SERVICES
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import LocalStore

NS = "default"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    opened = LocalStore(tmp_path / "state.db")
    yield opened
    opened.close()


def shared_spec(port: int, node_port: int) -> dict[str, Any]:
    spec = lb_spec()
    spec["ports"][0].update(port=port, nodePort=node_port)
    return spec


async def annotate(h: Harness, name: str, group: str = "web") -> None:
    await h.kube.patch(
        SERVICES,
        name,
        {"metadata": {"annotations": {ANNOTATION_SHARE_GROUP: group}}},
        namespace=NS,
    )


async def ingress(h: Harness, name: str) -> list[Any]:
    svc = await h.service(name)
    return list(((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ())


async def test_a_provider_without_sharing_is_named_and_makes_nothing(harness: Harness) -> None:
    h = harness
    await create_service(h, "svc")
    await annotate(h, "svc")
    controller = await start(h)
    await h.settle()
    with pytest.raises(ServiceSyncError, match=f"{ANNOTATION_SHARE_GROUP} is not supported"):
        await controller.sync_service(key("svc"))
    assert "EnsuredLoadBalancer" not in h.events.reasons()
    warnings = [r for r in h.events.recorded if r[0] == "Warning"]
    assert warnings, h.events.recorded
    assert ANNOTATION_SHARE_GROUP in warnings[-1][2]
    assert "provider fake" in warnings[-1][2]
    assert not [c for c in h.cloud.call_log if c.method == "ensure_load_balancer"]
    assert await ingress(h, "svc") == []


async def test_one_vip_a_clash_refused_and_retried_when_the_first_goes(
    harness: Harness, store: LocalStore
) -> None:
    h = harness
    h.cloud = LocalCloud(store, load_local_config(io.StringIO("")))  # type: ignore[assignment]
    await create_node(h, "node-a")
    for name, port, node_port in (("a", 80, 30080), ("b", 443, 30443), ("c", 80, 30081)):
        await create_service(h, name, spec=shared_spec(port, node_port))
        await annotate(h, name)
    controller = await start(h)
    await h.settle()
    for name in ("a", "b"):
        await controller.sync_service(key(name))
    with pytest.raises(Exception, match=f"port 80/TCP is already served by {NS}/a"):
        await controller.sync_load_balancer_if_needed(await h.service("c"), key("c"))
    (a,), (b,) = await ingress(h, "a"), await ingress(h, "b")
    assert a["ip"] == b["ip"]
    assert await ingress(h, "c") == []
    assert [(c.ip, c.owner) for c in store.list_ip_claims()] == [(a["ip"], f"share:{NS}/web")]

    while len(controller.service_queue):  # what the syncs above queued
        controller.service_queue.done(await controller.service_queue.get())
    await h.kube.patch(
        SERVICES, "a", {"metadata": {"finalizers": [FINALIZER_LB_CLEANUP]}}, namespace=NS
    )
    gone = await h.kube.delete(SERVICES, "a", namespace=NS)
    assert gone is not None
    await controller.sync_load_balancer_if_needed(gone, key("a"))
    queued = []
    while len(controller.service_queue):
        item = await controller.service_queue.get()
        queued.append(item)
        controller.service_queue.done(item)
    assert key("c") in queued, "the refused Service is synced again once the first is gone"
    assert sorted(lb.service for lb in store.list_load_balancers()) == [f"{NS}/b"]
    assert [c.owner for c in store.list_ip_claims()] == [f"share:{NS}/web"], "b still uses it"
