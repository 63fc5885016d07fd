"""pv-label-controller against the real apiserver: a hostPath PV the fake labeler knows gets
zone/region labels (a user's label kept) and the done annotation; one it does not know is only
marked done."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from kccm.api.wellknown import ANNOTATION_PV_LABELED, LABEL_REGION, LABEL_ZONE
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import pvlabel
from kccm.controllers.base import ControllerContext
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import PERSISTENT_VOLUMES
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

T = TypeVar("T")


def host_path_pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/tmp/{name}"},
        },
    }


async def eventually(probe: Callable[[], Awaitable[T | None]], within: float = 20.0) -> T:
    async with asyncio.timeout(within):
        while True:
            result = await probe()
            if result:
                return result
            await asyncio.sleep(0.05)


async def test_pv_gets_provider_labels_once(kube: KubeApiClient, kube_cleanup: KubeCleanup) -> None:
    labelled = kube_cleanup.add(PERSISTENT_VOLUMES, unique_name("pv"))
    unknown = kube_cleanup.add(PERSISTENT_VOLUMES, unique_name("pv"))
    cloud = FakeCloud()
    cloud.volume_labels[labelled] = {LABEL_ZONE: "fake-zone-a", LABEL_REGION: "fake-region"}
    registry = CollectorRegistry()
    gate = CallGate(registry=registry)
    informers = SharedInformerFactory(kube)
    context = ControllerContext(
        kube=kube,
        informers=informers,
        cloud=GatedCloud(cloud, gate),
        events=EventBroadcaster(kube),
        registry=registry,
    )
    controller = pvlabel.build(context)
    assert controller is not None
    informers.start()
    task = asyncio.create_task(controller.run())
    try:
        await kube.create(PERSISTENT_VOLUMES, host_path_pv(labelled, {LABEL_ZONE: "user-zone"}))
        await kube.create(PERSISTENT_VOLUMES, host_path_pv(unknown, {"team": "a"}))

        async def done(name: str) -> dict[str, Any] | None:
            got = await kube.get(PERSISTENT_VOLUMES, name)
            annotations = got["metadata"].get("annotations") or {}
            return got if annotations.get(ANNOTATION_PV_LABELED) == "true" else None

        got = await eventually(lambda: done(labelled))
        assert got["metadata"]["labels"] == {LABEL_ZONE: "user-zone", LABEL_REGION: "fake-region"}
        other = await eventually(lambda: done(unknown))
        assert other["metadata"]["labels"] == {"team": "a"}

        await kube.patch(PERSISTENT_VOLUMES, labelled, {"metadata": {"labels": {"x": "y"}}})
        calls = cloud.calls.count("get_labels_for_volume")
        assert calls == 2

        async def seen_update() -> bool:
            cached = controller.volumes.get(labelled)
            return bool(cached and cached["metadata"]["labels"].get("x") == "y")

        assert await eventually(seen_update)
        assert cloud.calls.count("get_labels_for_volume") == 2  # done means done
    finally:
        await controller.stop(5.0)
        await task
        await informers.stop()
        gate.close()
