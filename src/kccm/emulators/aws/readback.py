"""Security groups and Classic ELBs in a moto emulator, made and read back for the tests.

``node_security_group`` gives the world's instances the security group upstream expects
nodes to have (tagged for the cluster); ``classic_state`` and ``group_rules`` read back what
the provider wrote, in the shape the assertions compare.
"""

from __future__ import annotations

import uuid
from typing import Any

from kccm.emulators.aws.clients import client, clients
from kccm.emulators.aws.world import World, cluster_tag

__all__ = [
    "certificate",
    "classic_names",
    "classic_state",
    "elb_client",
    "group_named",
    "group_rules",
    "node_security_group",
]


def elb_client(url: str) -> Any:
    return client(url, "elb")


def node_security_group(world: World, *, tagged: bool = True) -> str:
    """A node security group (cluster-tagged unless ``tagged=False``) set as the only group of
    every instance of the world."""
    ec2, _ = clients(world.url)
    tags = [{"ResourceType": "security-group", "Tags": [cluster_tag(world.cluster_id)]}]
    group = ec2.create_security_group(
        GroupName=f"nodes-{uuid.uuid4().hex[:6]}",
        Description="k8s nodes",
        VpcId=world.vpc_id,
        TagSpecifications=tags if tagged else [],
    )["GroupId"]
    for instance in world.instances:
        ec2.modify_instance_attribute(InstanceId=instance, Groups=[group])
    return str(group)


def group_rules(url: str, group_id: str) -> set[tuple[str, int | None, int | None, str, str]]:
    """A group's ingress, ungrouped: (protocol, from, to, source, description)."""
    ec2, _ = clients(url)
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    rules = set()
    for perm in group["IpPermissions"]:
        ports = (perm["IpProtocol"], perm.get("FromPort"), perm.get("ToPort"))
        for ip in perm.get("IpRanges", ()):
            rules.add((*ports, ip["CidrIp"], ip.get("Description", "")))
        for pair in perm.get("UserIdGroupPairs", ()):
            rules.add((*ports, pair["GroupId"], pair.get("Description", "")))
    return rules


def group_named(url: str, vpc_id: str, name: str) -> dict[str, Any] | None:
    ec2, _ = clients(url)
    found = ec2.describe_security_groups(
        Filters=[
            {"Name": "group-name", "Values": [name]},
            {"Name": "vpc-id", "Values": [vpc_id]},
        ]
    )["SecurityGroups"]
    return found[0] if found else None


def classic_state(url: str, name: str) -> dict[str, Any]:
    """The Classic ELB as moto has it, with its attributes and tags."""
    elb = elb_client(url)
    lb = elb.describe_load_balancers(LoadBalancerNames=[name])["LoadBalancerDescriptions"][0]
    attrs = elb.describe_load_balancer_attributes(LoadBalancerName=name)
    tags = elb.describe_tags(LoadBalancerNames=[name])["TagDescriptions"][0]["Tags"]
    return {
        "lb": lb,
        "listeners": sorted(
            (
                d["Listener"]["LoadBalancerPort"],
                d["Listener"]["Protocol"].upper(),
                d["Listener"]["InstancePort"],
                d["Listener"]["InstanceProtocol"].upper(),
            )
            for d in lb["ListenerDescriptions"]
        ),
        "instances": sorted(i["InstanceId"] for i in lb["Instances"]),
        "attributes": attrs["LoadBalancerAttributes"],
        "tags": {t["Key"]: t["Value"] for t in tags},
    }


def classic_names(url: str, vpc_id: str) -> list[str]:
    """The Classic ELBs in ``vpc_id``."""
    return sorted(
        d["LoadBalancerName"]
        for d in elb_client(url).describe_load_balancers()["LoadBalancerDescriptions"]
        if d.get("VPCId") == vpc_id
    )


def certificate(url: str) -> str:
    """An ACM certificate ARN moto knows (its Classic ELB refuses unknown ones)."""
    acm = client(url, "acm")
    return str(acm.request_certificate(DomainName="web.example.com")["CertificateArn"])
