"""InstancesV2 against moto: lookups, addresses, states and cluster ownership."""

from __future__ import annotations

from typing import Any

import pytest
from aws_moto import REGION, World, add_instances, clients, node_for

from kccm.cloudprovider import CloudProviderError, InstanceNotFound, NodeAddress
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.instances import node_addresses


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
    ],
)
def test_a_foreign_provider_id_is_an_error_never_absent(cloud: AWSCloud, provider_id: str) -> None:
    node = {"metadata": {"name": "elsewhere"}, "spec": {"providerID": provider_id}}
    with pytest.raises(CloudProviderError, match="providerID"):
        _v2(cloud).instance_exists(node)


def test_a_name_matching_no_instance_is_instance_not_found(cloud: AWSCloud) -> None:
    with pytest.raises(InstanceNotFound):
        _v2(cloud).instance_metadata({"metadata": {"name": "ip-1-2-3-4.nowhere"}, "spec": {}})


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
