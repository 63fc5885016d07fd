"""The one table of controllers: every row builds a controller of the one shape."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import CloudController, ControllerContext
from kccm.controllers.route import RouteControllerOptions
from kccm.controllers.table import (
    ALIASES,
    BY_NAME,
    CONTROLLERS,
    ControllerOptions,
    ControllerSpec,
)
from kccm.kube.fake import FakeKube
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory


@pytest.fixture
async def gate() -> AsyncIterator[CallGate]:
    gate = CallGate(registry=CollectorRegistry())
    yield gate
    gate.close()


def test_names_and_aliases_are_unique() -> None:
    assert len(BY_NAME) == len(CONTROLLERS)
    assert len(ALIASES) == len(CONTROLLERS)
    assert not set(ALIASES) & set(BY_NAME)


@pytest.mark.parametrize("spec", CONTROLLERS, ids=[spec.name for spec in CONTROLLERS])
def test_every_row_builds_a_cloud_controller_named_by_its_row(
    spec: ControllerSpec, gate: CallGate
) -> None:
    kube = FakeKube()
    cloud = FakeCloud(enable_routes=True)
    context = ControllerContext(
        kube,
        SharedInformerFactory(kube),
        GatedCloud(cloud, gate),
        EventBroadcaster(kube),
        CollectorRegistry(),
    )
    options = ControllerOptions(route=RouteControllerOptions(cluster_cidr="10.244.0.0/16"))
    built = spec.build(context, options)
    if built is None:  # the fake has no capability for it (logged, skipped as upstream)
        return
    assert isinstance(built, CloudController)
    assert built.name == spec.name
