"""NLB (API ``2022-04-30``): network load balancers, their zones, protections, security groups,
tags, the asynchronous jobs, regions and zones.

Shapes and codes as the API reference (Alibaba Cloud help, "Network Load Balancer API",
2022-04-30) and the Go SDK's structs (``alibabacloud-go/nlb-20220430/v4``, vendored by
cloud-provider-alibaba-cloud v2.14.0) give them: answers list plainly (``"LoadBalancers":
[...]``), tags are ``{"Key", "Value"}`` in ``List*`` answers but ``{"TagKey", "TagValue"}`` in
``GetLoadBalancerAttribute``, ``CreateLoadBalancer`` answers ``LoadbalancerId`` (so spelled) and
no job: the balancer is ``Provisioning`` until its (internal) job settles, then ``Active``; the
other writes answer a ``JobId`` and leave the balancer ``Configuring`` meanwhile
(:mod:`.nlbmodel`). A balancer needs zone mappings in two zones or more, each with a vSwitch;
each gets a private address (``PrivateIPv4Address`` if sent) and, for ``Internet``, a public one.
Deletion protection refuses ``DeleteLoadBalancer`` (``OperationDenied.DeletionProtection``);
deleting a balancer removes its listeners at once (server groups stay: they are regional).
Listeners are in :mod:`.nlb_listeners`, server groups in :mod:`.nlb_groups`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from kccm.emulators.alibabacloud.nlbmodel import NlbBalancer, ZoneMapping
from kccm.emulators.alibabacloud.nlbwire import (
    flag,
    not_found,
    objects,
    read_job,
    read_jobs,
    region,
    register,
    render_tags,
    start_job,
    strings,
    tags,
)
from kccm.emulators.alibabacloud.rpc import RpcError, required, token_listing
from kccm.emulators.alibabacloud.world import World

__all__ = ["nlb_balancer", "render_nlb"]

ADDRESS_TYPES = ("Internet", "Intranet")
ZONE_SUFFIXES = "hijk"


def nlb_balancer(world: World, lb_id: str) -> NlbBalancer:
    found = world.nlb.balancers.get(lb_id)
    if found is None:
        raise not_found("loadBalancer", lb_id)
    return found


def _address(b: NlbBalancer, zone: ZoneMapping) -> dict[str, Any]:
    return {
        "AllocationId": zone.allocation or None,
        "EniId": zone.eni,
        "PrivateIPv4Address": zone.private_ip,
        "PublicIPv4Address": zone.public_ip or None,
        "PrivateIPv4HcStatus": "healthy",
    }


def render_nlb(b: NlbBalancer, tag_style: tuple[str, str] = ("Key", "Value")) -> dict[str, Any]:
    body = {
        "LoadBalancerId": b.id,
        "LoadBalancerName": b.name,
        "LoadBalancerStatus": b.status,
        "LoadBalancerBusinessStatus": "Normal",
        "LoadBalancerType": "Network",
        "RegionId": b.region,
        "VpcId": b.vpc,
        "AddressType": b.address_type,
        "AddressIpVersion": b.ip_version,
        "Ipv6AddressType": b.ipv6_type,
        "DNSName": b.dns_name,
        "ResourceGroupId": b.resource_group,
        "CreateTime": b.created,
        "CrossZoneEnabled": b.cross_zone,
        "SecurityGroupIds": list(b.security_groups),
        "LoadBalancerBillingConfig": {"PayType": "PostPay"},
        "DeletionProtectionConfig": {
            "Enabled": b.deletion_protection,
            "Reason": b.deletion_reason,
        },
        "ModificationProtectionConfig": {
            "Status": b.modification_status,
            "Reason": b.modification_reason,
        },
        "OperationLocks": [],
        "Tags": render_tags(b.tags, *tag_style),
        "ZoneMappings": [
            {
                "ZoneId": z.zone,
                "VSwitchId": z.vswitch,
                "Status": "Active",
                "LoadBalancerAddresses": [_address(b, z)],
            }
            for z in b.zones
        ],
    }
    if b.bandwidth_package:
        body["BandwidthPackageId"] = b.bandwidth_package
    return body


def _seen(world: World, b: NlbBalancer) -> NlbBalancer:
    read_jobs(world, b.id)
    return b


def get_load_balancer_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = _seen(world, nlb_balancer(world, required(params, "LoadBalancerId")))
    return render_nlb(b, ("TagKey", "TagValue"))


def _matches(b: NlbBalancer, params: Mapping[str, str], wanted: dict[str, str]) -> bool:
    lists = {
        "LoadBalancerIds": b.id,
        "LoadBalancerNames": b.name,
        "VpcIds": b.vpc,
    }
    simple = {
        "AddressType": b.address_type,
        "AddressIpVersion": b.ip_version,
        "LoadBalancerStatus": b.status,
        "ResourceGroupId": b.resource_group,
        "DNSName": b.dns_name,
    }
    if any(strings(params, k) and v not in strings(params, k) for k, v in lists.items()):
        return False
    if any(params.get(k) and params[k] != v for k, v in simple.items()):
        return False
    if params.get("ZoneId") and params["ZoneId"] not in {z.zone for z in b.zones}:
        return False
    return all(b.tags.get(k) == v for k, v in wanted.items())


def list_load_balancers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    where, wanted = region(world, params), tags(params)
    found = [
        b
        for _, b in sorted(world.nlb.balancers.items())
        if b.region == where and _matches(b, params, wanted)
    ]
    return token_listing(params, found, "LoadBalancers", lambda b: render_nlb(_seen(world, b)))


def _zones(world: World, where: str, params: Mapping[str, str]) -> list[ZoneMapping]:
    items = objects(params, "ZoneMappings")
    if len(items) < 2:
        raise RpcError("IllegalParam.ZoneMappings", "an NLB needs zone mappings in 2 zones or more")
    if len({i.get("ZoneId") for i in items}) != len(items):
        raise RpcError("IllegalParam.ZoneMappings", "a zone may be mapped once")
    made = []
    for item in items:
        zone, vswitch = item.get("ZoneId", ""), item.get("VSwitchId", "")
        if not vswitch or not zone.startswith(f"{where}-"):
            raise RpcError("IllegalParam.ZoneMappings", f"zone mapping {item!r}")
        made.append(_mapping(world, zone, vswitch, item.get("PrivateIPv4Address", "")))
    return made


def _mapping(world: World, zone: str, vswitch: str, private_ip: str) -> ZoneMapping:
    world.nlb.addresses += 1
    high, low = divmod(world.nlb.addresses, 250)
    return ZoneMapping(
        zone=zone,
        vswitch=vswitch,
        private_ip=private_ip or f"172.16.{high % 250}.{low + 1}",
        eni=world.new_id("eni"),
    )


def _publish(world: World, b: NlbBalancer) -> None:
    """Public addresses for an ``Internet`` balancer's zones (none for ``Intranet``)."""
    for z in b.zones:
        if b.address_type == "Internet" and not z.allocation:
            high, low = divmod(world.nlb.addresses + 1000, 250)
            world.nlb.addresses += 1
            z.allocation, z.public_ip = (
                world.new_id("eip"),
                f"39.{96 + high % 4}.{high // 4 % 250}.{low + 1}",
            )
        elif b.address_type == "Intranet":
            z.allocation, z.public_ip = "", ""


def _one_of(value: str, name: str, allowed: tuple[str, ...]) -> str:
    """``value`` in the API's spelling (any case is taken: upstream sends ``internet``)."""
    for spelling in allowed:
        if value.lower() == spelling.lower():
            return spelling
    raise RpcError(f"IllegalParam.{name}", f"{name} {value!r} is not one of {allowed}")


def _new_balancer(world: World, params: Mapping[str, str]) -> NlbBalancer:
    where = region(world, params)
    lb_id = world.new_id("nlb")
    made = NlbBalancer(
        id=lb_id,
        region=where,
        name=params.get("LoadBalancerName", ""),
        vpc=required(params, "VpcId"),
        address_type=_one_of(required(params, "AddressType"), "AddressType", ADDRESS_TYPES),
        ip_version=_one_of(
            params.get("AddressIpVersion") or "ipv4", "AddressIpVersion", ("ipv4", "DualStack")
        ),
        resource_group=params.get("ResourceGroupId") or "rg-default",
        zones=_zones(world, where, params),
        bandwidth_package=params.get("BandwidthPackageId", ""),
        deletion_protection=bool(flag(params, "DeletionProtectionConfig.Enabled")),
        deletion_reason=params.get("DeletionProtectionConfig.Reason", ""),
        modification_status=params.get("ModificationProtectionConfig.Status") or "NonProtection",
        modification_reason=params.get("ModificationProtectionConfig.Reason", ""),
        created=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tags=tags(params),
        status="Provisioning",
    )
    _publish(world, made)
    return made


def _until_settled(world: World, b: NlbBalancer, action: str, steady: str = "Active") -> str:
    """A job on ``b``: it is ``Configuring`` (``Provisioning`` for the create) meanwhile."""
    if b.status == steady:
        b.status = "Provisioning" if action == "CreateLoadBalancer" else "Configuring"

    def settle(succeeded: bool) -> None:
        if not succeeded and action == "CreateLoadBalancer":
            world.nlb.balancers.pop(b.id, None)
        b.status = steady

    return start_job(world, action, b.id, settle).id


def create_load_balancer(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    token = params.get("ClientToken", "")
    made = world.nlb.balancers.get(world.nlb.client_tokens.get(token, "")) if token else None
    if made is None:
        made = _new_balancer(world, params)
        world.nlb.balancers[made.id] = made
        if token:
            world.nlb.client_tokens[token] = made.id
        made.status = "Active"
        _until_settled(world, made, "CreateLoadBalancer")
    return {"LoadbalancerId": made.id, "OrderId": 0}


def delete_load_balancer(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = nlb_balancer(world, required(params, "LoadBalancerId"))
    if b.deletion_protection:
        raise RpcError(
            "OperationDenied.DeletionProtection",
            f"The loadBalancer [{b.id}] can not be deleted: deletion protection is enabled.",
        )
    del world.nlb.balancers[b.id]
    for gone in [k for k, v in world.nlb.listeners.items() if v.lb == b.id]:
        del world.nlb.listeners[gone]
    for token in [k for k, v in world.nlb.client_tokens.items() if v == b.id]:
        del world.nlb.client_tokens[token]
    return {"JobId": start_job(world, "DeleteLoadBalancer", b.id).id}


def _changed(
    action: str, change: Callable[[World, NlbBalancer, Mapping[str, str]], None]
) -> Callable[[World, Mapping[str, str]], dict[str, Any]]:
    def handler(world: World, params: Mapping[str, str]) -> dict[str, Any]:
        b = nlb_balancer(world, required(params, "LoadBalancerId"))
        change(world, b, params)
        return {"JobId": _until_settled(world, b, action)}

    return handler


def _attribute(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
    b.name = params.get("LoadBalancerName") or b.name
    cross = flag(params, "CrossZoneEnabled")
    b.cross_zone = b.cross_zone if cross is None else cross


def _address_type(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
    b.address_type = _one_of(required(params, "AddressType"), "AddressType", ADDRESS_TYPES)
    _publish(world, b)


def _update_zones(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
    wanted = _zones(world, b.region, params)
    kept = {z.zone: z for z in b.zones}
    b.zones = [
        kept[z.zone] if z.zone in kept and kept[z.zone].vswitch == z.vswitch else z for z in wanted
    ]
    _publish(world, b)


def _security_groups(join: bool) -> Callable[[World, NlbBalancer, Mapping[str, str]], None]:
    def change(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
        ids = strings(params, "SecurityGroupIds")
        if not ids:
            raise RpcError(
                "MissingParameter", "The input parameter 'SecurityGroupIds' that is mandatory"
            )
        if join:
            b.security_groups += [i for i in ids if i not in b.security_groups]
        else:
            b.security_groups = [i for i in b.security_groups if i not in ids]

    return change


def _bandwidth_package(attach: bool) -> Callable[[World, NlbBalancer, Mapping[str, str]], None]:
    def change(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
        b.bandwidth_package = required(params, "BandwidthPackageId") if attach else ""

    return change


def _ipv6(internet: bool) -> Callable[[World, NlbBalancer, Mapping[str, str]], None]:
    def change(world: World, b: NlbBalancer, params: Mapping[str, str]) -> None:
        if b.ip_version != "DualStack":
            raise RpcError("OperationDenied.IpVersion", f"{b.id} is no DualStack balancer")
        b.ipv6_type = "Internet" if internet else "Intranet"

    return change


def update_protection(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    """Changes no status (it answers no job)."""
    b = nlb_balancer(world, required(params, "LoadBalancerId"))
    enabled = flag(params, "DeletionProtectionEnabled")
    if enabled is not None:
        b.deletion_protection = enabled
        b.deletion_reason = params.get("DeletionProtectionReason", "") if enabled else ""
    status = params.get("ModificationProtectionStatus")
    if status:
        b.modification_status = _one_of(
            status, "ModificationProtectionStatus", ("NonProtection", "ConsoleProtection")
        )
        b.modification_reason = params.get("ModificationProtectionReason", "")
    return {}


def get_job_status(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    job = world.nlb.jobs.get(required(params, "JobId"))
    if job is None:
        raise not_found("job", params["JobId"])
    return {"Status": read_job(job)}


def list_asyn_jobs(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    ids = strings(params, "JobIds")
    found = [world.nlb.jobs[i] for i in ids if i in world.nlb.jobs]
    jobs = [
        {"Id": j.id, "Status": read_job(j), "OperateType": j.action, "ResourceId": j.resource}
        for j in found
    ]
    return {"Jobs": jobs, "TotalCount": str(len(jobs))}


def describe_regions(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    return {
        "Regions": [
            {"RegionId": world.region, "LocalName": world.region, "RegionEndpoint": "emulator"}
        ]
    }


def describe_zones(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    where = region(world, params)
    zones = sorted(
        {f"{where}-{s}" for s in ZONE_SUFFIXES}
        | {i.zone for i in world.instances.values() if i.region == where}
    )
    return {"Zones": [{"ZoneId": z, "LocalName": z} for z in zones]}


register(
    {
        "GetLoadBalancerAttribute": get_load_balancer_attribute,
        "ListLoadBalancers": list_load_balancers,
        "CreateLoadBalancer": create_load_balancer,
        "DeleteLoadBalancer": delete_load_balancer,
        "UpdateLoadBalancerAttribute": _changed("UpdateLoadBalancerAttribute", _attribute),
        "UpdateLoadBalancerAddressTypeConfig": _changed(
            "UpdateLoadBalancerAddressTypeConfig", _address_type
        ),
        "UpdateLoadBalancerZones": _changed("UpdateLoadBalancerZones", _update_zones),
        "LoadBalancerJoinSecurityGroup": _changed(
            "LoadBalancerJoinSecurityGroup", _security_groups(join=True)
        ),
        "LoadBalancerLeaveSecurityGroup": _changed(
            "LoadBalancerLeaveSecurityGroup", _security_groups(join=False)
        ),
        "AttachCommonBandwidthPackageToLoadBalancer": _changed(
            "AttachCommonBandwidthPackageToLoadBalancer", _bandwidth_package(attach=True)
        ),
        "DetachCommonBandwidthPackageFromLoadBalancer": _changed(
            "DetachCommonBandwidthPackageFromLoadBalancer", _bandwidth_package(attach=False)
        ),
        "EnableLoadBalancerIpv6Internet": _changed("EnableLoadBalancerIpv6Internet", _ipv6(True)),
        "DisableLoadBalancerIpv6Internet": _changed(
            "DisableLoadBalancerIpv6Internet", _ipv6(False)
        ),
        "UpdateLoadBalancerProtection": update_protection,
        "GetJobStatus": get_job_status,
        "ListAsynJobs": list_asyn_jobs,
        "DescribeRegions": describe_regions,
        "DescribeZones": describe_zones,
    }
)
