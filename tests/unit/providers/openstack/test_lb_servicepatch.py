"""The Service patch seam: only changed annotations are sent, as one strategic-merge patch of
``metadata.annotations``, from a worker thread onto the client's event loop (on the real
apiserver: tests/integration/openstack/test_servicepatch_real.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kccm.kube.resources import SERVICES
from kccm.providers.openstack.loadbalancer.annotations import ADDRESS, LB_ID
from kccm.providers.openstack.loadbalancer.servicepatch import KubeServicePatcher, annotation_patch


def _svc(**annotations: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "shop", "annotations": annotations}}


@pytest.mark.parametrize(
    ("have", "want", "patch"),
    [
        ({}, {LB_ID: "x", ADDRESS: "1.2.3.4"}, {LB_ID: "x", ADDRESS: "1.2.3.4"}),
        ({LB_ID: "x", ADDRESS: "1.2.3.4"}, {LB_ID: "x", ADDRESS: "1.2.3.4"}, {}),
        ({LB_ID: "x", ADDRESS: "1.2.3.4"}, {LB_ID: "x", ADDRESS: "5.6.7.8"}, {ADDRESS: "5.6.7.8"}),
        ({"other": "y"}, {LB_ID: "x"}, {LB_ID: "x"}),
    ],
    ids=["first", "unchanged", "address-moved", "id-only-after-failure"],
)
def test_annotation_patch(
    have: dict[str, str], want: dict[str, str], patch: dict[str, str]
) -> None:
    assert annotation_patch(_svc(**have), want) == patch


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def patch(
        self, resource: Any, name: str, body: Any, *, namespace: str, subresource: str
    ) -> Any:
        self.calls.append(
            (resource, name, body, namespace, subresource, threading.current_thread().name)
        )
        return body


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="kube-loop", daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def test_patch_runs_on_the_clients_loop(loop_thread: asyncio.AbstractEventLoop) -> None:
    client = FakeClient()
    KubeServicePatcher(client, loop_thread).patch_annotations(_svc(), {LB_ID: "x"})
    assert client.calls == [
        (
            SERVICES,
            "web",
            {"metadata": {"annotations": {LB_ID: "x"}}},
            "shop",
            "status",
            "kube-loop",
        )
    ]
