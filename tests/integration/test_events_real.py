"""Event correlation against the real apiserver: identical warnings become one Event."""

from __future__ import annotations

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import EVENTS, NODES
from kccm.runtime.events import EVENT_TYPE_WARNING, EventBroadcaster
from kccm.testing.pytest_plugin import KubeCleanup, unique_name
from kccm.util.clock import FakeClock


@pytest.mark.parametrize(
    ("spacing", "expected_count"),
    [
        # Upstream's spam filter (burst 25, one token per 5 min) stops writes after 25 in a burst.
        pytest.param(0.0, 25, id="rapid-burst-is-spam-filtered-at-25"),
        # At the filter's refill rate every one is written: one Event, count 50.
        pytest.param(300.0, 50, id="spaced-warnings-aggregate-to-count-50"),
    ],
)
async def test_fifty_identical_warnings_become_one_event(
    kube: KubeApiClient, kube_cleanup: KubeCleanup, spacing: float, expected_count: int
) -> None:
    node = kube_cleanup.add(NODES, unique_name("node"))
    created = await kube.create(NODES, {"metadata": {"name": node}})
    clock = FakeClock()
    broadcaster = EventBroadcaster(kube, clock=clock)
    broadcaster.start()
    recorder = broadcaster.recorder("cloud-node-controller")
    try:
        for _ in range(50):
            recorder.event(created, EVENT_TYPE_WARNING, "SyncFailed", "the cloud said no")
            await broadcaster.flush()
            await clock.advance(spacing)
    finally:
        await broadcaster.shutdown()
    events = await kube.list(
        EVENTS, namespace="default", field_selector=f"involvedObject.name={node}"
    )
    assert [(e["reason"], e["count"], e["type"]) for e in events.items] == [
        ("SyncFailed", expected_count, "Warning")
    ]
    assert events.items[0]["source"] == {"component": "cloud-node-controller"}
