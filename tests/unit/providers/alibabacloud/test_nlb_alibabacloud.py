"""Network load balancers (NLB) for LoadBalancer Services of class alibabacloud.com/nlb, over
an in-memory NLB at the RPC seam (upstream pkg/controller/service/nlbv2 v2.14.0 is the
reference). Jobs are polled on a step clock: no test sleeps."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from nlb_fake import FakeNlb, unflatten

from kccm.cloudprovider import InvalidServiceConfig
from kccm.cloudprovider.servicewarnings import collect_service_warnings
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlb import NetworkLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlbapi import NlbApi, Waiter, flatten
from kccm.providers.alibabacloud.loadbalancer.router import AlibabaLoadBalancers, wants_nlb

A = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
NAME = "a1b4e28ba2fa111d2883f0016d3cca427"[:32]
ZONES = {f"{A}zone-maps": "cn-hangzhou-a:vsw-a,cn-hangzhou-b:vsw-b"}
NODES = (
    {"metadata": {"name": "n1"}, "spec": {"providerID": "cn-hangzhou.i-1"}},
    {"metadata": {"name": "n2"}, "spec": {"providerID": "cn-hangzhou.i-2"}},
    {
        "metadata": {
            "name": "n3",
            "labels": {"node.kubernetes.io/exclude-from-external-load-balancers": ""},
        },
        "spec": {"providerID": "cn-hangzhou.i-3"},
    },
)


class StepClock:
    """Blocking sleeps that move time forward at once, and record themselves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep_blocking(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def service(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web",
            "namespace": "default",
            "uid": UID,
            "annotations": {**ZONES, **(annotations or {})},
        },
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": "alibabacloud.com/nlb",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}],
            **spec,
        },
    }


def world(job_polls: int = 1) -> tuple[FakeNlb, NetworkLoadBalancers, StepClock]:
    nlb, clock = FakeNlb(job_polls), StepClock()
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    return nlb, NetworkLoadBalancers(NlbApi(nlb, Waiter(clock)), config, "vpc-1", "c1"), clock


def ensure(lbs: NetworkLoadBalancers, svc: dict[str, Any], nodes: Any = NODES) -> str:
    with collect_service_warnings():
        status = lbs.ensure(svc, nodes)
    return status.ingress[0].hostname


def the_balancer(nlb: FakeNlb) -> dict[str, Any]:
    (lb,) = nlb.balancers.values()
    return lb


def test_a_new_service_gets_a_tagged_nlb_listener_and_server_group() -> None:
    nlb, lbs, clock = world()
    hostname = ensure(lbs, service())
    lb = the_balancer(nlb)
    assert hostname == lb["DNSName"]
    assert lb["LoadBalancerName"] == NAME
    tags = {t["TagKey"]: t["TagValue"] for t in lb["Tags"]}
    assert tags == {"kubernetes.do.not.delete": NAME, "ack.aliyun.com": "c1"}
    assert lb["AddressType"] == "Internet"
    assert lb["DeletionProtectionConfig"] == {"Enabled": True}
    assert lb["ModificationProtectionConfig"]["Status"] == "ConsoleProtection"
    assert [(z["ZoneId"], z["VSwitchId"]) for z in lb["ZoneMappings"]] == [
        ("cn-hangzhou-a", "vsw-a"),
        ("cn-hangzhou-b", "vsw-b"),
    ]
    ((group_id, group),) = nlb.groups.items()
    assert group["ServerGroupName"] == "k8s.30080.TCP.web.default.c1"
    assert {t["Key"]: t["Value"] for t in group["Tags"]} == tags
    assert [(s["ServerId"], s["ServerType"], s["Port"], s["Weight"]) for s in group["Servers"]] == [
        ("i-1", "Ecs", 30080, 100),
        ("i-2", "Ecs", 30080, 100),
    ]
    assert {s["Description"] for s in group["Servers"]} == {"k8s.30080.TCP.web.default.c1"}
    ((listener),) = nlb.listeners.values()
    assert (listener["ListenerProtocol"], listener["ListenerPort"]) == ("TCP", 80)
    assert listener["ListenerDescription"] == "k8s.80.TCP.web.default.c1"
    assert listener["ServerGroupId"] == group_id
    assert clock.slept
    assert all(s in (1.2, 3.0, 20.0) for s in clock.slept)


def test_jobs_are_waited_for_on_the_clock_and_a_failed_job_is_an_error() -> None:
    nlb, lbs, clock = world(job_polls=2)
    ensure(lbs, service())
    polls = nlb.actions().count("GetJobStatus")
    writes_with_jobs = [a for a in nlb.writes() if a not in ("CreateLoadBalancer",)]
    assert polls == 3 * len(writes_with_jobs)  # Processing, Processing, Succeeded
    api = NlbApi(nlb, Waiter(clock))
    nlb.jobs["job-x"] = 100
    with pytest.raises(AlibabaError, match="still Processing"):
        api.wait_job("CreateListener", "job-x")


def test_a_second_ensure_makes_no_mutating_call() -> None:
    nlb, lbs, _ = world()
    svc = service(
        {
            f"{A}health-check-flag": "on",
            f"{A}health-check-type": "http",
            f"{A}health-check-uri": "/healthz",
            f"{A}healthy-threshold": "4",
            f"{A}scheduler": "wrr",
            f"{A}connection-drain": "on",
            f"{A}connection-drain-timeout": "30",
            f"{A}cps": "100",
            f"{A}proxy-protocol": "on",
            f"{A}additional-resource-tags": "team=a",
            f"{A}security-group-ids": "sg-1",
            f"{A}cross-zone-enabled": "off",
            f"{A}name": "my-nlb",
        },
        ports=[
            {"port": 80, "protocol": "TCP", "nodePort": 30080},
            {"port": 53, "protocol": "UDP", "nodePort": 30053},
        ],
    )
    ensure(lbs, svc)
    before = len(nlb.writes())
    ensure(lbs, svc)
    assert nlb.writes()[before:] == []


# table: (id, annotation change, the writes it makes)
DRIFT = [
    ("rename", {f"{A}name": "other"}, ["UpdateLoadBalancerAttribute"]),
    ("address-type", {f"{A}address-type": "intranet"}, ["UpdateLoadBalancerAddressTypeConfig"]),
    ("zones", {f"{A}zone-maps": "cn-hangzhou-c:vsw-c"}, ["UpdateLoadBalancerZones"]),
    ("join-sg", {f"{A}security-group-ids": "sg-9"}, ["LoadBalancerJoinSecurityGroup"]),
    ("scheduler", {f"{A}scheduler": "sch"}, ["UpdateServerGroupAttribute"]),
    ("health", {f"{A}health-check-flag": "off"}, ["UpdateServerGroupAttribute"]),
    ("weight", {f"{A}default-weight": "50"}, ["UpdateServerGroupServersAttribute"]),
    ("cps", {f"{A}cps": "7"}, ["UpdateListenerAttribute"]),
    ("tags", {f"{A}additional-resource-tags": "x=y"}, ["TagResources"]),
]


@pytest.mark.parametrize(("change", "writes"), [d[1:] for d in DRIFT], ids=[d[0] for d in DRIFT])
def test_an_annotation_change_writes_only_what_differs(
    change: dict[str, str], writes: list[str]
) -> None:
    nlb, lbs, _ = world()
    ensure(lbs, service())
    before = len(nlb.calls)
    ensure(lbs, service(change))
    made = [a for a, _ in nlb.calls[before:] if not a.startswith(("List", "Get"))]
    assert made == writes
    again = len(nlb.calls)
    ensure(lbs, service(change))
    assert all(a.startswith(("List", "Get")) for a, _ in nlb.calls[again:])


def test_ports_and_nodes_are_followed_and_drift_repaired() -> None:
    nlb, lbs, _ = world()
    ensure(lbs, service())
    moved = service(ports=[{"port": 8080, "protocol": "TCP", "nodePort": 31000}])
    ensure(lbs, moved, NODES[:1])
    ((listener),) = nlb.listeners.values()
    assert (listener["ListenerPort"], listener["ListenerDescription"]) == (
        8080,
        "k8s.8080.TCP.web.default.c1",
    )
    ((group),) = nlb.groups.values()
    assert group["ServerGroupName"] == "k8s.31000.TCP.web.default.c1"
    assert [s["ServerId"] for s in group["Servers"]] == ["i-1"]
    # an operator stops the listener and removes a server: the next ensure repairs both
    listener["ListenerStatus"] = "Stopped"
    group["Servers"].clear()
    before = len(nlb.calls)
    ensure(lbs, moved, NODES[:1])
    made = [a for a, _ in nlb.calls[before:] if not a.startswith(("List", "Get"))]
    assert made == ["AddServersToServerGroup", "StartListener"]
    assert listener["ListenerStatus"] == "Running"


def test_another_owners_servers_are_kept() -> None:
    nlb, lbs, _ = world()
    ensure(lbs, service())
    ((group),) = nlb.groups.values()
    group["Servers"].append(
        {"ServerId": "i-9", "ServerType": "Ecs", "Port": 1, "Weight": 1, "Description": "mine"}
    )
    ensure(lbs, service(), NODES[:1])
    assert sorted(s["ServerId"] for s in group["Servers"]) == ["i-1", "i-9"]


def test_an_upstream_nlb_is_adopted_with_no_write() -> None:
    """What upstream's manager leaves: found by tag, same names: kccm writes nothing."""
    nlb, lbs, _ = world()
    ensure(lbs, service())
    made = copy.deepcopy((nlb.balancers, nlb.listeners, nlb.groups))
    _, fresh, _ = world()
    fresh.api = NlbApi(nlb, Waiter(StepClock()))
    before = len(nlb.calls)
    ensure(fresh, service())
    assert all(a.startswith(("List", "Get")) for a, _ in nlb.calls[before:])
    assert (nlb.balancers, nlb.listeners, nlb.groups) == made


def test_delete_leaves_nothing_and_preserve_keeps_the_balancer_untagged() -> None:
    nlb, lbs, _ = world()
    ensure(lbs, service())
    lbs.delete(service())
    assert (nlb.balancers, nlb.listeners, nlb.groups) == ({}, {}, {})
    assert "UpdateLoadBalancerProtection" in nlb.actions()
    lbs.delete(service())  # idempotent: nothing found, nothing written
    keep = service({f"{A}preserve-lb-on-delete": "true"})
    ensure(lbs, keep)
    lbs.delete(keep)
    lb = the_balancer(nlb)
    assert (lb["Tags"], nlb.listeners) == ([], {})
    assert lb["DeletionProtectionConfig"] == {"Enabled": False}
    assert lb["ModificationProtectionConfig"]["Status"] == "NonProtection"
    assert all(g["Tags"] == [] for g in nlb.groups.values())


def test_a_reused_nlb_keeps_its_listeners_and_is_never_deleted() -> None:
    nlb, lbs, _ = world()
    lb_id = nlb._CreateLoadBalancer(
        {"LoadBalancerName": "own", "AddressType": "Intranet", "VpcId": "vpc-1"}
    )["LoadbalancerId"]
    nlb._CreateListener(
        {
            "LoadBalancerId": lb_id,
            "ListenerProtocol": "TCP",
            "ListenerPort": "22",
            "ListenerDescription": "ssh",
            "ServerGroupId": "sgp-x",
        }
    )
    reuse = service({f"{A}id": lb_id, f"{A}force-override-listeners": "true"})
    ensure(lbs, reuse)
    assert sorted(v["ListenerPort"] for v in nlb.listeners.values()) == [22, 80]
    lbs.delete(reuse)
    assert lb_id in nlb.balancers
    assert [v["ListenerPort"] for v in nlb.listeners.values()] == [22]
    assert nlb.groups == {}


# table: (id, annotations, the error names this annotation)
REFUSED = [
    ("no-zones", {f"{A}zone-maps": ""}, "zone-maps"),
    ("bad-zone", {f"{A}zone-maps": "only-zone"}, "zone-maps"),
    ("bad-protocol", {f"{A}protocol-port": "http:80"}, "protocol-port"),
    ("bad-cps", {f"{A}cps": "many"}, "cps"),
    ("bad-group-type", {f"{A}server-group-type": "Eni"}, "server-group-type"),
]


@pytest.mark.parametrize(
    ("annotations", "named"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_a_value_upstream_refuses_names_the_annotation(
    annotations: dict[str, str], named: str
) -> None:
    nlb, lbs, _ = world()
    with pytest.raises(InvalidServiceConfig) as err:
        ensure(lbs, service(annotations))
    assert named in str(err.value)
    assert nlb.writes() == []


def test_tcpssl_ip_groups_and_not_yet_annotations() -> None:
    nlb, lbs, _ = world()
    nodes = [
        {**n, "status": {"addresses": [{"type": "InternalIP", "address": f"10.0.0.{i}"}]}}
        for i, n in enumerate(NODES[:2], 1)
    ]
    svc = service(
        {
            f"{A}protocol-port": "tcpssl:80",
            f"{A}cert-id": "cert-1",
            f"{A}server-group-type": "ip",
            f"{A}bandwidth-package-id": "cbwp-1",
        }
    )
    with collect_service_warnings() as warned:
        lbs.ensure(svc, nodes)
    ((listener),) = nlb.listeners.values()
    assert (listener["ListenerProtocol"], listener["CertificateIds"]) == ("TCPSSL", ["cert-1"])
    ((group),) = nlb.groups.values()
    assert group["ServerGroupType"] == "Ip"
    assert [(s["ServerId"], s["ServerIp"]) for s in group["Servers"]] == [
        ("10.0.0.1", "10.0.0.1"),
        ("10.0.0.2", "10.0.0.2"),
    ]
    assert [w.reason for w in warned] == ["UnsupportedAnnotation"]
    assert "bandwidth-package-id" in next(iter(warned)).message


def test_the_router_sends_nlb_services_to_the_nlb() -> None:
    nlb, lbs, _ = world()
    config = load_alibaba_config(
        "global:\n  clusterID: c1\n  featureGates: LoadBalancerTypeAnnotation=true\n"
    )
    router = AlibabaLoadBalancers(ClassicLoadBalancers(nlb, config, "vpc-1"), lbs)
    assert list(router.load_balancer_classes()) == ["alibabacloud.com/nlb"]
    assert wants_nlb(service(), set())
    annotated = service({f"{A}type": "nlb"})
    del annotated["spec"]["loadBalancerClass"]
    assert wants_nlb(annotated, {"LoadBalancerTypeAnnotation"})
    assert not wants_nlb(annotated, set())
    with collect_service_warnings():
        status = router.ensure_load_balancer("k", annotated, NODES)
    assert status.ingress[0].hostname == the_balancer(nlb)["DNSName"]
    assert router.get_load_balancer("k", annotated)[1]
    assert router.service_finalizer(annotated) == "service.k8s.alibaba/nlb"
    labels = router.service_labels(annotated)
    assert labels["service.k8s.alibaba/loadbalancer-id"] == the_balancer(nlb)["LoadBalancerId"]
    router.ensure_load_balancer_deleted("k", annotated)
    assert nlb.balancers == {}


def test_flatten_is_the_sdk_form() -> None:
    flat = flatten("", {"Tag": [{"Key": "a", "Value": "b"}], "HealthCheckConfig": {"On": True}})
    assert flat == {"Tag.1.Key": "a", "Tag.1.Value": "b", "HealthCheckConfig.On": "true"}
    assert unflatten(flat) == {
        "Tag": [{"Key": "a", "Value": "b"}],
        "HealthCheckConfig": {"On": "true"},
    }


def test_the_router_gives_the_clb_and_the_nlb_the_endpoints() -> None:
    nlb, lbs, _ = world()
    config = load_alibaba_config("global:\n  clusterID: c1\n")
    clb = ClassicLoadBalancers(nlb, config, "vpc-1")
    router = AlibabaLoadBalancers(clb, lbs)
    local = service(externalTrafficPolicy="Local")
    assert router.uses_endpoints(local) == lbs.uses_endpoints(local)
    del local["spec"]["loadBalancerClass"]
    assert router.uses_endpoints(local) == clb.uses_endpoints(local)
