"""A classic balancer's members from the Service's endpoints, as upstream v2.14.0 makes them
(pkg/controller/service/clbv1/vgroups.go buildLocalBackends, buildENIBackends,
setWeightBackends; updateVServerGroupENIBackendID): ``externalTrafficPolicy: Local`` keeps the
Nodes running a ready endpoint, weighted by their endpoint count; ENI backends are the
endpoints' IPs on their ENIs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from slb_fake import FakeSlb
from test_clb_alibabacloud import A, ensure, service, world
from test_clb_backends_alibabacloud import NODES

from kccm.cloudprovider import InvalidServiceConfig, Service, ServiceEndpoint
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import local_members
from kccm.providers.alibabacloud.loadbalancer.spec import ListenerSpec

ENI = "service.beta.kubernetes.io/backend-type"
PORTS = (("http", 8080),)


def ep(address: str, node: str = "a", ready: bool = True) -> ServiceEndpoint:
    return ServiceEndpoint(address, node, ready, PORTS)


def svc(annotations: dict[str, str] | None = None, policy: str = "Local", **port: Any) -> Any:
    made = service(annotations, externalTrafficPolicy=policy)
    made["spec"]["ports"][0].update({"name": "http", "targetPort": 8080, **port})
    return made


def reading(lbs: ClassicLoadBalancers, endpoints: Sequence[ServiceEndpoint]) -> None:
    def read(service: Service) -> Sequence[ServiceEndpoint]:
        return endpoints

    lbs.set_endpoints_reader(read)


def group(slb: FakeSlb) -> tuple[str, dict[str, tuple[int, int]]]:
    """The one group's name and ``{member: (port, weight)}``."""
    (found,) = slb.vgroups.values()
    members = {k: (int(v["Port"]), int(v["Weight"])) for k, v in found["backends"].items()}
    return found["name"], members


LOCAL_GROUP = "k8s/30080/web/default/c1"


@pytest.mark.parametrize(
    ("endpoints", "annotations", "expected"),
    [
        pytest.param(
            [ep("10.1.0.1"), ep("10.1.0.2"), ep("10.1.0.3", "c")],
            {},
            {"i-a": (30080, 2), "i-c": (30080, 1)},
            id="weight-is-the-node-s-endpoint-count",
        ),
        pytest.param(
            [ep("10.1.0.1"), ep("10.1.0.3", "c", ready=False)],
            {},
            {"i-a": (30080, 1)},
            id="unready-endpoint-left-out",
        ),
        pytest.param(
            [ep("10.1.0.1"), ep("10.1.0.4", "f"), ep("10.1.0.5", "d"), ep("10.1.0.6", "zz")],
            {},
            {"i-a": (30080, 1)},
            id="excluded-master-and-unknown-nodes-left-out",
        ),
        pytest.param(
            [ep("10.1.0.1"), ep("10.1.0.3", "c")],
            {f"{A}backend-label": "pool=web"},
            {"i-a": (30080, 1)},
            id="backend-label-still-filters",
        ),
        pytest.param(
            [ep("10.1.0.1")],
            {f"{A}default-weight": "30"},
            {"i-a": (30080, 1)},
            id="default-weight-unused",
        ),
        pytest.param([], {}, {}, id="no-endpoints-no-members"),
    ],
)
def test_local_members(
    endpoints: list[ServiceEndpoint], annotations: dict[str, str], expected: dict[str, Any]
) -> None:
    slb, lbs = world()
    reading(lbs, endpoints)
    ensure(lbs, svc(annotations), NODES)
    assert group(slb) == (LOCAL_GROUP, expected)


@pytest.mark.parametrize(
    ("total", "counts", "expected"),
    [
        pytest.param(None, {"a": 3, "c": 1}, {"i-a": 3, "i-c": 1}, id="count"),
        pytest.param(100, {"a": 3, "c": 1}, {"i-a": 75, "i-c": 25}, id="percent"),
        pytest.param(2, {"a": 3, "c": 1}, {"i-a": 1, "i-c": 1}, id="percent-at-least-1"),
        pytest.param(0, {"a": 3, "c": 1}, {"i-a": 0, "i-c": 0}, id="percent-zero"),
    ],
)
def test_local_weights(total: int | None, counts: dict[str, int], expected: dict[str, int]) -> None:
    endpoints = [ep(f"10.{n}.0.{i}", n) for n, c in counts.items() for i in range(c)]
    listener = ListenerSpec(80, "tcp", "g", 30080, target="8080")
    found = local_members(endpoints, listener, {"a": "i-a", "c": "i-c"}, total)
    assert {b.server_id: b.weight for b in found} == expected


ENI_GROUP = "k8s/8080/web/default/c1"


@pytest.mark.parametrize(
    ("annotations", "config", "port", "expected"),
    [
        pytest.param(
            {ENI: "eni"},
            "",
            {},
            {
                "eni-1/10.1.0.1": (8080, 100),
                "eni-1/10.1.0.2": (8080, 100),
                "eni-2/10.1.0.3": (8080, 100),
            },
            id="annotation",
        ),
        pytest.param(
            {},
            "global:\n  clusterID: c1\n  serviceBackendType: eni\n",
            {},
            {
                "eni-1/10.1.0.1": (8080, 100),
                "eni-1/10.1.0.2": (8080, 100),
                "eni-2/10.1.0.3": (8080, 100),
            },
            id="cloud-config",
        ),
        pytest.param(
            {ENI: "eni", f"{A}default-weight": "20"},
            "",
            {},
            {
                "eni-1/10.1.0.1": (8080, 20),
                "eni-1/10.1.0.2": (8080, 20),
                "eni-2/10.1.0.3": (8080, 20),
            },
            id="default-weight",
        ),
    ],
)
def test_eni_members(
    annotations: dict[str, str], config: str, port: dict[str, Any], expected: dict[str, Any]
) -> None:
    slb, lbs = world(config)
    slb.enis = {"10.1.0.1": "eni-1", "10.1.0.2": "eni-1", "10.1.0.3": "eni-2"}
    reading(
        lbs,
        [ep("10.1.0.1"), ep("10.1.0.2", "b"), ep("10.1.0.3", "zz"), ep("10.1.0.9", ready=False)],
    )
    ensure(lbs, svc(annotations, policy="Cluster", **port), NODES)
    assert group(slb) == (ENI_GROUP, expected)
    [(_, asked)] = [c for c in slb.calls if c[0] == "DescribeNetworkInterfaces"]
    assert (asked["VpcId"], asked["PrivateIpAddress.3"]) == ("vpc-1", "10.1.0.3")


def test_a_named_target_port_is_the_endpoint_s_port_of_the_service_port_s_name() -> None:
    slb, lbs = world()
    slb.enis = {"10.1.0.1": "eni-1", "10.1.0.2": "eni-1"}
    other = ServiceEndpoint("10.1.0.2", "a", True, (("metrics", 9090),))
    reading(lbs, [ep("10.1.0.1"), other])
    ensure(lbs, svc({ENI: "eni"}, targetPort="web"), NODES)
    assert group(slb) == ("k8s/web/web/default/c1", {"eni-1/10.1.0.1": (8080, 100)})


def test_an_ip_without_an_eni_is_left_out_with_a_warning() -> None:
    slb, lbs = world()
    slb.enis = {"10.1.0.1": "eni-1"}
    reading(lbs, [ep("10.1.0.1"), ep("10.1.0.7")])
    with collect_service_warnings() as warnings:
        lbs.ensure_load_balancer("kubernetes", svc({ENI: "eni"}), NODES)
    assert group(slb)[1] == {"eni-1/10.1.0.1": (8080, 100)}
    assert [(w.reason, w.message) for w in warnings] == [
        ("SkipSyncBackends", "Not sync pods [10.1.0.7] whose eni is invalid")
    ]


def test_endpoints_moving_between_nodes_move_the_members_and_nothing_else() -> None:
    slb, lbs = world()
    endpoints = [ep("10.1.0.1"), ep("10.1.0.2")]
    reading(lbs, endpoints)
    ensure(lbs, svc(), NODES)
    slb.calls.clear()
    ensure(lbs, svc(), NODES)
    assert slb.mutating() == []
    endpoints[1] = ep("10.1.0.2", "c")
    ensure(lbs, svc(), NODES)
    assert group(slb)[1] == {"i-a": (30080, 1), "i-c": (30080, 1)}
    assert slb.mutating() == ["AddVServerGroupBackendServers", "SetVServerGroupAttribute"]


@pytest.mark.parametrize(
    ("annotations", "config", "policy", "expected"),
    [
        pytest.param({}, "", "Local", True, id="local"),
        pytest.param({ENI: "eni"}, "", "Cluster", True, id="eni-annotation"),
        pytest.param({}, "global:\n  serviceBackendType: eni\n", "Cluster", True, id="eni-config"),
        pytest.param(
            {ENI: "ecs"},
            "global:\n  serviceBackendType: eni\n",
            "Cluster",
            False,
            id="ecs-annotation-wins",
        ),
        pytest.param({}, "", "Cluster", False, id="cluster-ecs"),
    ],
)
def test_which_services_follow_their_endpoints(
    annotations: dict[str, str], config: str, policy: str, expected: bool
) -> None:
    _, lbs = world(config)
    assert lbs.uses_endpoints(svc(annotations, policy=policy)) is expected


def test_without_a_reader_eni_is_refused_and_local_gets_every_node() -> None:
    slb, lbs = world()
    with pytest.raises(InvalidServiceConfig, match="need the Service's endpoints"):
        ensure(lbs, svc({ENI: "eni"}), NODES)
    with collect_service_warnings() as warnings:
        lbs.ensure_load_balancer("kubernetes", svc(), NODES)
    assert sorted(group(slb)[1]) == ["i-a", "i-b", "i-c"]
    assert [w.reason for w in warnings] == ["UnsupportedTrafficPolicy"]
