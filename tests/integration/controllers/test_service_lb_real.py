"""service-lb-controller against the real apiserver, with the fake provider.

The controller runs as in production (its ``run()`` task, real informers, a real event
broadcaster); every assertion reads back through the API: finalizers, status.loadBalancer,
Events (by ``involvedObject.name``), and the Service's disappearance after deletion.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from kccm.api.wellknown import FINALIZER_LB_CLEANUP, TAINT_UNINITIALIZED
from kccm.cloudprovider.types import LoadBalancerStatus, Node, NodeAddress, Service
from kccm.controllers.node import build as build_node_controller
from kccm.controllers.service import ServiceController, ServiceControllerOptions, build
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.controllers import (
    absent,
    controller_run,
    delete_until_gone,
    event_counts,
    events_about,
    eventually,
)
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


class SpyingCloud(FakeCloud):
    """The fake provider, noting the Service's finalizers (read from the API) at each ensure."""

    def __init__(self, kube: KubeApiClient) -> None:
        super().__init__()
        self.kube = kube
        self.finalizers_at_ensure: list[list[str]] = []
        self.backends: dict[str, dict[str, list[str]]] = {}
        """Per service key: the backends last given, node name → InternalIPs."""

    def _note_backends(self, service: Service, nodes: Sequence[Node]) -> None:
        meta = service["metadata"]
        self.backends[f"{meta['namespace']}/{meta['name']}"] = {
            node["metadata"]["name"]: [
                a["address"]
                for a in (node.get("status") or {}).get("addresses") or ()
                if a["type"] == "InternalIP"
            ]
            for node in nodes
        }

    async def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        meta = service["metadata"]
        stored = await self.kube.get(SERVICES, meta["name"], namespace=meta["namespace"])
        self.finalizers_at_ensure.append(list(stored["metadata"].get("finalizers") or []))
        status = await super().ensure_load_balancer(cluster_name, service, nodes)
        self._note_backends(service, nodes)
        return status

    async def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        await super().update_load_balancer(cluster_name, service, nodes)
        self._note_backends(service, nodes)


@dataclass
class Running:
    kube: KubeApiClient
    cloud: SpyingCloud
    controller: ServiceController

    def updates(self, namespace: str) -> list[tuple[str, tuple[str, ...]]]:
        """update_load_balancer calls for services of ``namespace`` (namespaces of earlier
        tests never finish terminating, so their services live on)."""
        return [
            (str(c.args[1]), tuple(c.args[2]))
            for c in self.cloud.call_log
            if c.method == "update_load_balancer" and str(c.args[1]).startswith(f"{namespace}/")
        ]

    def idle(self) -> bool:
        """Neither queue holds a key nor hands one out."""
        queues = (self.controller.service_queue, self.controller.node_queue)
        return not any(len(q) or q.processing for q in queues)

    async def knows_nodes(self, *names: str) -> None:
        """Wait until the controller's Node cache holds ``names``: its Service and Node watches
        are separate streams, so a Service created after a Node may reach it first (and be
        ensured without that Node, then updated when the Node arrives)."""

        async def cached() -> bool:
            return all(self.controller.nodes.get(name) is not None for name in names)

        await eventually(cached)

    def ensures(self, key: str) -> int:
        return sum(
            1
            for c in self.cloud.call_log
            if c.method == "ensure_load_balancer" and c.args[1] == key
        )


@contextlib.asynccontextmanager
async def controller_process(
    kube: KubeApiClient, cloud: SpyingCloud, options: ServiceControllerOptions | None = None
) -> AsyncIterator[Running]:
    """One run of the controller as the daemon runs it (own informers, recorder, gate)."""
    async with controller_run(kube, cloud) as run:
        controller = build(run.context, options or ServiceControllerOptions())
        assert controller is not None
        run.start(controller)
        yield Running(kube, cloud, controller)


@pytest.fixture
async def running(kube: KubeApiClient) -> AsyncIterator[Running]:
    async with controller_process(kube, SpyingCloud(kube)) as run:
        yield run


async def create_node(kube: KubeApiClient, cleanup: KubeCleanup, name: str) -> Obj:
    """A Node as a kubelet with --cloud-provider=external registers it, then marked Ready."""
    cleanup.add(NODES, name)
    await kube.create(
        NODES,
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {
                "taints": [{"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}]
            },
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": name},
                    {"type": "InternalIP", "address": "10.1.0.10"},
                ]
            },
        },
    )
    return await kube.patch(
        NODES,
        name,
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}},
        subresource="status",
    )


def lb_service(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": False,
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
        },
    }
    body["spec"].update(spec)
    return body


async def events_of(kube: KubeApiClient, namespace: str, name: str) -> list[tuple[str, ...]]:
    """Events about ``name`` recorded by the service controller.

    The apiserver's own controllers (e.g. the ClusterIP repair loop, through events.k8s.io
    with no ``source``) may also record events about a Service at any time; they are not ours.
    """
    return [
        (e["type"], e["reason"], e["message"], e["source"]["component"])
        for e in sorted(
            await events_about(kube, namespace, name), key=lambda e: e["metadata"]["name"]
        )
        if (e.get("source") or {}).get("component") == "service-controller"
    ]


def has_reasons(*reasons: str) -> Callable[[list[tuple[str, ...]]], bool]:
    return lambda events: all(any(e[1] == r for e in events) for r in reasons)


async def wait_events(
    kube: KubeApiClient, namespace: str, name: str, *reasons: str
) -> list[tuple[str, ...]]:
    async def probe() -> list[tuple[str, ...]] | None:
        found = await events_of(kube, namespace, name)
        return found if has_reasons(*reasons)(found) else None

    return await eventually(probe)


async def ingress_of(kube: KubeApiClient, namespace: str, name: str) -> list[Any] | None:
    stored = await kube.get(SERVICES, name, namespace=namespace)
    ingress = stored.get("status", {}).get("loadBalancer", {}).get("ingress")
    return list(ingress) if ingress else None


async def test_lifecycle_finalizer_status_events_and_deletion(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns, name = kube_namespace, unique_name("svc")
    node = unique_name("node")
    await create_node(kube, kube_cleanup, node)
    await running.knows_nodes(node)
    await kube.create(SERVICES, lb_service(name, ns))

    ingress = await eventually(lambda: ingress_of(kube, ns, name))
    balancer = next(b for b in running.cloud.balancers.values() if b.service == f"{ns}/{name}")
    assert ingress == [
        {"ip": balancer.ip, "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]}
    ]
    assert node in balancer.hosts
    stored = await kube.get(SERVICES, name, namespace=ns)
    assert stored["metadata"]["finalizers"] == [FINALIZER_LB_CLEANUP]
    assert running.cloud.finalizers_at_ensure[0] == [FINALIZER_LB_CLEANUP], (
        "the finalizer is on the stored Service before the provider is asked"
    )
    events = await wait_events(kube, ns, name, "EnsuringLoadBalancer", "EnsuredLoadBalancer")
    listed = await kube.list(EVENTS, namespace=ns, field_selector=f"involvedObject.name={name}")
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["uid"]) for e in listed.items} == {
        ("Service", stored["metadata"]["uid"])
    }
    assert events == [
        ("Normal", "EnsuringLoadBalancer", "Ensuring load balancer", "service-controller"),
        ("Normal", "EnsuredLoadBalancer", "Ensured load balancer", "service-controller"),
    ]

    # A change in the needs-update list (an annotation) re-ensures; the provider answers the
    # same ingress, which stays as it was.
    await kube.patch(SERVICES, name, {"metadata": {"annotations": {"x": "1"}}}, namespace=ns)

    async def ensured_twice() -> bool:
        return running.ensures(f"{ns}/{name}") >= 2

    await eventually(ensured_twice)
    await wait_events(kube, ns, name, "EnsuredLoadBalancer")
    assert await ingress_of(kube, ns, name) == ingress

    # Deletion: the finalizer holds the object until the load balancer is gone.
    await kube.delete(SERVICES, name, namespace=ns)

    await eventually(lambda: absent(kube, SERVICES, name, ns))
    assert not any(b.service == f"{ns}/{name}" for b in running.cloud.balancers.values())
    events = await wait_events(kube, ns, name, "DeletingLoadBalancer", "DeletedLoadBalancer")
    assert ("Normal", "DeletingLoadBalancer", "Deleting load balancer", "service-controller") in (
        events
    )
    assert ("Normal", "DeletedLoadBalancer", "Deleted load balancer", "service-controller") in (
        events
    )


async def test_type_change_removes_only_our_finalizer_and_clears_status(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns, name = kube_namespace, unique_name("svc")
    await create_node(kube, kube_cleanup, unique_name("node"))
    body = lb_service(name, ns)
    body["metadata"]["finalizers"] = ["example.com/keep"]
    await kube.create(SERVICES, body)
    await eventually(lambda: ingress_of(kube, ns, name))
    stored = await kube.get(SERVICES, name, namespace=ns)
    assert stored["metadata"]["finalizers"] == ["example.com/keep", FINALIZER_LB_CLEANUP]

    await kube.patch(
        SERVICES,
        name,
        {"spec": {"type": "ClusterIP", "allocateLoadBalancerNodePorts": None}},
        namespace=ns,
    )

    async def cleaned() -> Obj | None:
        current = await kube.get(SERVICES, name, namespace=ns)
        return current if current["metadata"].get("finalizers") == ["example.com/keep"] else None

    current = await eventually(cleaned)
    assert current.get("status", {}).get("loadBalancer", {}) == {}
    assert not any(b.service == f"{ns}/{name}" for b in running.cloud.balancers.values())
    await wait_events(kube, ns, name, "DeletingLoadBalancer", "DeletedLoadBalancer")
    await kube.patch(SERVICES, name, {"metadata": {"finalizers": None}}, namespace=ns)


async def test_load_balancer_class_service_is_left_alone(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    classed, fence = unique_name("classed"), unique_name("fence")
    await create_node(kube, kube_cleanup, unique_name("node"))
    await kube.create(SERVICES, lb_service(classed, ns, loadBalancerClass="example.com/other"))
    await kube.create(SERVICES, lb_service(fence, ns))
    # Once a later managed service is done, the classed one has been seen (and ignored).
    await eventually(lambda: ingress_of(kube, ns, fence))
    stored = await kube.get(SERVICES, classed, namespace=ns)
    assert not stored["metadata"].get("finalizers")
    assert not stored.get("status", {}).get("loadBalancer")
    assert await events_of(kube, ns, classed) == []
    assert all(call.args[1:2] != (f"{ns}/{classed}",) for call in running.cloud.call_log)


async def test_excluded_node_updates_only_load_balancer_services(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    ns = kube_namespace
    a, b = unique_name("node-a"), unique_name("node-b")
    await create_node(kube, kube_cleanup, a)
    await create_node(kube, kube_cleanup, b)
    await running.knows_nodes(a, b)  # else their late arrival updates the balancers too
    s1, s2 = unique_name("s1"), unique_name("s2")
    classed, plain = unique_name("classed"), unique_name("plain")
    await kube.create(SERVICES, lb_service(classed, ns, loadBalancerClass="example.com/other"))
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": plain, "namespace": ns},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    for s in (s1, s2):
        await kube.create(SERVICES, lb_service(s, ns))
        await eventually(lambda s=s: ingress_of(kube, ns, s))  # type: ignore[misc]

    # A label that does not change eligibility costs nothing.
    await kube.patch(NODES, b, {"metadata": {"labels": {EXCLUDE: "false", "x": "y"}}})
    await kube.patch(NODES, a, {"metadata": {"labels": {"x": "y"}}})
    # The exclusion label removes b from the backends of the LoadBalancer services only.
    await kube.patch(NODES, b, {"metadata": {"labels": {EXCLUDE: "true"}}})

    def excluded() -> list[tuple[str, tuple[str, ...]]]:
        return [u for u in running.updates(ns) if b not in u[1]]

    async def both_updated() -> list[tuple[str, tuple[str, ...]]] | None:
        done = excluded()
        return done if {u[0] for u in done} >= {f"{ns}/{s1}", f"{ns}/{s2}"} else None

    await eventually(both_updated)
    updated = {u[0] for u in running.updates(ns)}
    assert updated == {f"{ns}/{s1}", f"{ns}/{s2}"}, "only managed services are updated"
    assert all(a in hosts and b not in hosts for _, hosts in excluded())
    assert len(running.updates(ns)) == 2, "the eligibility-neutral label changes cost nothing"
    for s in (s1, s2):
        events = await wait_events(kube, ns, s, "UpdatedLoadBalancer")
        assert (
            "Normal",
            "UpdatedLoadBalancer",
            "Updated load balancer with new hosts",
            "service-controller",
        ) in events
    assert await events_of(kube, ns, classed) == []
    assert await events_of(kube, ns, plain) == []


# -- issue 11: fidelity with v0.36.3 ----------------------------------------------------------


def calls_in(cloud: FakeCloud, namespace: str) -> list[tuple[str, str]]:
    """(method, service key) of the cloud calls about services of ``namespace``."""
    return [
        (c.method, str(c.args[1]))
        for c in cloud.call_log
        if len(c.args) > 1 and str(c.args[1]).startswith(f"{namespace}/")
    ]


async def test_needs_update_reasons_are_not_events(
    running: Running, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """v0.36.3 only logs (V(2)) why a Service update needs a sync; it records no Event."""
    ns, name = kube_namespace, unique_name("svc")
    await create_node(kube, kube_cleanup, unique_name("node"))
    await kube.create(SERVICES, lb_service(name, ns, externalTrafficPolicy="Local"))
    await wait_events(kube, ns, name, "EnsuredLoadBalancer")
    await kube.patch(
        SERVICES,
        name,
        {
            "spec": {
                "externalTrafficPolicy": "Cluster",
                "loadBalancerSourceRanges": ["10.0.0.0/8"],
            }
        },
        namespace=ns,
    )

    async def ensured_twice() -> bool:
        return running.ensures(f"{ns}/{name}") >= 2

    await eventually(ensured_twice)
    await kube.patch(
        SERVICES,
        name,
        {
            "spec": {
                "type": "ClusterIP",
                "allocateLoadBalancerNodePorts": None,
                "loadBalancerSourceRanges": None,
                "externalTrafficPolicy": None,
            }
        },
        namespace=ns,
    )
    events = await wait_events(kube, ns, name, "DeletedLoadBalancer")
    reasons = {e[1] for e in events}
    assert reasons <= {
        "EnsuringLoadBalancer",
        "EnsuredLoadBalancer",
        "DeletingLoadBalancer",
        "DeletedLoadBalancer",
    }, reasons
    await kube.patch(SERVICES, name, {"metadata": {"finalizers": None}}, namespace=ns)


async def test_services_present_at_start_are_ensured_before_any_node_sync_update(
    kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """LoadBalancer Services exist before the controller starts and nodes initialise while
    it ensures them (50 ms per cloud call): no update_load_balancer before a service's
    ensure, no UpdateLoadBalancerFailed, and the late node reaches every load balancer."""
    ns = kube_namespace
    first = unique_name("node-a")
    await create_node(kube, kube_cleanup, first)
    names = [unique_name(f"s{i}") for i in range(5)]
    for name in names:
        await kube.create(SERVICES, lb_service(name, ns))
    cloud = SpyingCloud(kube)
    cloud.set_latency("*", 0.05)
    late = unique_name("node-b")
    async with controller_process(kube, cloud) as run:
        await create_node(kube, kube_cleanup, late)  # registers while ensures are in flight
        await kube.patch(NODES, late, {"spec": {"providerID": f"fake://{late}"}})

        async def all_have_the_late_node() -> bool:
            ours = [b for b in run.cloud.balancers.values() if b.service.startswith(f"{ns}/")]
            return len(ours) == len(names) and all(late in b.hosts for b in ours)

        await eventually(all_have_the_late_node)
        for name in names:
            await wait_events(kube, ns, name, "EnsuredLoadBalancer")
        calls = calls_in(cloud, ns)
        await delete_until_gone(kube, SERVICES, names, ns)
    for name in names:
        mine = [method for method, key in calls if key == f"{ns}/{name}"]
        assert mine[0] == "ensure_load_balancer", (name, mine)
        assert mine.count("ensure_load_balancer") == 1, (name, mine)
    for name in names:
        assert not any(e[1] == "UpdateLoadBalancerFailed" for e in await events_of(kube, ns, name))


async def test_restart_ensures_every_balancer_with_no_mutating_cloud_call_and_no_write(
    kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """Issue 16: a restart ensures every LoadBalancer Service, as upstream, with upstream's
    events; the fake's read-compare-write makes that reads only, and nothing is written to
    the Services (no status change, no annotation of kccm's own)."""
    ns = kube_namespace
    await create_node(kube, kube_cleanup, unique_name("node"))
    names = [unique_name(f"s{i}") for i in range(3)]
    for name in names:
        await kube.create(SERVICES, lb_service(name, ns))
    cloud = SpyingCloud(kube)
    async with controller_process(kube, cloud):
        for name in names:
            await eventually(lambda name=name: ingress_of(kube, ns, name))  # type: ignore[misc]
            await wait_events(kube, ns, name, "EnsuredLoadBalancer")
    stored = [await kube.get(SERVICES, n, namespace=ns) for n in names]
    assert [s["metadata"].get("annotations") for s in stored] == [None] * len(names)
    versions = [s["metadata"]["resourceVersion"] for s in stored]
    cloud.clear_calls()
    before = cloud.cloud_api_calls().snapshot()
    keys = {f"{ns}/{n}" for n in names}
    events_before = {n: await ensure_events(kube, ns, n) for n in names}

    async with controller_process(kube, cloud) as run:

        async def restart_observed() -> bool:
            """Everything the restart does is visible: one more Ensuring and Ensured event
            per Service stored, each ensured, and nothing queued or in flight."""
            for n in names:
                wanted = {r: c + 1 for r, c in events_before[n].items()}
                if await ensure_events(kube, ns, n) != wanted:
                    return False
            return run.controller.ensured >= keys and run.idle()

        await eventually(restart_observed)
        calls = calls_in(cloud, ns)
        assert sorted(calls) == sorted(("ensure_load_balancer", key) for key in keys)
        assert dict(cloud.cloud_api_calls().snapshot().since(before).writes) == {}
        after = [await kube.get(SERVICES, n, namespace=ns) for n in names]
        assert [s["metadata"]["resourceVersion"] for s in after] == versions, "nothing written"
        assert calls_in(cloud, ns) == calls, "nothing more until the stop"
        await delete_until_gone(kube, SERVICES, names, ns)
    for name in names:
        events = await events_of(kube, ns, name)
        assert ("Normal", "EnsuredLoadBalancer", "Ensured load balancer", "service-controller") in (
            events
        )


async def ensure_events(kube: KubeApiClient, namespace: str, name: str) -> dict[str, int]:
    counts = await event_counts(kube, namespace, name, "service-controller")
    return {r: counts[r] for r in ("EnsuringLoadBalancer", "EnsuredLoadBalancer")}


# -- issue 13.3: a node initialised after it registered becomes a backend -----------------------


async def test_node_registered_without_addresses_becomes_a_backend_once_initialised(
    kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    """The kubelet registers a Node with no addresses; the cloud-node controller sets its
    providerID, then its addresses: the load balancer ends up with the node's address."""
    ns, name = kube_namespace, unique_name("svc")
    await create_node(kube, kube_cleanup, unique_name("node-a"))
    await kube.create(SERVICES, lb_service(name, ns))
    cloud = SpyingCloud(kube)
    late = unique_name("node-late")
    cloud.add_instance(FakeInstance(name=late, addresses=(NodeAddress("InternalIP", "10.9.0.2"),)))
    async with controller_process(kube, cloud):
        await eventually(lambda: ingress_of(kube, ns, name))
        kube_cleanup.add(NODES, late)
        await kube.create(
            NODES,
            {
                "metadata": {"name": late},
                "spec": {
                    "taints": [
                        {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}
                    ]
                },
            },
        )
        async with controller_run(kube, cloud) as nodes_run:
            nodes_run.start(build_node_controller(nodes_run.context))

            async def late_node_has_its_address() -> bool:
                return cloud.backends.get(f"{ns}/{name}", {}).get(late) == ["10.9.0.2"]

            await eventually(late_node_has_its_address)
        await delete_until_gone(kube, SERVICES, [name], ns)
