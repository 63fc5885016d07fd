"""InstancesV2 on ECS as upstream's node controller decides (pkg/controller/node v2.14.0)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from ali_stub import StubRPC

from kccm.cloudprovider import ForeignProviderID, InstanceNotFound, NodeAddress, Throttled
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.errors import api_error
from kccm.providers.alibabacloud.instances import EcsInstances, parse_provider_id


def ecs(instance: str, **extra: Any) -> dict[str, Any]:
    found = {
        "InstanceId": instance,
        "RegionId": "cn-hangzhou",
        "ZoneId": "cn-hangzhou-k",
        "InstanceType": "ecs.g7.large",
        "Status": "Running",
        "InstanceChargeType": "PostPaid",
        "SpotStrategy": "NoSpot",
        "PublicIpAddress": {"IpAddress": ["47.0.0.1"]},
        "EipAddress": {"IpAddress": "47.0.0.2"},
        "InnerIpAddress": {"IpAddress": []},
        "VpcAttributes": {"PrivateIpAddress": {"IpAddress": ["10.0.0.5"]}},
        "NetworkInterfaces": {
            "NetworkInterface": [
                {
                    "Type": "Primary",
                    "NetworkInterfaceId": "eni-1",
                    "Ipv6Sets": {"Ipv6Set": [{"Ipv6Address": "2408::5"}]},
                }
            ]
        },
        "Tags": {"Tag": [{"TagKey": "ack.alibabacloud.com/nodepool-id", "TagValue": "np-1"}]},
    }
    found.update(extra)
    return found


def world(instances: list[dict[str, Any]], gates: str = "") -> tuple[EcsInstances, StubRPC]:
    by_id = {i["InstanceId"]: i for i in instances}

    def describe(params: Mapping[str, Any]) -> dict[str, Any]:
        if "InstanceIds" in params:
            found = [by_id[i] for i in json.loads(params["InstanceIds"]) if i in by_id]
        else:
            ips = json.loads(params["PrivateIpAddresses"])
            found = [
                i
                for i in instances
                if set(i["VpcAttributes"]["PrivateIpAddress"]["IpAddress"]) & set(ips)
            ]
        return {"Instances": {"Instance": found}, "PageSize": len(found), "NextToken": ""}

    rpc = StubRPC({"ecs:DescribeInstances": describe})
    config = load_alibaba_config(f"Global:\n  featureGates: '{gates}'\n")
    return EcsInstances(rpc, config, "vpc-1"), rpc  # type: ignore[arg-type]


def node(
    name: str, provider_id: str = "", ips: tuple[str, ...] = (), **labels: str
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"addresses": [{"type": "InternalIP", "address": ip} for ip in ips]},
    }


@pytest.mark.parametrize(
    ("provider_id", "expected"),
    [
        pytest.param("cn-hangzhou.i-abc", ("cn-hangzhou", "i-abc"), id="plain"),
        pytest.param(
            "alicloud://cn-hangzhou.i-abc", ("cn-hangzhou", "i-abc"), id="alicloud-prefix"
        ),
    ],
)
def test_provider_id(provider_id: str, expected: tuple[str, str]) -> None:
    assert parse_provider_id(provider_id) == expected


def test_another_clouds_provider_id_is_foreign() -> None:
    instances, _ = world([])
    with pytest.raises(ForeignProviderID):
        instances.instance_exists(node("n", "aws:///us-east-1a/i-1"))
    with pytest.raises(ForeignProviderID):
        instances.instance_shutdown(node("n", "aws:///us-east-1a/i-1"))


def test_metadata_as_set_fields_and_find_address() -> None:
    instances, rpc = world([ecs("i-1")])
    meta = instances.instance_metadata(node("n1", "cn-hangzhou.i-1"))
    assert meta.provider_id == "cn-hangzhou.i-1"
    assert (meta.instance_type, meta.zone, meta.region) == (
        "ecs.g7.large",
        "cn-hangzhou-k",
        "cn-hangzhou",
    )
    assert list(meta.node_addresses) == [
        NodeAddress("ExternalIP", "47.0.0.1"),
        NodeAddress("ExternalIP", "47.0.0.2"),
        NodeAddress("InternalIP", "10.0.0.5"),
    ]
    assert dict(meta.additional_labels) == {
        "node.alibabacloud.com/instance-charge-type": "PostPaid",
        "node.alibabacloud.com/spot-strategy": "NoSpot",
        "node.alibabacloud.com/nodepool-id": "np-1",
    }
    sent = rpc.calls[0][1]
    assert sent["RegionId"] == "cn-hangzhou"
    assert json.loads(sent["InstanceIds"]) == ["i-1"]
    assert sent["AdditionalAttributes.1"] == "NETWORK_PRIMARY_ENI_IP"


def test_ipv6_addresses_with_the_dual_stack_gate() -> None:
    instances, _ = world([ecs("i-1")], gates="IPv6DualStack=true")
    meta = instances.instance_metadata(node("n1", "cn-hangzhou.i-1"))
    assert NodeAddress("InternalIP", "2408::5") in meta.node_addresses


def test_a_node_without_provider_id_is_found_by_its_internal_ip() -> None:
    instances, rpc = world([ecs("i-1")])
    meta = instances.instance_metadata(node("n1", ips=("10.0.0.5",)))
    assert meta.provider_id == "cn-hangzhou.i-1"
    sent = rpc.calls[0][1]
    assert (sent["VpcId"], sent["Tag.1.Key"], sent["InstanceNetworkType"]) == (
        "vpc-1",
        "ack.aliyun.com",
        "vpc",
    )


@pytest.mark.parametrize(
    ("the_node", "exists"),
    [
        pytest.param(node("n1", "cn-hangzhou.i-1"), True, id="running"),
        pytest.param(node("n2", "cn-hangzhou.i-2"), True, id="stopped-still-exists"),
        pytest.param(node("n3", "cn-hangzhou.i-gone"), False, id="deleted"),
        pytest.param(node("n4", ips=("10.9.9.9",)), True, id="no-provider-id-kept"),
    ],
)
def test_exists_and_never_shut_down(the_node: dict[str, Any], exists: bool) -> None:
    instances, _ = world([ecs("i-1"), ecs("i-2", Status="Stopped")])
    assert instances.instance_exists(the_node) is exists
    assert instances.instance_shutdown(the_node) is False


def test_metadata_of_a_deleted_instance_is_not_found() -> None:
    instances, _ = world([])
    with pytest.raises(InstanceNotFound):
        instances.instance_metadata(node("n", "cn-hangzhou.i-gone"))


def test_a_refresh_reads_one_describe_per_hundred_instances() -> None:
    fleet = [ecs(f"i-{n}") for n in range(250)]
    instances, rpc = world(fleet)
    nodes = [node(f"n{n}", f"cn-hangzhou.i-{n}") for n in range(250)]
    nodes += [
        node("excluded", "cn-hangzhou.i-1", **{"service.alibabacloud.com/exclude-node": "true"}),
        node("hybrid", "ack-hybrid://x"),
        node("no-id"),
        node("gone", "cn-hangzhou.i-gone"),
    ]
    found = instances.list_instance_metadata(nodes)
    assert rpc.actions() == ["ecs:DescribeInstances"] * 3
    assert max(len(json.loads(p["InstanceIds"])) for _, p in rpc.calls) == 100
    assert set(found) == {f"n{n}" for n in range(250)}
    assert found["n7"].provider_id == "cn-hangzhou.i-7"


def test_describe_shows_the_ecs_status() -> None:
    instances, _ = world([ecs("i-2", Status="Stopped")])
    view = instances.describe_instance(node("n2", "cn-hangzhou.i-2"))
    assert view is not None
    assert view.state == "Stopped"
    gone = instances.describe_instance(node("n3", "cn-hangzhou.i-3"))
    assert gone is not None
    assert not gone.exists


TAINT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}


@pytest.mark.parametrize(
    ("taints", "check_on", "expected"),
    [
        pytest.param(
            [TAINT],
            True,
            ["DescribeNetworkInterfaces", "ModifyNetworkInterfaceAttribute"],
            id="new-node-check-on",
        ),
        pytest.param([TAINT], False, ["DescribeNetworkInterfaces"], id="new-node-check-off"),
        pytest.param([], True, [], id="initialised-node-untouched"),
    ],
)
def test_source_dest_check_of_a_new_nodes_primary_eni(
    taints: list[dict[str, str]], check_on: bool, expected: list[str]
) -> None:
    instances, rpc = world([ecs("i-1")])
    rpc.handlers["ecs:DescribeNetworkInterfaces"] = lambda p: {
        "NetworkInterfaceSets": {
            "NetworkInterfaceSet": [{"NetworkInterfaceId": "eni-1", "SourceDestCheck": check_on}]
        }
    }
    rpc.handlers["ecs:ModifyNetworkInterfaceAttribute"] = lambda p: {"RequestId": "r"}
    the_node = node("n1", "cn-hangzhou.i-1")
    the_node["spec"]["taints"] = taints
    instances.instance_metadata(the_node)
    eni_calls = [(a, p) for a, p in rpc.calls if a != "ecs:DescribeInstances"]
    assert [a.split(":")[1] for a, _ in eni_calls] == expected
    if "ModifyNetworkInterfaceAttribute" in expected:
        assert eni_calls[-1][1] == {
            "RegionId": "cn-hangzhou",
            "NetworkInterfaceId": "eni-1",
            "SourceDestCheck": "false",
        }


def test_a_failed_source_dest_change_fails_the_initialisation() -> None:
    instances, rpc = world([ecs("i-1")])
    rpc.handlers["ecs:DescribeNetworkInterfaces"] = lambda p: {
        "NetworkInterfaceSets": {
            "NetworkInterfaceSet": [{"NetworkInterfaceId": "eni-1", "SourceDestCheck": True}]
        }
    }

    def refuse(params: Mapping[str, Any]) -> dict[str, Any]:
        raise api_error(400, {"Code": "Throttling.User"}, "ecs:ModifyNetworkInterfaceAttribute")

    rpc.handlers["ecs:ModifyNetworkInterfaceAttribute"] = refuse
    the_node = node("n1", "cn-hangzhou.i-1")
    the_node["spec"]["taints"] = [TAINT]
    with pytest.raises(Throttled):
        instances.instance_metadata(the_node)
