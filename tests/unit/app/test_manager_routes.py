"""The route controller's --cluster-cidr check happens where upstream's does: only once the
provider is known to support routes (startRouteController checks Routes() first)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import BUILDERS
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.kube.fake import FakeKube
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory

ROUTE = "node-route-controller"


@pytest.fixture
async def gate() -> AsyncIterator[CallGate]:
    gate = CallGate(registry=CollectorRegistry())
    yield gate
    gate.close()


def context(cloud: FakeCloud, gate: CallGate) -> ControllerContext:
    kube = FakeKube()
    return ControllerContext(
        kube,
        SharedInformerFactory(kube),
        GatedCloud(cloud, gate),
        EventBroadcaster(kube),
        CollectorRegistry(),
    )


@pytest.mark.parametrize(
    ("routes", "configure", "cidr", "started"),
    [
        pytest.param(False, True, "", False, id="provider-without-routes-needs-no-cidr"),
        pytest.param(True, False, "", False, id="routes-switched-off-need-no-cidr"),
        pytest.param(True, True, "10.244.0.0/16", True, id="routes-with-a-cidr-start"),
    ],
)
async def test_route_controller_start_conditions(
    routes: bool, configure: bool, cidr: str, started: bool, gate: CallGate
) -> None:
    config = ManagerConfig(
        cloud_provider="fake", cluster_cidr=cidr, configure_cloud_routes=configure
    )
    built = BUILDERS[ROUTE](context(FakeCloud(enable_routes=routes), gate), config)
    assert (built is not None) is started


async def test_a_provider_with_routes_and_no_cidr_is_a_configuration_error(
    gate: CallGate,
) -> None:
    config = ManagerConfig(cloud_provider="fake", cluster_cidr="")
    with pytest.raises(ConfigurationError, match=r"--cluster-cidr: .*provider supports routes"):
        BUILDERS[ROUTE](context(FakeCloud(), gate), config)
