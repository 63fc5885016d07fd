"""``kccm explain`` for an NLB Service (the router's ``describe_load_balancer``): listeners by
port with their server group's members, the balancer's facts, through reads only; nothing for
a Service without a balancer."""

from __future__ import annotations

from typing import Any

from nlb_fake import FakeNlb

from kccm.cloudprovider import TargetHealth
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlb import NetworkLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlbapi import NlbApi, Waiter
from kccm.providers.alibabacloud.loadbalancer.router import AlibabaLoadBalancers

A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
NODES = tuple(
    {
        "metadata": {"name": f"i-{i}", "labels": {}},
        "spec": {"providerID": f"cn-hangzhou.i-{i}"},
        "status": {"addresses": [{"type": "InternalIP", "address": f"10.0.0.{i}"}]},
    }
    for i in (1, 2)
)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep_blocking(self, seconds: float) -> None:
        self.now += seconds


def _service(*ports: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": "0b4c3e2a-1111-2222-3333-444455556666",
            "annotations": {f"{A}zone-maps": "cn-hangzhou-h:vsw-h,cn-hangzhou-i:vsw-i"},
        },
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": "alibabacloud.com/nlb",
            "ports": [
                {"name": f"p{p}", "port": p, "protocol": "TCP", "nodePort": 30000 + p}
                for p in ports
            ],
        },
    }


def _router(nlb: FakeNlb) -> AlibabaLoadBalancers:
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    lbs = NetworkLoadBalancers(NlbApi(nlb, Waiter(_Clock())), config, "vpc-1", "c1")
    return AlibabaLoadBalancers(ClassicLoadBalancers(nlb, config, "vpc-1"), lbs)


def test_describe_shows_each_listener_with_its_members_through_reads_only() -> None:
    nlb = FakeNlb(0)
    router = _router(nlb)
    with collect_service_warnings():
        router.nlb.ensure(_service(443, 80), NODES)
    nlb.calls.clear()
    view = router.describe_load_balancer("kubernetes", _service(443, 80))
    assert nlb.writes() == []
    assert view is not None
    assert [(lst.port, lst.protocol) for lst in view.listeners] == [(80, "TCP"), (443, "TCP")]
    for listener in view.listeners:
        members = {(t.instance, t.port, t.health) for t in listener.targets}
        want = {(f"i-{i}", 30000 + listener.port, TargetHealth.UNKNOWN) for i in (1, 2)}
        assert members == want
    assert view.detail["id"].startswith("nlb-")
    assert view.detail["dns name"]
    assert "cn-hangzhou-h" in view.detail["zones"]


def test_a_service_without_a_balancer_is_described_as_none() -> None:
    router = _router(FakeNlb(0))
    assert router.describe_load_balancer("kubernetes", _service(80)) is None
