"""NLB server groups that follow the Service's endpoints (externalTrafficPolicy Local, ENI
backends), over the in-memory NLB; upstream pkg/controller/service/nlbv2/server_groups.go
v2.14.0 (buildLocalBackends, buildENIBackends, podNumberAlgorithm) is the reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from nlb_fake import FakeNlb
from test_nlb_alibabacloud import NODES, StepClock, service

from kccm.cloudprovider import InvalidServiceConfig, ServiceEndpoint
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlb import NetworkLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlbapi import NlbApi, Waiter
from kccm.providers.alibabacloud.loadbalancer.router import AlibabaLoadBalancers

ENI = "service.beta.kubernetes.io/backend-type"
GROUP_TYPE = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-server-group-type"
WEIGHT = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-default-weight"
ENIS = {"10.1.0.1": "eni-a", "10.1.0.2": "eni-b"}  # 10.1.0.9 has none
IP_NODES = tuple(
    {**n, "status": {"addresses": [{"type": "InternalIP", "address": f"192.168.0.{i}"}]}}
    for i, n in enumerate(NODES, 1)
)


class Wire:
    """The NLB fake, and ECS's DescribeNetworkInterfaces by private IP."""

    def __init__(self) -> None:
        self.nlb = FakeNlb()
        self.ecs_calls = 0

    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if product != "ecs":
            return self.nlb.call(product, action, params)
        assert action == "DescribeNetworkInterfaces"
        self.ecs_calls += 1
        ips = [v for k, v in params.items() if k.startswith("PrivateIpAddress.")]
        sets = [
            {
                "NetworkInterfaceId": ENIS[ip],
                "PrivateIpSets": {"PrivateIpSet": [{"PrivateIpAddress": ip}]},
            }
            for ip in ips
            if ip in ENIS
        ]
        return {"NetworkInterfaceSets": {"NetworkInterfaceSet": sets}}


def ep(address: str, node: str = "n1", ready: bool = True) -> ServiceEndpoint:
    return ServiceEndpoint(address, node, ready, (("web", 8080),))


def world(endpoints: Sequence[ServiceEndpoint] | None) -> tuple[Wire, NetworkLoadBalancers]:
    wire = Wire()
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    lbs = NetworkLoadBalancers(NlbApi(wire, Waiter(StepClock())), config, "vpc-1", "c1")
    if endpoints is not None:
        lbs.set_endpoints_reader(lambda _: list(endpoints))
    return wire, lbs


def svc(annotations: dict[str, str] | None = None, local: bool = True) -> dict[str, Any]:
    s = service(
        annotations, ports=[{"port": 80, "protocol": "TCP", "nodePort": 30080, "targetPort": 8080}]
    )
    if local:
        s["spec"]["externalTrafficPolicy"] = "Local"
    return s


def servers(wire: Wire) -> dict[str, dict[str, tuple[str, int, int]]]:
    """``{group name: {server id: (type, port, weight)}}``."""
    return {
        g["ServerGroupName"]: {
            s["ServerId"]: (s["ServerType"], s["Port"], s["Weight"]) for s in g["Servers"]
        }
        for g in wire.nlb.groups.values()
    }


def run(lbs: NetworkLoadBalancers, s: dict[str, Any], nodes: Any = NODES) -> list[str]:
    with collect_service_warnings() as warnings:
        lbs.ensure(s, nodes)
    return [w.reason for w in warnings]


NODE_GROUP = "k8s.30080.TCP.web.default.c1"
POD_GROUP = "k8s.8080.TCP.web.default.c1"
CASES = [
    pytest.param(
        svc(),
        [ep("10.1.0.1"), ep("10.1.0.2"), ep("10.1.0.3", "n2"), ep("10.1.0.4", "n2", ready=False)],
        NODES,
        {NODE_GROUP: {"i-1": ("Ecs", 30080, 2), "i-2": ("Ecs", 30080, 1)}},
        [],
        id="local-nodes-with-ready-endpoints-weighed-by-count",
    ),
    pytest.param(
        svc(),
        [ep("10.1.0.1", "n3"), ep("10.1.0.2", "gone")],
        NODES,
        {NODE_GROUP: {}},
        [],
        id="local-excluded-and-unknown-nodes-left-out",
    ),
    pytest.param(
        svc({GROUP_TYPE: "ip"}),
        [ep("10.1.0.1"), ep("10.1.0.2"), ep("10.1.0.3", "n2")],
        IP_NODES,
        {NODE_GROUP: {"192.168.0.1": ("Ip", 30080, 1), "192.168.0.2": ("Ip", 30080, 1)}},
        [],
        id="local-ip-group-node-addresses-weight-one",
    ),
    pytest.param(
        svc({ENI: "eni"}, local=False),
        [ep("10.1.0.1"), ep("10.1.0.2", "n2"), ep("10.1.0.9"), ep("10.1.0.5", ready=False)],
        NODES,
        {POD_GROUP: {"eni-a": ("Eni", 8080, 100), "eni-b": ("Eni", 8080, 100)}},
        ["SkipSyncBackends"],
        id="eni-pods-by-their-eni-on-the-target-port",
    ),
    pytest.param(
        svc({ENI: "eni", WEIGHT: "30"}),
        [ep("10.1.0.1")],
        NODES,
        {POD_GROUP: {"eni-a": ("Eni", 8080, 30)}},
        [],
        id="eni-wins-over-local-default-weight",
    ),
    pytest.param(
        svc({ENI: "eni", GROUP_TYPE: "ip"}, local=False),
        [ep("10.1.0.1"), ep("10.1.0.9")],
        NODES,
        {POD_GROUP: {"10.1.0.1": ("Ip", 8080, 100), "10.1.0.9": ("Ip", 8080, 100)}},
        [],
        id="eni-ip-group-pod-addresses-no-eni-lookup",
    ),
    pytest.param(
        svc(),
        None,
        NODES,
        {NODE_GROUP: {"i-1": ("Ecs", 30080, 100), "i-2": ("Ecs", 30080, 100)}},
        ["UnsupportedTrafficPolicy"],
        id="local-without-a-reader-every-node-and-a-warning",
    ),
]


@pytest.mark.parametrize(("s", "endpoints", "nodes", "want", "warned"), CASES)
def test_server_groups_follow_endpoints(
    s: dict[str, Any],
    endpoints: Sequence[ServiceEndpoint] | None,
    nodes: Any,
    want: dict[str, Any],
    warned: list[str],
) -> None:
    wire, lbs = world(endpoints)
    assert run(lbs, s, nodes) == warned
    assert servers(wire) == want
    if s["metadata"]["annotations"].get(GROUP_TYPE) == "ip":
        assert wire.ecs_calls == 0


def test_eni_looks_up_once_for_every_port() -> None:
    wire, lbs = world([ep("10.1.0.1"), ep("10.1.0.2")])
    s = svc({ENI: "eni"}, local=False)
    s["spec"]["ports"].append(
        {"port": 81, "protocol": "TCP", "nodePort": 30081, "targetPort": 8080}
    )
    run(lbs, s)
    assert wire.ecs_calls == 1


def test_endpoints_moving_rewrite_only_the_servers() -> None:
    found = [ep("10.1.0.1"), ep("10.1.0.2", "n2")]
    wire, lbs = world(found)
    s = svc()
    run(lbs, s)
    before = len(wire.nlb.writes())
    run(lbs, s)
    assert wire.nlb.writes()[before:] == []  # unchanged: no write
    found[1] = ep("10.1.0.2", "n1")
    run(lbs, s)
    assert wire.nlb.writes()[before:] == [
        "RemoveServersFromServerGroup",
        "UpdateServerGroupServersAttribute",
    ]
    assert servers(wire) == {NODE_GROUP: {"i-1": ("Ecs", 30080, 2)}}


def test_eni_without_a_reader_is_refused() -> None:
    _, lbs = world(None)
    with pytest.raises(InvalidServiceConfig):
        run(lbs, svc({ENI: "eni"}, local=False))


@pytest.mark.parametrize(
    ("s", "uses"),
    [
        pytest.param(svc(), True, id="local"),
        pytest.param(svc({ENI: "eni"}, local=False), True, id="eni"),
        pytest.param(svc(local=False), False, id="cluster"),
    ],
)
def test_the_router_asks_the_nlb_which_services_use_endpoints(
    s: dict[str, Any], uses: bool
) -> None:
    wire, lbs = world(None)
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    router = AlibabaLoadBalancers(ClassicLoadBalancers(wire, config, "vpc-1"), lbs)
    assert router.uses_endpoints(s) is uses
    router.set_endpoints_reader(lambda _: [ep("10.1.0.1")])
    with collect_service_warnings():
        router.ensure_load_balancer("k", svc(), NODES)
    assert servers(wire) == {NODE_GROUP: {"i-1": ("Ecs", 30080, 1)}}
