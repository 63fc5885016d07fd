"""The emulator's SLB API itself, signed calls as any client sends them: the refusals a real
SLB gives (deletion protection, a used port, a group a listener uses, an unknown balancer,
a member that is no instance), ``ClientToken`` idempotence, the ``Tags`` filter, listener
defaults and paging, EIP paging."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from alibaba_emu_support import VPC, VSWITCH, parts, seeded

from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.providers.alibabacloud.errors import AlibabaError

Call = Callable[..., dict[str, Any]]


@pytest.fixture
def slb(clean: AlibabaEmulator) -> Call:
    rpc = parts(clean).rpc

    def call(action: str, product: str = "slb", **params: Any) -> dict[str, Any]:
        return rpc.call(product, action, {"RegionId": "cn-hangzhou", **params})

    return call


@pytest.fixture
def lb(clean: AlibabaEmulator, slb: Call) -> Iterator[str]:
    made = slb("CreateLoadBalancer", AddressType="intranet", VpcId=VPC, VSwitchId=VSWITCH)
    yield str(made["LoadBalancerId"])
    clean.admin.delete_balancer(made["LoadBalancerId"])


@pytest.fixture
def instance(clean: AlibabaEmulator) -> Iterator[str]:
    for made in seeded(clean, "10.0.2.1"):
        yield str(made["InstanceId"])


def _protected(slb: Call, lb: str) -> None:
    slb("SetLoadBalancerDeleteProtection", LoadBalancerId=lb, DeleteProtection="on")
    slb("DeleteLoadBalancer", LoadBalancerId=lb)


def _same_port_twice(slb: Call, lb: str) -> None:
    slb("CreateLoadBalancerTCPListener", LoadBalancerId=lb, ListenerPort=80, Bandwidth=-1)
    slb("CreateLoadBalancerHTTPListener", LoadBalancerId=lb, ListenerPort=80, Bandwidth=-1)


def _used_group(slb: Call, lb: str) -> None:
    group = slb("CreateVServerGroup", LoadBalancerId=lb, VServerGroupName="g")["VServerGroupId"]
    slb("CreateLoadBalancerTCPListener", LoadBalancerId=lb, ListenerPort=81, VServerGroupId=group)
    slb("DeleteVServerGroup", VServerGroupId=group)


def _unknown_balancer(slb: Call, lb: str) -> None:
    slb("DescribeLoadBalancerAttribute", LoadBalancerId="lb-none")


def _no_such_instance(slb: Call, lb: str) -> None:
    group = slb("CreateVServerGroup", LoadBalancerId=lb, VServerGroupName="g")["VServerGroupId"]
    body = json.dumps([{"ServerId": "i-none", "Port": 80, "Weight": 100}])
    slb("AddVServerGroupBackendServers", VServerGroupId=group, BackendServers=body)


def _another_balancers_group(slb: Call, lb: str) -> None:
    other = slb("CreateLoadBalancer", AddressType="internet")["LoadBalancerId"]
    try:
        group = slb("CreateVServerGroup", LoadBalancerId=other, VServerGroupName="g")
        slb(
            "CreateLoadBalancerTCPListener",
            LoadBalancerId=lb,
            ListenerPort=82,
            VServerGroupId=group["VServerGroupId"],
        )
    finally:
        slb("DeleteLoadBalancer", LoadBalancerId=other)


def _https_without_certificate(slb: Call, lb: str) -> None:
    slb("CreateLoadBalancerHTTPSListener", LoadBalancerId=lb, ListenerPort=443)


REFUSALS = {
    "delete-protection-on": (_protected, "OperationDenied.DeleteProtectionIsOn"),
    "a-port-used-by-tcp": (_same_port_twice, "ListenerAlreadyExists"),
    "a-group-a-listener-uses": (_used_group, "RspoolVipExist"),
    "an-unknown-balancer": (_unknown_balancer, "InvalidLoadBalancerId.NotFound"),
    "a-member-that-is-no-instance": (_no_such_instance, "InvalidBackendServers.ServerIdNotExist"),
    "another-balancers-group": (_another_balancers_group, "InvalidParameter.VServerGroupId"),
    "https-without-certificate": (_https_without_certificate, "MissingParameter"),
}


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
def test_the_api_refuses_as_slb_does(slb: Call, lb: str, case: str) -> None:
    act, code = REFUSALS[case]
    with pytest.raises(AlibabaError) as err:
        act(slb, lb)
    assert err.value.code == code


def test_a_client_token_sent_again_makes_no_second_balancer(
    clean: AlibabaEmulator, slb: Call
) -> None:
    first = slb("CreateLoadBalancer", ClientToken="t-1", LoadBalancerName="same")
    again = slb("CreateLoadBalancer", ClientToken="t-1", LoadBalancerName="same")
    try:
        assert again["LoadBalancerId"] == first["LoadBalancerId"]
        assert clean.state()["balancers"] == [first["LoadBalancerId"]]
    finally:
        slb("DeleteLoadBalancer", LoadBalancerId=first["LoadBalancerId"])


def test_describe_by_tags_needs_every_tag(slb: Call, lb: str) -> None:
    slb(
        "TagResources",
        ResourceType="instance",
        **{"ResourceId.1": lb, "Tag.1.Key": "a", "Tag.1.Value": "1"},
    )

    def found(tags: list[dict[str, str]]) -> list[str]:
        answer = slb("DescribeLoadBalancers", Tags=json.dumps(tags))
        return [b["LoadBalancerId"] for b in answer["LoadBalancers"]["LoadBalancer"]]

    assert found([{"TagKey": "a", "TagValue": "1"}]) == [lb]
    assert found([{"TagKey": "a", "TagValue": "2"}]) == []
    assert found([{"TagKey": "a", "TagValue": "1"}, {"TagKey": "b", "TagValue": "1"}]) == []
    slb("UntagResources", ResourceType="instance", **{"ResourceId.1": lb, "TagKey.1": "a"})
    listed = slb("ListTagResources", ResourceType="instance", **{"ResourceId.1": lb})
    assert listed["TagResources"]["TagResource"] == []


def test_a_new_listener_is_stopped_with_the_apis_defaults_until_started(slb: Call, lb: str) -> None:
    slb(
        "CreateLoadBalancerTCPListener",
        LoadBalancerId=lb,
        ListenerPort=80,
        Bandwidth=-1,
        healthCheckInterval=5,
    )
    (item,) = slb("DescribeLoadBalancerListeners", **{"LoadBalancerId.1": lb})["Listeners"]
    assert (item["Status"], item["Scheduler"], item["Bandwidth"]) == ("stopped", "wrr", -1)
    config = item["TCPListenerConfig"]
    assert (config["HealthCheckInterval"], config["HealthCheck"]) == (5, "on")
    assert config["EstablishedTimeout"] == 900
    slb("StartLoadBalancerListener", LoadBalancerId=lb, ListenerPort=80, ListenerProtocol="tcp")
    (item,) = slb("DescribeLoadBalancerListeners", **{"LoadBalancerId.1": lb})["Listeners"]
    assert item["Status"] == "running"


def test_listeners_come_in_pages(slb: Call, lb: str) -> None:
    for port in range(1, 6):
        slb("CreateLoadBalancerUDPListener", LoadBalancerId=lb, ListenerPort=port)
    ports, token = [], ""
    for _ in range(5):
        paging = {"NextToken": token} if token else {}
        answer = slb(
            "DescribeLoadBalancerListeners", MaxResults=2, **paging, **{"LoadBalancerId.1": lb}
        )
        ports += [i["ListenerPort"] for i in answer["Listeners"]]
        token = answer["NextToken"]
        if not token:
            break
    assert ports == [1, 2, 3, 4, 5]


def test_members_are_named_by_server_and_port(slb: Call, lb: str, instance: str) -> None:
    group = slb("CreateVServerGroup", LoadBalancerId=lb, VServerGroupName="g")["VServerGroupId"]

    def body(*ports: int, weight: int = 100) -> str:
        return json.dumps([{"ServerId": instance, "Port": p, "Weight": weight} for p in ports])

    def have() -> list[tuple[int, int]]:
        answer = slb("DescribeVServerGroupAttribute", VServerGroupId=group)
        return [(m["Port"], m["Weight"]) for m in answer["BackendServers"]["BackendServer"]]

    slb("AddVServerGroupBackendServers", VServerGroupId=group, BackendServers=body(80, 81))
    slb("AddVServerGroupBackendServers", VServerGroupId=group, BackendServers=body(80))
    assert have() == [(80, 100), (81, 100)]
    slb("SetVServerGroupAttribute", VServerGroupId=group, BackendServers=body(81, weight=50))
    assert have() == [(80, 100), (81, 50)]
    with pytest.raises(AlibabaError, match="is not a member"):
        slb("SetVServerGroupAttribute", VServerGroupId=group, BackendServers=body(82))
    slb("RemoveVServerGroupBackendServers", VServerGroupId=group, BackendServers=body(80))
    assert have() == [(81, 50)]


def test_members_keys_are_taken_in_any_case_as_upstream_sends_them(
    slb: Call, lb: str, instance: str
) -> None:
    group = slb("CreateVServerGroup", LoadBalancerId=lb, VServerGroupName="g")["VServerGroupId"]
    body = json.dumps([{"serverId": instance, "port": 30080, "weight": 100, "type": "ecs"}])
    slb("AddVServerGroupBackendServers", VServerGroupId=group, BackendServers=body)
    answer = slb("DescribeVServerGroupAttribute", VServerGroupId=group)
    (member,) = answer["BackendServers"]["BackendServer"]
    assert (member["ServerId"], member["Port"], member["Weight"]) == (instance, 30080, 100)


def test_eips_of_a_balancer_come_in_pages(clean: AlibabaEmulator, slb: Call, lb: str) -> None:
    made = [clean.admin.add_eip(f"39.0.0.{i}", lb) for i in range(12)]
    try:
        pages = [
            slb(
                "DescribeEipAddresses",
                product="vpc",
                AssociatedInstanceType="SlbInstance",
                AssociatedInstanceId=lb,
                PageSize=10,
                PageNumber=number,
            )
            for number in (1, 2)
        ]
        assert [len(p["EipAddresses"]["EipAddress"]) for p in pages] == [10, 2]
        assert pages[0]["TotalCount"] == 12
    finally:
        for eip in made:
            clean.admin.delete_eip(eip)
