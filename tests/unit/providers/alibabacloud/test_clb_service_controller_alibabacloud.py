"""The classic load balancer behind kccm's real service controller (FakeKube, the in-memory
SLB): a Service gets its balancer and its address, the annotations kccm does not honour become
Warning Events, the Service carries upstream's finalizer and labels, a restarted kccm makes
no write (cloud or Service), a deleted Service loses its balancer."""

from __future__ import annotations

from typing import Any

from test_clb_conformance_alibabacloud import ClbOnly

from kccm.controllers.service import build
from kccm.kube.fake import FakeKube
from kccm.kube.resources import ENDPOINT_SLICES, NODES, SERVICES
from kccm.providers.alibabacloud.loadbalancer.marks import (
    CLB_FINALIZER,
    LABEL_LOADBALANCER_ID,
    LABEL_SERVICE_HASH,
)
from kccm.providers.alibabacloud.loadbalancer.servicehash import service_hash
from kccm.testing.controllers import absent, controller_run, event_counts, eventually
from kccm.testing.kubelet import kubelet_node

NS = "default"
A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"


def node(name: str) -> dict[str, Any]:
    made = kubelet_node(name)
    made["spec"] = {"providerID": f"cn-hangzhou.i-{name}"}
    return made


def lb_service() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": NS,
            "annotations": {f"{A}scheduler": "wrr", f"{A}bandwidth-package-id": "100"},
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
            "externalTrafficPolicy": "Cluster",
        },
    }


async def ingress(kube: FakeKube) -> list[dict[str, Any]] | None:
    service = await kube.get(SERVICES, "web", namespace=NS)
    found: list[dict[str, Any]] = ((service.get("status") or {}).get("loadBalancer") or {}).get(
        "ingress"
    ) or []
    return found or None


async def ensured(kube: FakeKube, times: int) -> bool:
    counts = await event_counts(kube, NS, "web", "service-controller")
    return counts["EnsuredLoadBalancer"] >= times


async def test_a_service_through_the_controller_restart_and_deletion() -> None:
    kube, cloud = FakeKube(), ClbOnly()
    for name in ("a", "b"):
        await kube.create(NODES, node(name))
    await kube.create(SERVICES, lb_service())
    async with controller_run(kube, cloud, grace=0.5) as run:
        run.start(build(run.context))
        found = await eventually(lambda: ingress(kube), 30)
    (lb,) = cloud.slb.balancers.values()
    assert [i["ip"] for i in found] == [lb["Address"]]
    (group,) = cloud.slb.vgroups.values()
    assert sorted(group["backends"]) == ["i-a", "i-b"]
    counts = await event_counts(kube, NS, "web", "service-controller")
    assert counts["UnsupportedAnnotation"] >= 1
    assert counts["EnsuredLoadBalancer"] >= 1
    before = counts["EnsuredLoadBalancer"]
    marked = await kube.get(SERVICES, "web", namespace=NS)  # upstream's marks (marks.py)
    assert marked["metadata"]["finalizers"] == [CLB_FINALIZER]
    assert marked["metadata"]["labels"] == {
        LABEL_SERVICE_HASH: service_hash(marked),
        LABEL_LOADBALANCER_ID: lb["LoadBalancerId"],
    }

    restarted = ClbOnly()
    restarted.slb = cloud.slb
    restarted.balancers.api.rpc = cloud.slb
    cloud.slb.calls.clear()
    async with controller_run(kube, restarted, grace=0.5) as run:
        run.start(build(run.context))
        await eventually(lambda: ensured(kube, before + 1), 30)
        assert "DescribeLoadBalancers" in cloud.slb.actions()
        assert cloud.slb.mutating() == []
        unchanged = await kube.get(SERVICES, "web", namespace=NS)
        assert unchanged["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
        await kube.delete(SERVICES, "web", namespace=NS)
        await eventually(lambda: absent(kube, SERVICES, "web", NS), 30)
    assert cloud.slb.balancers == {}


def endpoint_slice(node: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-1",
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.1.0.1"], "nodeName": node, "conditions": {"ready": True}}],
    }


async def test_a_local_service_s_group_follows_its_endpoints_through_the_controller() -> None:
    kube, cloud = FakeKube(), ClbOnly()
    for name in ("a", "b"):
        await kube.create(NODES, node(name))
    local = lb_service()
    local["spec"]["externalTrafficPolicy"] = "Local"
    await kube.create(SERVICES, local)
    await kube.create(ENDPOINT_SLICES, endpoint_slice("a"))

    async def members(*wanted: str) -> bool:
        groups = list(cloud.slb.vgroups.values())
        return bool(groups) and sorted(groups[0]["backends"]) == list(wanted)

    async with controller_run(kube, cloud, grace=0.5) as run:
        run.start(build(run.context))
        await eventually(lambda: members("i-a"), 30)
        await kube.replace(ENDPOINT_SLICES, endpoint_slice("b"))
        await eventually(lambda: members("i-b"), 30)
        await kube.delete(SERVICES, "web", namespace=NS)
        await eventually(lambda: absent(kube, SERVICES, "web", NS), 30)
    assert cloud.slb.balancers == {}
