"""The cluster view a provider asking for it (``ClusterViewUser``) is handed: over the Service
and Node informers the controllers asked for, never starting one of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kccm.app.manager import _hand_cluster_view
from kccm.cloudprovider import ClusterView, as_cluster_view_user
from kccm.kube.fake import FakeKube
from kccm.kube.resources import NODES, SERVICES
from kccm.runtime.clusterview import informer_cluster_view
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock


@dataclass
class Viewer:
    views: list[ClusterView] = field(default_factory=list)

    def set_cluster_view(self, view: ClusterView) -> None:
        self.views.append(view)


@dataclass
class Gated:
    cloud: Any


def _names(objs: Any) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


async def test_the_view_shows_the_caches_once_synced(clock: FakeClock) -> None:
    kube = FakeKube()
    await kube.create(SERVICES, {"metadata": {"name": "web", "namespace": "shop"}})
    await kube.create(NODES, {"metadata": {"name": "n1"}})
    factory = SharedInformerFactory(kube, clock=clock)
    factory.informer(SERVICES)
    assert informer_cluster_view(factory) is None, "no Node informer: no view"
    factory.informer(NODES)
    view = informer_cluster_view(factory)
    assert view is not None
    assert not view.has_synced()
    factory.start()
    await factory.wait_for_sync()
    assert view.has_synced()
    assert (_names(view.services()), _names(view.nodes())) == (["web"], ["n1"])
    await factory.stop()


def test_the_manager_hands_it_only_to_a_provider_asking(clock: FakeClock) -> None:
    factory = SharedInformerFactory(FakeKube(), clock=clock)
    viewer = Viewer()
    _hand_cluster_view(Gated(viewer), factory)  # type: ignore[arg-type]
    assert viewer.views == [], "no controller watches Services and Nodes: nothing handed"
    factory.informer(SERVICES)
    factory.informer(NODES)
    _hand_cluster_view(Gated(viewer), factory)  # type: ignore[arg-type]
    assert len(viewer.views) == 1
    assert as_cluster_view_user(object()) is None
    _hand_cluster_view(Gated(object()), factory)  # type: ignore[arg-type]  # no error
