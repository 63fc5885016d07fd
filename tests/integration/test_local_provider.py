"""The local provider behind the real service and node-lifecycle controllers, on the real
apiserver: a LoadBalancer Service gets its VIP (ipMode Proxy) and a load_balancers row with its
ports and node backends; a stopped instance's Node is tainted shutdown; a deleted instance's
Node is deleted."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider.types import Node
from kccm.controllers import nodelifecycle
from kccm.controllers.nodelifecycle import NodeLifecycleControllerOptions
from kccm.controllers.service import ServiceControllerOptions
from kccm.controllers.service import build as build_service_controller
from kccm.kube.client import KubeApiClient
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, SERVICES
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord, LocalStore
from kccm.testing.controllers import absent, event_summaries, eventually
from kccm.testing.pytest_plugin import KubeCleanup, OpenControllerRun, unique_name

PREFIX = "local-node"
SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}


class ScopedLocalCloud(LocalCloud):
    """Answers "exists, running" for Nodes this module did not create (the apiserver is shared
    with other tests' Nodes, which must not be tainted or deleted here)."""

    def instance_exists(self, node: Node) -> bool:
        if not node["metadata"]["name"].startswith(PREFIX):
            return True
        return super().instance_exists(node)

    def instance_shutdown(self, node: Node) -> bool:
        if not node["metadata"]["name"].startswith(PREFIX):
            return False
        return super().instance_shutdown(node)


@dataclass
class Running:
    kube: KubeApiClient
    store: LocalStore
    cleanup: KubeCleanup

    async def node(self, name: str, address: str, ready: str) -> Obj:
        self.cleanup.add(NODES, name)
        await self.kube.create(
            NODES,
            {
                "metadata": {"name": name},
                "spec": {"providerID": f"local://{name}"},
                "status": {"addresses": [{"type": "InternalIP", "address": address}]},
            },
        )
        condition = {"type": "Ready", "status": ready, "reason": "Kubelet"}
        return await self.kube.patch(
            NODES, name, {"status": {"conditions": [condition]}}, subresource="status"
        )

    def instance(self, name: str, address: str) -> None:
        self.store.add_instance(InstanceRecord(name, (("InternalIP", address),)))

    async def shutdown_taints(self, name: str) -> list[Any]:
        node = await self.kube.get(NODES, name)
        return [t for t in node["spec"].get("taints") or () if t["key"] == SHUTDOWN["key"]]


@pytest.fixture
async def running(
    controller_runs: OpenControllerRun,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    tmp_path: Path,
) -> AsyncIterator[Running]:
    store = LocalStore(tmp_path / "state.db")
    cloud = ScopedLocalCloud(store, load_local_config(None))
    run = await controller_runs(cloud)
    lifecycle = nodelifecycle.build(
        run.context, NodeLifecycleControllerOptions(node_monitor_period=0.2)
    )
    run.start(lifecycle, build_service_controller(run.context, ServiceControllerOptions()))
    try:
        yield Running(kube, store, kube_cleanup)
    finally:
        await run.stop()
        store.close()


async def test_a_load_balancer_service_gets_a_vip_and_a_row(
    running: Running, kube: KubeApiClient, kube_namespace: str
) -> None:
    name = unique_name(PREFIX)
    running.instance(name, "127.0.10.41")
    await running.node(name, "127.0.10.41", "True")
    svc = unique_name("web")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {
                "type": "LoadBalancer",
                "ports": [
                    {"name": "http", "port": 80, "protocol": "TCP"},
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                ],
            },
        },
    )

    async def ingress() -> list[Any] | None:
        stored = await kube.get(SERVICES, svc, namespace=kube_namespace)
        return stored.get("status", {}).get("loadBalancer", {}).get("ingress")

    (got,) = await eventually(ingress)

    async def backs_the_node() -> bool:  # the Node may reach kccm after the Service: an update
        backend = {"node": name, "address": "127.0.10.41"}
        return backend in _row(running.store, f"{kube_namespace}/{svc}").backends

    await eventually(backs_the_node)
    assert ipaddress.ip_address(got["ip"]) in ipaddress.ip_network("127.0.20.0/24")
    assert got["ipMode"] == "Proxy"
    stored = await kube.get(SERVICES, svc, namespace=kube_namespace)
    record = _row(running.store, f"{kube_namespace}/{svc}")
    assert record.vip == got["ip"]
    assert [(p["name"], p["protocol"], p["port"], p["node_port"]) for p in record.ports] == [
        (p["name"], p["protocol"], p["port"], p["nodePort"]) for p in stored["spec"]["ports"]
    ]
    assert record.health == {"mode": "kube-proxy", "port": 10256, "path": "/healthz"}

    await kube.delete(SERVICES, svc, namespace=kube_namespace)

    async def released() -> bool:
        return not any(c.owner == f"{kube_namespace}/{svc}" for c in running.store.list_ip_claims())

    await eventually(released)
    assert running.store.find_load_balancer(record.name) is None


def _row(store: LocalStore, service: str) -> LoadBalancerRecord:
    return next(lb for lb in store.list_load_balancers() if lb.service == service)


async def test_a_stopped_instance_taints_its_node(running: Running) -> None:
    name = unique_name(PREFIX)
    running.instance(name, "127.0.10.42")
    running.store.set_instance_state(name, running=False)
    await running.node(name, "127.0.10.42", "False")
    assert await eventually(lambda: running.shutdown_taints(name)) == [SHUTDOWN]


async def test_a_deleted_instance_deletes_its_node(running: Running) -> None:
    name = unique_name(PREFIX)
    running.instance(name, "127.0.10.43")
    await running.node(name, "127.0.10.43", "False")
    assert await running.shutdown_taints(name) == []
    running.store.delete_instance(name)

    assert await eventually(lambda: absent(running.kube, NODES, name))


async def test_an_unavailable_load_balancer_ip_is_a_warning_event_and_no_lb(
    running: Running, kube: KubeApiClient, kube_namespace: str
) -> None:
    svc = unique_name("pinned")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {
                "type": "LoadBalancer",
                "loadBalancerIP": "192.0.2.7",
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
            },
        },
    )

    async def warning() -> list[str]:
        return [
            message
            for _, kind, reason, message in await event_summaries(kube, kube_namespace, svc)
            if (kind, reason) == ("Warning", "SyncLoadBalancerFailed")
        ]

    (message, *_) = await eventually(warning)
    assert "192.0.2.7 is not in the local VIP pool" in message
    assert not any(
        lb.service == f"{kube_namespace}/{svc}" for lb in running.store.list_load_balancers()
    )


async def test_another_providers_node_is_not_deleted(running: Running) -> None:
    """A NotReady Node with an aws:// providerID is not the local provider's: instance_exists
    raises, so the lifecycle controller leaves it alone. Control Nodes (local:// without an
    instance) created after it are deleted, which proves monitor passes ran over it."""
    foreign = unique_name(PREFIX)
    running.cleanup.add(NODES, foreign)
    await running.kube.create(
        NODES,
        {
            "metadata": {"name": foreign},
            "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
            "status": {"addresses": [{"type": "InternalIP", "address": "127.0.10.44"}]},
        },
    )
    condition = {"type": "Ready", "status": "False", "reason": "Kubelet"}
    await running.kube.patch(
        NODES, foreign, {"status": {"conditions": [condition]}}, subresource="status"
    )
    for _ in range(2):  # the second control starts after a full pass that saw the foreign Node
        control = unique_name(PREFIX)
        await running.node(control, "127.0.10.45", "False")  # no instance: does not exist

        assert await eventually(lambda name=control: absent(running.kube, NODES, name))
    assert (await running.kube.get(NODES, foreign))["spec"]["providerID"].startswith("aws://")


@pytest.mark.parametrize(
    ("ports", "spec", "reason"),
    [
        pytest.param(
            [{"name": "assoc", "port": 9000, "protocol": "SCTP"}],
            {},
            "serves TCP and UDP only, not SCTP",
            id="sctp",
        ),
        pytest.param(
            [{"name": "http", "port": 80, "protocol": "TCP"}],
            {"allocateLoadBalancerNodePorts": False},
            "has no nodePort (spec.allocateLoadBalancerNodePorts is false)",
            id="no-node-ports",
        ),
    ],
)
async def test_a_service_nothing_serves_gets_a_warning_and_no_status(
    running: Running,
    kube: KubeApiClient,
    kube_namespace: str,
    ports: list[dict[str, Any]],
    spec: dict[str, Any],
    reason: str,
) -> None:
    svc = unique_name("unservable")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {"type": "LoadBalancer", "ports": ports, **spec},
        },
    )

    async def warnings() -> list[str]:
        return [
            message
            for _, kind, reason, message in await event_summaries(kube, kube_namespace, svc)
            if (kind, reason) == ("Warning", "SyncLoadBalancerFailed")
        ]

    (message, *_) = await eventually(warnings)
    assert reason in message
    stored = await kube.get(SERVICES, svc, namespace=kube_namespace)
    assert not (stored.get("status") or {}).get("loadBalancer", {}).get("ingress")
    listed = await kube.list(
        EVENTS, namespace=kube_namespace, field_selector=f"involvedObject.name={svc}"
    )
    assert not [e for e in listed.items if e["reason"] == "EnsuredLoadBalancer"]
    assert not [c for c in running.store.list_ip_claims() if c.owner.endswith(f"/{svc}")]
