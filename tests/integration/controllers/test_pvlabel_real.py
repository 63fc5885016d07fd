"""pv-label-controller against the real apiserver: a hostPath PV the fake labeler knows gets
zone/region labels (a user's label kept) and the done annotation; one it does not know is only
marked done."""

from __future__ import annotations

from typing import Any

from kccm.api.wellknown import ANNOTATION_PV_LABELED, LABEL_REGION, LABEL_ZONE
from kccm.controllers import pvlabel
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import PERSISTENT_VOLUMES
from kccm.providers.fake import FakeCloud
from kccm.testing.controllers import eventually
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name


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


async def test_pv_gets_provider_labels_once(
    kube: KubeApiClient, kube_cleanup: KubeCleanup, controller_runs: OpenControllerRun
) -> None:
    labelled = kube_cleanup.add(PERSISTENT_VOLUMES, unique_name("pv"))
    unknown = kube_cleanup.add(PERSISTENT_VOLUMES, unique_name("pv"))
    cloud = FakeCloud()
    cloud.volume_labels[labelled] = {LABEL_ZONE: "fake-zone-a", LABEL_REGION: "fake-region"}
    run = await controller_runs(cloud)
    controller = pvlabel.build(run.context)
    assert controller is not None
    run.start(controller)
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
