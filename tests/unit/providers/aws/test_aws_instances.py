"""InstancesV2 against moto: lookups, addresses, states and cluster ownership."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import CloudProviderError, InstanceNotFound, NodeAddress
from kccm.emulators.aws import REGION, World, add_instances, clients, node_for
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.instances import LABEL_ZONE_ID, node_addresses


def _v2(cloud: AWSCloud) -> Any:
    v2 = cloud.instances_v2()
    assert v2 is not None
    return v2


def _first(world: World) -> str:
    return next(iter(world.instances))


@pytest.mark.parametrize(
    "with_provider_id",
    [pytest.param(True, id="by-provider-id"), pytest.param(False, id="by-private-dns-name")],
)
def test_metadata_of_a_running_instance(
    cloud: AWSCloud, world: World, with_provider_id: bool
) -> None:
    instance_id = _first(world)
    ec2, _ = clients(world.url)
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    meta = _v2(cloud).instance_metadata(
        node_for(world, instance_id, with_provider_id=with_provider_id)
    )
    zone = described["Placement"]["AvailabilityZone"]
    assert meta.provider_id == f"aws:///{zone}/{instance_id}"
    assert meta.instance_type == "m5.large"
    assert (meta.zone, meta.region) == (zone, REGION)
    assert NodeAddress("InternalIP", described["PrivateIpAddress"]) in meta.node_addresses
    assert NodeAddress("InternalDNS", described["PrivateDnsName"]) in meta.node_addresses
    assert NodeAddress("Hostname", described["PrivateDnsName"]) in meta.node_addresses
    zone_ids = {
        z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]
    }
    assert meta.additional_labels == {LABEL_ZONE_ID: zone_ids[zone]}


def test_zone_ids_are_read_once_and_an_existing_label_is_kept(
    cloud: AWSCloud, world: World
) -> None:
    first, second = list(world.instances)[:2]
    _v2(cloud).instance_metadata(node_for(world, first))
    before = cloud.cloud_api_calls().snapshot()
    meta = _v2(cloud).instance_metadata(node_for(world, second))
    labelled = node_for(world, second)
    labelled["metadata"]["labels"] = {LABEL_ZONE_ID: "mine"}
    assert _v2(cloud).instance_metadata(labelled).additional_labels == {}
    calls = cloud.cloud_api_calls().snapshot().since(before)
    assert LABEL_ZONE_ID in meta.additional_labels
    assert "ec2:describe_availability_zones" not in calls.reads


@pytest.mark.parametrize(
    ("action", "exists", "shutdown"),
    [
        pytest.param(None, True, False, id="running-exists-and-runs"),
        pytest.param("stop_instances", True, True, id="stopped-exists-but-is-shut-down"),
        pytest.param("terminate_instances", False, False, id="terminated-is-gone"),
    ],
)
def test_instance_states(
    cloud: AWSCloud, world: World, action: str | None, exists: bool, shutdown: bool
) -> None:
    instance_id = _first(world)
    node = node_for(world, instance_id)
    if action:
        ec2, _ = clients(world.url)
        getattr(ec2, action)(InstanceIds=[instance_id])
    assert _v2(cloud).instance_exists(node) is exists
    assert _v2(cloud).instance_shutdown(node) is shutdown


def test_an_unknown_well_formed_instance_does_not_exist(cloud: AWSCloud) -> None:
    node = {
        "metadata": {"name": "ghost"},
        "spec": {"providerID": "aws:///eu-west-1a/i-0123456789abcdef0"},
    }
    assert _v2(cloud).instance_exists(node) is False


@pytest.mark.parametrize(
    "provider_id",
    [
        pytest.param("gce://p/z/vm", id="another-providers-node"),
        pytest.param("aws:///eu-west-1a/fargate-ip-10-0-0-1.ec2.internal", id="fargate-node"),
        # issue 25's audit: upstream MapToAWSInstanceID "Invalid format for AWS instance"
        pytest.param("aws:///eu-west-1a/not-an-instance", id="aws-scheme-no-instance-id"),
        pytest.param("aws://", id="aws-scheme-empty"),
        pytest.param("aws:///a/b/i-0123456789abcdef0", id="aws-scheme-three-parts"),
    ],
)
def test_a_foreign_provider_id_is_an_error_never_absent(cloud: AWSCloud, provider_id: str) -> None:
    node = {"metadata": {"name": "elsewhere"}, "spec": {"providerID": provider_id}}
    with pytest.raises(CloudProviderError, match="providerID"):
        _v2(cloud).instance_exists(node)


def test_a_name_matching_no_instance_does_not_exist(cloud: AWSCloud) -> None:
    """Upstream v1.37 maps InstanceNotFound to "does not exist": the Node gets deleted."""
    node = {"metadata": {"name": "ip-1-2-3-4.nowhere"}, "spec": {}}
    with pytest.raises(InstanceNotFound):
        _v2(cloud).instance_metadata(node)
    assert _v2(cloud).instance_exists(node) is False
    assert _v2(cloud).instance_shutdown(node) is False


@pytest.mark.parametrize(
    ("count", "max_calls"),
    [
        pytest.param(3, 1, id="few-nodes-one-filtered-call"),
        pytest.param(205, 1, id="many-nodes-one-listing"),
    ],
)
def test_list_instance_metadata_answers_for_many_nodes_in_few_calls(
    cloud: AWSCloud, world: World, count: int, max_calls: int
) -> None:
    add_instances(world, max(0, count - len(world.instances)))
    nodes = [node_for(world, i) for i in list(world.instances)[:count]]
    ghost = {
        "metadata": {"name": "ghost"},
        "spec": {"providerID": "aws:///eu-west-1a/i-0123456789abcdef0"},
    }
    foreign = {"metadata": {"name": "gce"}, "spec": {"providerID": "gce://p/z/vm"}}
    before = cloud.cloud_api_calls().snapshot()
    found = _v2(cloud).list_instance_metadata([*nodes, ghost, foreign])
    calls = cloud.cloud_api_calls().snapshot().since(before)
    assert set(found) == {n["metadata"]["name"] for n in nodes}
    first = nodes[0]
    assert found[first["metadata"]["name"]].provider_id == first["spec"]["providerID"]
    assert calls.writes == {}
    assert calls.reads == {"ec2:describe_instances": max_calls}


def test_another_clusters_instance_is_not_found_by_name(cloud: AWSCloud, world: World) -> None:
    [foreign] = add_instances(world, 1, tagged=False)
    ec2, _ = clients(world.url)
    name = ec2.describe_instances(InstanceIds=[foreign])["Reservations"][0]["Instances"][0][
        "PrivateDnsName"
    ]
    with pytest.raises(InstanceNotFound):
        _v2(cloud).instance_metadata({"metadata": {"name": name}, "spec": {}})


def test_another_clusters_instance_exists_but_gets_no_metadata(
    cloud: AWSCloud, world: World
) -> None:
    [foreign] = add_instances(world, 1, tagged=False)
    node = {"metadata": {"name": "n"}, "spec": {"providerID": f"aws:///eu-west-1a/{foreign}"}}
    assert _v2(cloud).instance_exists(node) is True  # never delete a Node over a missing tag
    with pytest.raises(CloudProviderError, match=r"not tagged kubernetes\.io/cluster/"):
        _v2(cloud).instance_metadata(node)


def test_addresses_in_upstreams_order() -> None:
    instance = {
        "PrivateIpAddress": "10.0.0.9",
        "PublicIpAddress": "3.3.3.3",
        "PrivateDnsName": "ip-10-0-0-5.ec2.internal",
        "PublicDnsName": "ec2-3-3-3-3.compute.amazonaws.com",
        "NetworkInterfaces": [
            {
                "Status": "in-use",
                "Attachment": {"DeviceIndex": 1},
                "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.1.5"}],
                "Ipv6Addresses": [{"Ipv6Address": "2001:db8::1"}],
            },
            {
                "Status": "in-use",
                "Attachment": {"DeviceIndex": 0},
                "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.0.5"}],
            },
            {"Status": "available", "PrivateIpAddresses": [{"PrivateIpAddress": "10.0.9.9"}]},
        ],
    }
    assert [(a.type, a.address) for a in node_addresses(instance, ("ipv4", "ipv6"))] == [
        ("InternalIP", "10.0.0.5"),
        ("InternalIP", "10.0.1.5"),
        ("ExternalIP", "3.3.3.3"),
        ("InternalDNS", "ip-10-0-0-5.ec2.internal"),
        ("Hostname", "ip-10-0-0-5.ec2.internal"),
        ("ExternalDNS", "ec2-3-3-3-3.compute.amazonaws.com"),
        ("InternalIP", "2001:db8::1"),
    ]
