"""Fixtures of the service-lb-controller's unit tests (see service_harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry
from service_harness import (
    Harness,
    RecordingBroadcaster,
    RecordingKube,
)

from kccm.cloudprovider.gate import CallGate
from kccm.providers.fake import FakeCloud
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock


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
