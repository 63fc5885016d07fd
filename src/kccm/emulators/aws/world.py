"""A cluster's world in a moto emulator, made and read through the test-side clients: a VPC
with public subnets in two zones, a tagged route table, instances tagged for the cluster; the
Nodes kubelet would register for them; what the provider could leave behind."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import botocore.exceptions

from kccm.emulators.aws.clients import REGION, ZONES, clients

__all__ = [
    "GONE_MEANWHILE",
    "World",
    "add_instances",
    "build_world",
    "cluster_tag",
    "leftovers",
    "node_for",
    "provider_id_of",
    "read_while_changing",
]

T = TypeVar("T")


@dataclass
class World:
    """One cluster's VPC in moto: public subnets in two zones, a tagged route table, and
    instances tagged for the cluster (``instances``: id -> private DNS name; ``zones``:
    id -> availability zone)."""

    url: str
    cluster_id: str
    vpc_id: str
    subnet_ids: list[str]
    route_table_id: str
    instances: dict[str, str] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)
    """The zone of every instance :func:`add_instances` started, tagged or not."""

    def cloud_config(self, url: str | None = None, **extra: str) -> str:
        endpoint = url or self.url
        lines = [
            "[Global]",
            f"Region = {REGION}",
            f"VPC = {self.vpc_id}",
            f"KubernetesClusterID = {self.cluster_id}",
            *(f"{key} = {value}" for key, value in extra.items()),
            "",
            '[ServiceOverride "ec2"]',
            "Service = ec2",
            f"URL = {endpoint}",
            "",
            '[ServiceOverride "elb"]',
            "Service = elasticloadbalancing",
            f"URL = {endpoint}",
            "",
        ]
        return "\n".join(lines)


def cluster_tag(cluster_id: str) -> dict[str, str]:
    return {"Key": f"kubernetes.io/cluster/{cluster_id}", "Value": "owned"}


def build_world(url: str, cluster_id: str, instances: int = 3, cidr_octet: int = 10) -> World:
    """Create the VPC and ``instances`` running instances (spread over the two zones)."""
    ec2, _ = clients(url)
    tag = [cluster_tag(cluster_id)]
    vpc = ec2.create_vpc(CidrBlock=f"10.{cidr_octet}.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.{cidr_octet}.{i}.0/24",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tag}],
        )["Subnet"]["SubnetId"]
        for i, zone in enumerate(ZONES)
    ]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    main = ec2.describe_route_tables(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc]},
            {"Name": "association.main", "Values": ["true"]},
        ]
    )["RouteTables"][0]["RouteTableId"]
    ec2.create_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    ec2.create_tags(Resources=[main], Tags=tag)
    world = World(url, cluster_id, vpc, subnets, main)
    add_instances(world, instances)
    return world


def add_instances(
    world: World, count: int, *, tagged: bool = True, instance_type: str = "m5.large"
) -> list[str]:
    """Start ``count`` more instances; returns their IDs. The i-th goes to subnet
    ``len(world.instances) + i`` (modulo), with ``world.instances`` counted as it grows, so
    untagged instances alternate zones while each call's tagged ones share a zone, as when
    every instance was a RunInstances of its own. One RunInstances per subnet starts them."""
    ec2, _ = clients(world.url)
    tags = [{"ResourceType": "instance", "Tags": [cluster_tag(world.cluster_id)]}] if tagged else []
    grows = 1 if tagged else 0
    first = len(world.instances)
    placed = [
        world.subnet_ids[(first + i * (1 + grows)) % len(world.subnet_ids)] for i in range(count)
    ]
    launched: dict[str, list[dict[str, Any]]] = {}
    for subnet in dict.fromkeys(placed):
        wanted = placed.count(subnet)
        reply = ec2.run_instances(
            ImageId="ami-12c6146b",
            MinCount=wanted,
            MaxCount=wanted,
            InstanceType=instance_type,
            SubnetId=subnet,
            TagSpecifications=tags,
        )
        launched[subnet] = list(reply["Instances"])
    started: list[str] = []
    for subnet in placed:
        instance = launched[subnet].pop(0)
        started.append(instance["InstanceId"])
        world.zones[instance["InstanceId"]] = instance["Placement"]["AvailabilityZone"]
        if tagged:
            world.instances[instance["InstanceId"]] = instance["PrivateDnsName"]
    return started


def provider_id_of(world: World, instance_id: str) -> str:
    """The instance's provider ID: its zone as started by :func:`add_instances` (an instance
    never changes zone), or as EC2 describes it."""
    zone = world.zones.get(instance_id)
    if zone is None:
        ec2, _ = clients(world.url)
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        zone = reservations[0]["Instances"][0]["Placement"]["AvailabilityZone"]
    return f"aws:///{zone}/{instance_id}"


def node_for(world: World, instance_id: str, *, with_provider_id: bool = True) -> dict[str, Any]:
    """A Node named after the instance's private DNS name (as kubelet on EC2 names it)."""
    spec = {"providerID": provider_id_of(world, instance_id)} if with_provider_id else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": world.instances[instance_id], "uid": instance_id, "labels": {}},
        "spec": spec,
        "status": {},
    }


def leftovers(url: str, vpc_id: str) -> dict[str, list[str]]:
    """What the provider could have left behind in ``vpc_id``: NLBs, target groups, routes to
    instances."""
    ec2, elbv2 = clients(url)
    balancers = [
        lb["LoadBalancerName"]
        for lb in elbv2.describe_load_balancers()["LoadBalancers"]
        if lb["VpcId"] == vpc_id
    ]
    groups = [
        g["TargetGroupName"]
        for g in elbv2.describe_target_groups()["TargetGroups"]
        if g["VpcId"] == vpc_id
    ]
    tables = ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
        "RouteTables"
    ]
    routes = [r["DestinationCidrBlock"] for t in tables for r in t["Routes"] if r.get("InstanceId")]
    return {"load_balancers": balancers, "target_groups": groups, "routes": routes}


GONE_MEANWHILE = frozenset({"LoadBalancerNotFound", "ListenerNotFound", "TargetGroupNotFound"})
"""Error codes of a read that names what an earlier read returned and the provider has
replaced or deleted since (a target group replaced on a port change, a balancer deleted)."""


def read_while_changing(read: Callable[[], T]) -> T | None:
    """``read()``, or None when it met :data:`GONE_MEANWHILE`: a test's probe that walks
    balancer -> listeners -> target groups while the provider changes them reads again later
    instead of failing."""
    try:
        return read()
    except botocore.exceptions.ClientError as err:
        if err.response.get("Error", {}).get("Code") in GONE_MEANWHILE:
            return None
        raise
