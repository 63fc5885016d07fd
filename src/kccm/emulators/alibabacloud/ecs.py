"""ECS (API ``2014-05-26``): the instances Node initialisation reads and the primary network
interface whose source/destination check routes turn off; ``DescribeNetworkInterfaces`` by
``NetworkInterfaceId.N`` or, as ENI backends are found, by ``PrivateIpAddress.N`` (the primary
and the secondary private IPs a test seeds, ``secondary_ips``) with ``VpcId`` and ``Status``,
``MaxResults``/``NextToken`` paged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.rpc import ACTIONS, RpcError, json_list, page, repeated, required
from kccm.emulators.alibabacloud.world import Instance, World

__all__ = ["render_instance"]

VERSION = "2014-05-26"


def render_instance(i: Instance) -> dict[str, Any]:
    return {
        "InstanceId": i.id,
        "RegionId": i.region,
        "ZoneId": i.zone,
        "InstanceType": i.instance_type,
        "Status": i.status,
        "InstanceChargeType": i.charge_type,
        "SpotStrategy": i.spot_strategy,
        "InstanceNetworkType": "vpc",
        "PublicIpAddress": {"IpAddress": [i.public_ip] if i.public_ip else []},
        "EipAddress": {"IpAddress": ""},
        "InnerIpAddress": {"IpAddress": []},
        "VpcAttributes": {
            "VpcId": i.vpc,
            "VSwitchId": i.vswitch,
            "PrivateIpAddress": {"IpAddress": [i.private_ip]},
        },
        "NetworkInterfaces": {
            "NetworkInterface": [
                {
                    "NetworkInterfaceId": i.eni,
                    "Type": "Primary",
                    "PrimaryIpAddress": i.private_ip,
                    "Ipv6Sets": {"Ipv6Set": []},
                }
            ]
        },
        "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in sorted(i.tags.items())]},
    }


def _tag_filters(params: Mapping[str, str]) -> list[tuple[str, str | None]]:
    filters = []
    for index in range(1, 21):
        key = params.get(f"Tag.{index}.Key")
        if key is None:
            break
        filters.append((key, params.get(f"Tag.{index}.Value")))
    return filters


def _matches(i: Instance, params: Mapping[str, str]) -> bool:
    ids = json_list(params, "InstanceIds")
    ips = json_list(params, "PrivateIpAddresses")
    if ids is not None and i.id not in ids:
        return False
    if ips is not None and i.private_ip not in ips:
        return False
    if params.get("VpcId") and params["VpcId"] != i.vpc:
        return False
    if params.get("ZoneId") and params["ZoneId"] != i.zone:
        return False
    for key, value in _tag_filters(params):
        if key not in i.tags or (value is not None and i.tags[key] != value):
            return False
    return True


def describe_instances(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    region = required(params, "RegionId")
    ids = json_list(params, "InstanceIds")
    if ids is not None and len(ids) > 100:
        raise RpcError("InvalidParameter.InstanceIds", "at most 100 InstanceIds")
    found = [
        i for _, i in sorted(world.instances.items()) if i.region == region and _matches(i, params)
    ]
    chunk, following = page(params, found, world.page_size)
    return {
        "Instances": {"Instance": [render_instance(i) for i in chunk]},
        "TotalCount": len(found),
        "PageSize": len(chunk),
        "NextToken": following,
    }


def _by_eni(world: World, eni: str) -> Instance:
    for instance in world.instances.values():
        if instance.eni == eni:
            return instance
    raise RpcError("InvalidEniId.NotFound", f"The specified ENI {eni} does not exist.", 404)


def _by_ips(world: World, params: Mapping[str, str], ips: list[str]) -> list[Instance]:
    """The ENIs holding any of ``ips`` (in ``VpcId``, with ``Status``, when given)."""
    vpc, status = params.get("VpcId"), params.get("Status")
    return [
        i
        for _, i in sorted(world.instances.items())
        if {i.private_ip, *i.secondary_ips} & set(ips)
        and vpc in (None, i.vpc)
        and status in (None, "InUse")
    ]


def _render_eni(i: Instance) -> dict[str, Any]:
    ips = [{"PrivateIpAddress": i.private_ip, "Primary": True}]
    ips += [{"PrivateIpAddress": ip, "Primary": False} for ip in i.secondary_ips]
    return {
        "NetworkInterfaceId": i.eni,
        "InstanceId": i.id,
        "Type": "Primary",
        "VpcId": i.vpc,
        "VSwitchId": i.vswitch,
        "PrivateIpAddress": i.private_ip,
        "PrivateIpSets": {"PrivateIpSet": ips},
        "SourceDestCheck": i.source_dest_check,
        "Status": "InUse",
    }


def describe_network_interfaces(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    required(params, "RegionId")
    ips = repeated(params, "PrivateIpAddress")
    if ips:
        found, token = page(params, _by_ips(world, params, ips), 100)
    else:
        found = [_by_eni(world, eni) for eni in repeated(params, "NetworkInterfaceId")]
        token = ""
    return {
        "NetworkInterfaceSets": {"NetworkInterfaceSet": [_render_eni(i) for i in found]},
        "TotalCount": len(found),
        "NextToken": token,
    }


def modify_network_interface_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    instance = _by_eni(world, required(params, "NetworkInterfaceId"))
    check = params.get("SourceDestCheck")
    if check is not None:
        if check not in ("true", "false"):
            raise RpcError("InvalidParameter", f"SourceDestCheck {check!r} is not a boolean")
        instance.source_dest_check = check == "true"
    return {}


ACTIONS[(VERSION, "DescribeInstances")] = describe_instances
ACTIONS[(VERSION, "DescribeNetworkInterfaces")] = describe_network_interfaces
ACTIONS[(VERSION, "ModifyNetworkInterfaceAttribute")] = modify_network_interface_attribute
