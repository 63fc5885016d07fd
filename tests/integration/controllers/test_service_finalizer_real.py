"""A user strips the cleanup finalizer: service-lb-controller (no --load-balancer-class) on the
real apiserver, with the fake provider, does as upstream v0.36.3 does (docs/behaviour.md,
"Quirks: decisions"): no sync, the finalizer stays off, and the Service's deletion leaves
its cloud balancer. The harness is test_service_lb_real.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from test_service_lb_real import (
    Running,
    SpyingCloud,
    controller_process,
    create_node,
    events_of,
    ingress_of,
    lb_service,
    wait_events,
)

from kccm.api.wellknown import FINALIZER_LB_CLEANUP
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import SERVICES
from kccm.testing.controllers import absent, eventually
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


@pytest.fixture
async def running(kube: KubeApiClient) -> AsyncIterator[Running]:
    async with controller_process(kube, SpyingCloud(kube)) as run:
        yield run


async def _fenced(running: Running, ns: str, fence: str, ensures: int) -> None:
    """Wait until ``fence`` has been ensured ``ensures`` times and both queues are idle: the
    Service watch delivers in order, so every change made before the fence's last one has
    reached the controller (and been acted on, or not)."""

    async def done() -> bool:
        return running.ensures(f"{ns}/{fence}") >= ensures and running.idle()

    await eventually(done)


async def test_a_stripped_finalizer_stays_off_and_the_balancer_outlives_the_service(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns, name, fence = kube_namespace, unique_name("svc"), unique_name("fence")
    key = f"{ns}/{name}"
    node = unique_name("node")
    await create_node(kube, kube_cleanup, node)
    await running.knows_nodes(node)  # else the first ensure may warn of no nodes
    await kube.create(SERVICES, lb_service(name, ns))
    await eventually(lambda: ingress_of(kube, ns, name))
    await wait_events(kube, ns, name, "EnsuredLoadBalancer")
    stored = await kube.get(SERVICES, name, namespace=ns)
    assert stored["metadata"]["finalizers"] == [FINALIZER_LB_CLEANUP]

    await kube.patch(SERVICES, name, {"metadata": {"finalizers": None}}, namespace=ns)
    await kube.create(SERVICES, lb_service(fence, ns))
    await _fenced(running, ns, fence, ensures=1)
    assert running.ensures(key) == 1, "a finalizer-only change is no reason to sync"
    assert not (await kube.get(SERVICES, name, namespace=ns))["metadata"].get("finalizers")

    await kube.delete(SERVICES, name, namespace=ns)
    await eventually(lambda: absent(kube, SERVICES, name, ns))
    await kube.patch(SERVICES, fence, {"metadata": {"annotations": {"x": "1"}}}, namespace=ns)
    await _fenced(running, ns, fence, ensures=2)
    assert running.ensures(key) == 1
    left = [b for b in running.cloud.balancers.values() if b.service == key]
    assert left, "the Service went without its finalizer: its balancer stays, as upstream's"
    reasons = [event[1] for event in await events_of(kube, ns, name)]
    assert reasons.count("EnsuringLoadBalancer") == 1, reasons
    assert not {"DeletingLoadBalancer", "DeletedLoadBalancer"} & set(reasons), reasons

    await running.cloud.ensure_load_balancer_deleted("kubernetes", stored)  # the user's cleanup
    assert not any(b.service == key for b in running.cloud.balancers.values())
