"""SLB (CLB, API ``2014-05-15``): balancers, their tags and protections.

Shapes and codes as the API reference (Alibaba Cloud help, "Server Load Balancer API",
2014-05-15) and the Go SDK's structs (``alibaba-cloud-sdk-go/services/slb``, vendored by
cloud-provider-alibaba-cloud v2.14.0) give them: every parameter is text, list parameters are
JSON text (``Tags``) or numbered (``ResourceId.1``, ``Tag.1.Key``), answers nest lists as
``{"LoadBalancers": {"LoadBalancer": [...]}}``. ``DeleteProtection=on`` refuses
``DeleteLoadBalancer`` (``OperationDenied.DeleteProtectionIsOn``); modification protection
(``ConsoleProtection``) guards the console only, so the API still changes the balancer. A
``ClientToken`` sent again gives the balancer the first call made. Listeners are in
:mod:`.slb_listeners`, vServer groups in :mod:`.slb_vgroups`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.rpc import ACTIONS, RpcError, repeated, required
from kccm.emulators.alibabacloud.slbmodel import Balancer
from kccm.emulators.alibabacloud.world import World

__all__ = ["VERSION", "balancer", "render_balancer"]

VERSION = "2014-05-15"
MAX_TAGS = 20
_ON_OFF = ("on", "off")


def balancer(world: World, lb_id: str) -> Balancer:
    found = world.slb.balancers.get(lb_id)
    if found is None:
        raise RpcError(
            "InvalidLoadBalancerId.NotFound",
            f"The specified LoadBalancerId does not exist: {lb_id}",
        )
    return found


def render_balancer(b: Balancer) -> dict[str, Any]:
    return {
        "LoadBalancerId": b.id,
        "LoadBalancerName": b.name,
        "LoadBalancerStatus": b.status,
        "RegionId": b.region,
        "RegionIdAlias": b.region,
        "Address": b.address,
        "AddressType": b.address_type,
        "AddressIPVersion": b.ip_version,
        "NetworkType": b.network_type,
        "VpcId": b.vpc,
        "VSwitchId": b.vswitch,
        "MasterZoneId": b.master_zone,
        "SlaveZoneId": b.slave_zone,
        "ResourceGroupId": b.resource_group,
        "LoadBalancerSpec": b.spec,
        "InstanceChargeType": b.instance_charge,
        "PayType": "PayOnDemand",
        "InternetChargeType": b.internet_charge,
        "InternetChargeTypeAlias": b.internet_charge,
        "Bandwidth": b.bandwidth,
        "DeleteProtection": b.delete_protection,
        "ModificationProtectionStatus": b.modification_status,
        "ModificationProtectionReason": b.modification_reason,
        "CreateTimeStamp": b.created,
        "Tags": {"Tag": [{"TagKey": k, "TagValue": v} for k, v in sorted(b.tags.items())]},
    }


def _numbered_tags(params: Mapping[str, str]) -> dict[str, str]:
    tags = {}
    for index in range(1, MAX_TAGS + 2):
        key = params.get(f"Tag.{index}.Key")
        if key is None:
            break
        tags[key] = params.get(f"Tag.{index}.Value", "")
    if len(tags) > MAX_TAGS:
        raise RpcError("SizeLimitExceeded.Tag", f"at most {MAX_TAGS} tags a resource")
    return tags


def _tag_filter(params: Mapping[str, str]) -> list[tuple[str, str | None]]:
    raw = params.get("Tags")
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError as err:
        raise RpcError("InvalidParameter.Tags", f"Tags is not a JSON array: {raw!r}") from err
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise RpcError("InvalidParameter.Tags", f"Tags is not a JSON array of objects: {raw!r}")
    return [(str(i.get("TagKey", "")), i.get("TagValue")) for i in items]


def _matches(b: Balancer, params: Mapping[str, str], tags: list[tuple[str, str | None]]) -> bool:
    ids = [i for i in params.get("LoadBalancerId", "").split(",") if i]
    simple = {
        "LoadBalancerName": b.name,
        "AddressType": b.address_type,
        "NetworkType": b.network_type,
        "VpcId": b.vpc,
        "VSwitchId": b.vswitch,
        "Address": b.address,
        "ResourceGroupId": b.resource_group,
    }
    if ids and b.id not in ids:
        return False
    if any(params.get(k) and params[k] != v for k, v in simple.items()):
        return False
    return all(k in b.tags and (v is None or b.tags[k] == str(v)) for k, v in tags)


def describe_load_balancers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    region = required(params, "RegionId")
    tags = _tag_filter(params)
    found = [
        b
        for _, b in sorted(world.slb.balancers.items())
        if b.region == region and _matches(b, params, tags)
    ]
    number = int(params.get("PageNumber") or 1)
    size = min(int(params.get("PageSize") or 50), 100)
    chunk = found[(number - 1) * size : number * size]
    return {
        "LoadBalancers": {"LoadBalancer": [render_balancer(b) for b in chunk]},
        "TotalCount": len(found),
        "PageNumber": number,
        "PageSize": size,
    }


def describe_load_balancer_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    ports = sorted(b.listeners)
    return {
        **render_balancer(b),
        "ListenerPorts": {"ListenerPort": [port for port, _ in ports]},
        "ListenerPortsAndProtocol": {
            "ListenerPortAndProtocol": [
                {"ListenerPort": port, "ListenerProtocol": protocol} for port, protocol in ports
            ]
        },
    }


def _address(world: World, address_type: str) -> str:
    world.slb.addresses += 1
    high, low = divmod(world.slb.addresses, 250)
    return (
        f"47.{96 + high % 4}.{high // 4 % 250}.{low + 1}"
        if address_type == "internet"
        else (f"192.168.{high % 250}.{low + 1}")
    )


def _new_balancer(world: World, params: Mapping[str, str]) -> Balancer:
    address_type = params.get("AddressType") or "internet"
    if address_type not in ("internet", "intranet"):
        raise RpcError("InvalidParameter.AddressType", f"AddressType {address_type!r}")
    if address_type == "intranet" and not params.get("VSwitchId"):
        raise RpcError("MissingParameter", "an intranet balancer needs a VSwitchId")
    lb_id = world.new_id("lb")
    made = Balancer(
        id=lb_id,
        region=params["RegionId"],
        name=params.get("LoadBalancerName") or f"auto_named_slb_{lb_id[-6:]}",
        address=params.get("Address") or _address(world, address_type),
        address_type=address_type,
        network_type="vpc" if params.get("VpcId") or params.get("VSwitchId") else "classic",
        vpc=params.get("VpcId", ""),
        vswitch=params.get("VSwitchId", ""),
        ip_version=params.get("AddressIPVersion") or "ipv4",
        master_zone=params.get("MasterZoneId") or f"{params['RegionId']}-h",
        slave_zone=params.get("SlaveZoneId", ""),
        resource_group=params.get("ResourceGroupId") or "rg-default",
        spec=params.get("LoadBalancerSpec", ""),
        instance_charge=params.get("InstanceChargeType") or "PayBySpec",
        internet_charge=params.get("InternetChargeType") or "paybytraffic",
        bandwidth=int(params.get("Bandwidth") or 5120),
        delete_protection=params.get("DeleteProtection") or "off",
        modification_status=params.get("ModificationProtectionStatus") or "NonProtection",
        modification_reason=params.get("ModificationProtectionReason", ""),
        created=int(time.time() * 1000),
        tags=_numbered_tags(params),
    )
    return made


def create_load_balancer(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    required(params, "RegionId")
    token = params.get("ClientToken", "")
    made = world.slb.balancers.get(world.slb.client_tokens.get(token, "")) if token else None
    if made is None:
        made = _new_balancer(world, params)
        world.slb.balancers[made.id] = made
        if token:
            world.slb.client_tokens[token] = made.id
    return {
        "LoadBalancerId": made.id,
        "LoadBalancerName": made.name,
        "Address": made.address,
        "AddressIPVersion": made.ip_version,
        "NetworkType": made.network_type,
        "VpcId": made.vpc,
        "VSwitchId": made.vswitch,
        "ResourceGroupId": made.resource_group,
    }


def delete_load_balancer(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    if b.delete_protection == "on":
        raise RpcError(
            "OperationDenied.DeleteProtectionIsOn",
            "The loadbalancer can't be deleted due to DeleteProtection is enabled.",
        )
    slb = world.slb
    del slb.balancers[b.id]
    for table in (slb.vgroups, slb.domains):
        for gone in [k for k, v in table.items() if v.lb == b.id]:
            del table[gone]
    for eip in slb.eips.values():
        if eip.lb == b.id:
            eip.lb = ""
    for token in [k for k, v in slb.client_tokens.items() if v == b.id]:
        del slb.client_tokens[token]
    return {}


def _one_of(params: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    value = required(params, name)
    if value not in allowed:
        raise RpcError(f"InvalidParameter.{name}", f"{name} {value!r} is not one of {allowed}")
    return value


def set_delete_protection(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    b.delete_protection = _one_of(params, "DeleteProtection", _ON_OFF)
    return {}


def set_modification_protection(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    status = _one_of(params, "ModificationProtectionStatus", ("NonProtection", "ConsoleProtection"))
    b.modification_status = status
    b.modification_reason = (
        params.get("ModificationProtectionReason", "") if status == "ConsoleProtection" else ""
    )
    return {}


def set_name(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    b.name = required(params, "LoadBalancerName")
    return {}


def modify_internet_spec(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    if b.address_type != "internet":
        raise RpcError("OperationDenied", "an intranet balancer has no internet spec")
    b.internet_charge = params.get("InternetChargeType") or b.internet_charge
    b.bandwidth = int(params.get("Bandwidth") or b.bandwidth)
    return {}


def modify_instance_spec(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    b.spec = required(params, "LoadBalancerSpec")
    return {}


def modify_instance_charge_type(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    charge = _one_of(params, "InstanceChargeType", ("PayBySpec", "PayByCLCU"))
    if charge == "PayBySpec" and not (params.get("LoadBalancerSpec") or b.spec):
        raise RpcError("MissingParameter", "PayBySpec needs a LoadBalancerSpec")
    b.instance_charge = charge
    b.spec = params.get("LoadBalancerSpec") or ("" if charge == "PayByCLCU" else b.spec)
    return {}


def _tagged(world: World, params: Mapping[str, str]) -> list[Balancer]:
    if params.get("ResourceType") != "instance":
        raise RpcError("InvalidParameter.ResourceType", "ResourceType must be instance")
    ids = repeated(params, "ResourceId")
    if not ids:
        raise RpcError("MissingParameter", "The input parameter 'ResourceId' that is mandatory")
    return [balancer(world, i) for i in ids]


def list_tag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    items = [
        {"ResourceId": b.id, "ResourceType": "instance", "TagKey": k, "TagValue": v}
        for b in _tagged(world, params)
        for k, v in sorted(b.tags.items())
    ]
    return {"TagResources": {"TagResource": items}, "NextToken": ""}


def tag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    tags = _numbered_tags(params)
    if not tags:
        raise RpcError("MissingParameter", "The input parameter 'Tag' that is mandatory")
    for b in _tagged(world, params):
        if len({**b.tags, **tags}) > MAX_TAGS:
            raise RpcError("SizeLimitExceeded.Tag", f"at most {MAX_TAGS} tags a resource")
    for b in _tagged(world, params):
        b.tags.update(tags)
    return {}


def untag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    keys = repeated(params, "TagKey")
    for b in _tagged(world, params):
        for key in keys or list(b.tags):
            b.tags.pop(key, None)
    return {}


def describe_server_certificates(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    """The region's certificates (``ServerCertificateId``: that one, none when unknown), as
    upstream's ``checkCertValidity`` reads them before changing a listener's certificate."""
    region = required(params, "RegionId")
    wanted = params.get("ServerCertificateId", "")
    found = [
        c
        for _, c in sorted(world.slb.certificates.items())
        if c.region == region and wanted in ("", c.id)
    ]
    return {
        "ServerCertificates": {
            "ServerCertificate": [
                {
                    "ServerCertificateId": c.id,
                    "ServerCertificateName": c.name,
                    "CommonName": c.common_name,
                    "CertificateId": c.common_name,
                    "RegionId": c.region,
                    "CreateTimeStamp": c.created_ms,
                    "ExpireTimeStamp": c.expire_ms,
                    "IsAliCloudCertificate": 0,
                }
                for c in found
            ]
        }
    }


for _action, _handler in {
    "DescribeLoadBalancers": describe_load_balancers,
    "DescribeLoadBalancerAttribute": describe_load_balancer_attribute,
    "CreateLoadBalancer": create_load_balancer,
    "DeleteLoadBalancer": delete_load_balancer,
    "SetLoadBalancerDeleteProtection": set_delete_protection,
    "SetLoadBalancerModificationProtection": set_modification_protection,
    "SetLoadBalancerName": set_name,
    "ModifyLoadBalancerInternetSpec": modify_internet_spec,
    "ModifyLoadBalancerInstanceSpec": modify_instance_spec,
    "ModifyLoadBalancerInstanceChargeType": modify_instance_charge_type,
    "ListTagResources": list_tag_resources,
    "TagResources": tag_resources,
    "UntagResources": untag_resources,
    "DescribeServerCertificates": describe_server_certificates,
}.items():
    ACTIONS[(VERSION, _action)] = _handler
