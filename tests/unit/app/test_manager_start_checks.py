"""Start-up checks made once the provider is known, where upstream makes them: the cluster ID
(sample cloud initializer) and --cluster-cidr (only when the provider supports routes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.manager import check_cluster_id, check_route_settings
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers.base import ControllerContext
from kccm.controllers.route import RouteControllerOptions
from kccm.controllers.table import BY_NAME, ControllerOptions
from kccm.kube.fake import FakeKube
from kccm.providers.fake import FakeCloud
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory

ROUTE = "node-route-controller"


def _route(**options: object) -> ControllerOptions:
    return ControllerOptions(route=RouteControllerOptions(**options))  # type: ignore[arg-type]


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
        cloud_provider="fake",
        controller_options=_route(cluster_cidr=cidr, configure_cloud_routes=configure),
    )
    cloud = FakeCloud(enable_routes=routes)
    built = BY_NAME[ROUTE].build(context(cloud, gate), config.controller_options)
    assert (built is not None) is started


@pytest.mark.parametrize(
    ("routes", "extra", "problem"),
    [
        pytest.param(True, {}, "provider supports routes", id="routes-and-no-cidr-fails"),
        pytest.param(False, {}, None, id="no-routes-no-cidr-is-fine"),
        pytest.param(True, {"controller_options": _route(configure_cloud_routes=False)}, None,
                     id="routes-switched-off"),
        pytest.param(True, {"controllers": frozenset({"cloud-node-controller"})}, None,
                     id="route-controller-not-selected"),
        pytest.param(True, {"controller_options": _route(cluster_cidr="10.244.0.0/16")}, None,
                     id="routes-and-a-cidr"),
    ],
)  # fmt: skip
def test_cluster_cidr_is_checked_before_leader_election(
    routes: bool, extra: dict[str, object], problem: str | None
) -> None:
    fields: dict[str, object] = {"controllers": frozenset({ROUTE}), **extra}
    config = ManagerConfig(cloud_provider="fake", **fields)  # type: ignore[arg-type]
    if problem is None:
        check_route_settings(config, routes)
    else:
        with pytest.raises(ConfigurationError, match=problem):
            check_route_settings(config, routes)


@pytest.mark.parametrize(
    ("has_cluster_id", "allow_untagged", "stops"),
    [
        pytest.param(True, False, False, id="tagged-cloud-starts"),
        pytest.param(False, False, True, id="untagged-cloud-stops"),
        pytest.param(False, True, False, id="untagged-cloud-allowed-warns"),
    ],
)
def test_cluster_id_check_like_upstreams_cloud_initializer(
    has_cluster_id: bool, allow_untagged: bool, stops: bool, caplog: pytest.LogCaptureFixture
) -> None:
    config = ManagerConfig(cloud_provider="fake", allow_untagged_cloud=allow_untagged)
    if stops:
        with pytest.raises(ConfigurationError, match="no ClusterID found"):
            check_cluster_id(config, has_cluster_id)
    else:
        check_cluster_id(config, has_cluster_id)
    warned = any("without a ClusterID" in r.getMessage() for r in caplog.records)
    assert warned is (not has_cluster_id and allow_untagged)
