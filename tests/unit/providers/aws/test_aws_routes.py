"""Routes in the cluster's route table, against moto."""

from __future__ import annotations

from typing import Any

import pytest

from kccm.cloudprovider import CloudProviderError, Route
from kccm.emulators.aws import World, clients
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config


def _routes(cloud: AWSCloud) -> Any:
    routes = cloud.routes()
    assert routes is not None
    return routes


def test_create_list_delete(cloud: AWSCloud, world: World) -> None:
    routes = _routes(cloud)
    instance_id, name = next(iter(world.instances.items()))
    routes.create_route("k", "hint", Route(target_node=name, destination_cidr="10.244.3.0/24"))
    listed = routes.list_routes("k")
    assert [(r.target_node, r.destination_cidr, r.blackhole) for r in listed] == [
        (name, "10.244.3.0/24", False)
    ]
    ec2, _ = clients(world.url)
    table = ec2.describe_route_tables(RouteTableIds=[world.route_table_id])["RouteTables"][0]
    assert {"10.244.3.0/24": instance_id}.items() <= {
        r["DestinationCidrBlock"]: r.get("InstanceId") for r in table["Routes"]
    }.items()
    attribute = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="sourceDestCheck")
    assert attribute["SourceDestCheck"]["Value"] is False  # needed to forward pod traffic
    routes.delete_route("k", listed[0])
    routes.delete_route("k", listed[0])  # already gone: fine
    assert routes.list_routes("k") == []


def test_a_route_to_an_unknown_node_is_refused(cloud: AWSCloud) -> None:
    with pytest.raises(CloudProviderError, match="private DNS name 'nobody'"):
        _routes(cloud).create_route(
            "k", "h", Route(target_node="nobody", destination_cidr="10.244.9.0/24")
        )


def test_without_a_tagged_table_the_error_says_what_to_do(world: World, aws_env: None) -> None:
    ec2, _ = clients(world.url)
    ec2.delete_tags(
        Resources=[world.route_table_id],
        Tags=[{"Key": f"kubernetes.io/cluster/{world.cluster_id}"}],
    )
    cloud = AWSCloud(load_aws_config(world.cloud_config()))
    with pytest.raises(CloudProviderError, match="set RouteTableID or tag one"):
        _routes(cloud).list_routes("k")
    explicit = AWSCloud(load_aws_config(world.cloud_config(RouteTableID=world.route_table_id)))
    assert _routes(explicit).list_routes("k") == []
