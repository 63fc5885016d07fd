"""pv-label-controller on the fake provider and FakeKube: labels once, never overwriting."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.api.wellknown import ANNOTATION_PV_LABELED, LABEL_REGION, LABEL_ZONE
from kccm.cloudprovider.errors import DiskNotFound
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import pvlabel
from kccm.controllers.base import ControllerContext
from kccm.kube.fake import FakeKube
from kccm.kube.resources import PERSISTENT_VOLUMES
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

ZONE_LABELS = {LABEL_ZONE: "fake-zone-a", LABEL_REGION: "fake-region"}


class NoLabelerCloud(FakeCloud):
    """A provider without the optional PVLabeler interface."""

    get_labels_for_volume = None  # type: ignore[assignment]


def pv(name: str, *, labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}, **meta},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "disk.fake", "volumeHandle": f"vol-{name}"},
        },
    }


class Env:
    def __init__(self, cloud: FakeCloud | None = None) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube()
        self.registry = CollectorRegistry()
        self.cloud = cloud or FakeCloud(clock=self.clock)
        self.gate = CallGate(registry=self.registry, clock=self.clock)
        self.informers = SharedInformerFactory(self.kube, clock=self.clock)
        self.context = ControllerContext(
            kube=self.kube,
            informers=self.informers,
            cloud=GatedCloud(self.cloud, self.gate),
            events=EventBroadcaster(self.kube, clock=self.clock),
            registry=self.registry,
            clock=self.clock,
        )

    def controller(self) -> pvlabel.PVLabelController:
        built = pvlabel.build(self.context)
        assert built is not None
        return built

    async def synced(self) -> pvlabel.PVLabelController:
        rc = self.controller()
        self.informers.start()
        await self.informers.wait_for_sync()
        return rc

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    async def stored(self, name: str) -> dict[str, Any]:
        return await self.kube.get(PERSISTENT_VOLUMES, name)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    made = Env()
    yield made
    await made.informers.stop()
    made.gate.close()


def test_off_by_default_and_upstream_style_names() -> None:
    assert pvlabel.ENABLED_BY_DEFAULT is False
    assert pvlabel.CONTROLLER_NAME == "pv-label-controller"
    assert pvlabel.CONTROLLER_NAME.endswith("-controller")


async def test_build_skips_without_a_pv_labeler(caplog: pytest.LogCaptureFixture) -> None:
    env = Env(NoLabelerCloud())
    with caplog.at_level(logging.WARNING, logger="kccm.controllers.pvlabel"):
        assert pvlabel.build(env.context) is None
    assert "no PV labeler" in caplog.text
    env.gate.close()


@pytest.mark.parametrize(
    ("user_labels", "provider_labels", "expected_labels"),
    [
        pytest.param({}, ZONE_LABELS, ZONE_LABELS, id="supported-volume-gets-zone-and-region"),
        pytest.param(
            {LABEL_ZONE: "user-zone", "team": "a"},
            ZONE_LABELS,
            {LABEL_ZONE: "user-zone", "team": "a", LABEL_REGION: "fake-region"},
            id="user-labels-are-never-overwritten",
        ),
        pytest.param({"team": "a"}, {}, {"team": "a"}, id="unsupported-source-only-marked-done"),
    ],
)
async def test_sync_labels_once(
    env: Env,
    user_labels: dict[str, str],
    provider_labels: dict[str, str],
    expected_labels: dict[str, str],
) -> None:
    env.cloud.volume_labels["pv-1"] = dict(provider_labels)
    await env.kube.create(PERSISTENT_VOLUMES, pv("pv-1", labels=user_labels))
    rc = await env.synced()
    await rc.sync("pv-1")
    got = await env.stored("pv-1")
    assert got["metadata"]["labels"] == expected_labels
    assert got["metadata"]["annotations"] == {ANNOTATION_PV_LABELED: "true"}
    assert env.cloud.calls == ["get_labels_for_volume"]
    await env.settle()  # the informer sees the annotation: a second sync costs nothing
    env.cloud.volume_labels["pv-1"] = {LABEL_ZONE: "moved"}
    await rc.sync("pv-1")
    assert env.cloud.calls == ["get_labels_for_volume"]
    assert (await env.stored("pv-1"))["metadata"]["labels"] == expected_labels


async def test_already_marked_volume_costs_no_call(env: Env) -> None:
    await env.kube.create(
        PERSISTENT_VOLUMES, pv("pv-1", annotations={ANNOTATION_PV_LABELED: "true"})
    )
    rc = await env.synced()
    env.kube.requests.clear()
    await rc.sync("pv-1")
    assert env.cloud.calls == []
    assert env.kube.requests == []
    assert len(rc.queue) == 0  # not even queued by the informer


async def test_volume_being_deleted_is_skipped(env: Env) -> None:
    await env.kube.create(
        PERSISTENT_VOLUMES, pv("pv-1", finalizers=["kubernetes.io/pv-protection"])
    )
    await env.kube.delete(PERSISTENT_VOLUMES, "pv-1")
    rc = await env.synced()
    await rc.sync("pv-1")
    assert env.cloud.calls == []


async def test_provider_error_leaves_volume_unmarked_and_raises(env: Env) -> None:
    env.cloud.fail("get_labels_for_volume", DiskNotFound())
    await env.kube.create(PERSISTENT_VOLUMES, pv("pv-1"))
    rc = await env.synced()
    with pytest.raises(DiskNotFound):
        await rc.sync("pv-1")
    assert "annotations" not in (await env.stored("pv-1"))["metadata"]


async def test_run_labels_new_volumes_and_retries_failures(env: Env) -> None:
    env.cloud.volume_labels["pv-a"] = dict(ZONE_LABELS)
    env.cloud.volume_labels["pv-b"] = dict(ZONE_LABELS)
    env.cloud.fail("get_labels_for_volume", DiskNotFound(), times=1)
    await env.kube.create(PERSISTENT_VOLUMES, pv("pv-a"))
    rc = env.controller()
    env.informers.start()
    run = asyncio.create_task(rc.run())
    await env.settle()
    await env.kube.create(PERSISTENT_VOLUMES, pv("pv-b"))
    await env.clock.advance(1.0)  # the failed one comes back after its backoff
    await env.settle()
    for name in ("pv-a", "pv-b"):
        got = await env.stored(name)
        assert got["metadata"]["labels"] == ZONE_LABELS
    assert env.cloud.calls.count("get_labels_for_volume") == 3
    running = {"name": "pv-label", "manager": "cloud-controller-manager"}
    assert env.registry.get_sample_value("running_managed_controllers", running) == 1
    await rc.stop(1.0)
    await run
    assert env.registry.get_sample_value("running_managed_controllers", running) == 0
