"""VPC (API ``2016-04-28``): route tables and their custom entries to instances, singly
(``CreateRouteEntry``/``DeleteRouteEntry``, what kccm sends) and in batches
(``CreateRouteEntries``/``DeleteRouteEntries``, what upstream's route controller sends); the
EIPs bound to SLB balancers (``DescribeEipAddresses``, what ``external-ip-type: eip`` reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.rpc import ACTIONS, RpcError, page, required
from kccm.emulators.alibabacloud.slbmodel import Eip
from kccm.emulators.alibabacloud.world import RouteEntry, RouteTable, World

VERSION = "2016-04-28"


def _table(world: World, table_id: str) -> RouteTable:
    table = world.route_tables.get(table_id)
    if table is None:
        raise RpcError("InvalidRouteTableId.NotFound", f"route table {table_id} not found", 404)
    return table


def describe_route_table_list(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    region = params.get("RegionId") or world.region
    tables = [
        t
        for _, t in sorted(world.route_tables.items())
        if t.region == region
        and (not params.get("VpcId") or t.vpc == params["VpcId"])
        and (not params.get("RouteTableId") or t.id == params["RouteTableId"])
    ]
    return {
        "RouterTableList": {
            "RouterTableListType": [
                {"RouteTableId": t.id, "VpcId": t.vpc, "RouteTableType": t.type} for t in tables
            ]
        },
        "TotalCount": len(tables),
        "PageNumber": 1,
        "PageSize": max(len(tables), 10),
    }


def _render(table: RouteTable, entry: RouteEntry) -> dict[str, Any]:
    return {
        "RouteEntryId": entry.id,
        "RouteTableId": table.id,
        "DestinationCidrBlock": entry.cidr,
        "Type": entry.type,
        "Status": entry.status,
        "NextHops": {
            "NextHop": [{"NextHopType": entry.next_hop_type, "NextHopId": entry.next_hop}]
        },
    }


def describe_route_entry_list(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    table = _table(world, required(params, "RouteTableId"))
    entries = [
        e
        for e in table.entries
        if (not params.get("RouteEntryType") or e.type == params["RouteEntryType"])
        and (not params.get("NextHopType") or e.next_hop_type == params["NextHopType"])
        and (not params.get("DestinationCidrBlock") or e.cidr == params["DestinationCidrBlock"])
    ]
    chunk, following = page(params, entries, 500)
    return {
        "RouteEntrys": {"RouteEntry": [_render(table, e) for e in chunk]},
        "NextToken": following,
        "TotalCount": len(entries),
    }


def _create(world: World, table_id: str, cidr: str, hop_type: str, hop: str) -> str:
    table = _table(world, table_id)
    if hop_type == "Instance" and hop not in world.instances:
        raise RpcError("InvalidInstanceId.NotFound", f"instance {hop} not found", 404)
    if any(e.cidr == cidr for e in table.entries):
        raise RpcError("InvalidCIDRBlock.Duplicate", f"the route entry for {cidr} already exists")
    entry = RouteEntry(world.new_id("rte"), cidr, hop, hop_type)
    table.entries.append(entry)
    return entry.id


def _delete(world: World, table_id: str, cidr: str, hop: str) -> None:
    table = _table(world, table_id)
    for entry in table.entries:
        if entry.cidr == cidr and (not hop or entry.next_hop == hop):
            table.entries.remove(entry)
            return
    raise RpcError("InvalidRouteEntry.NotFound", f"route entry {cidr} not found", 404)


def create_route_entry(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    entry = _create(
        world,
        required(params, "RouteTableId"),
        required(params, "DestinationCidrBlock"),
        params.get("NextHopType") or "Instance",
        required(params, "NextHopId"),
    )
    return {"RouteEntryId": entry}


def delete_route_entry(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    _delete(
        world,
        required(params, "RouteTableId"),
        required(params, "DestinationCidrBlock"),
        params.get("NextHopId", ""),
    )
    return {}


def _batch(params: Mapping[str, str]) -> list[dict[str, str]]:
    found = []
    for index in range(1, 101):
        prefix = f"RouteEntries.{index}."
        fields = {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}
        if not fields:
            break
        found.append(fields)
    return found


def _failed(fields: Mapping[str, str], err: RpcError) -> dict[str, str]:
    return {
        "DstCidrBlock": fields.get("DstCidrBlock", ""),
        "FailedCode": err.code,
        "FailedMessage": err.message,
        "NextHop": fields.get("NextHop", ""),
    }


def _outcome(done: list[str], failed: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "SuccessCount": len(done),
        "FailedCount": len(failed),
        "RouteEntryIds": done,
        "FailedRouteEntries": failed,
    }


def create_route_entries(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    done, failed = [], []
    for fields in _batch(params):
        try:
            done.append(
                _create(
                    world,
                    fields.get("RouteTableId", ""),
                    fields.get("DstCidrBlock", ""),
                    fields.get("NextHopType") or "Instance",
                    fields.get("NextHop", ""),
                )
            )
        except RpcError as err:
            failed.append(_failed(fields, err))
    return _outcome(done, failed)


def delete_route_entries(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    done, failed = [], []
    for fields in _batch(params):
        try:
            _delete(
                world,
                fields.get("RouteTableId", ""),
                fields.get("DstCidrBlock", ""),
                fields.get("NextHop", ""),
            )
            done.append(fields.get("DstCidrBlock", ""))
        except RpcError as err:
            failed.append(_failed(fields, err))
    return _outcome(done, failed)


def _eip_matches(eip: Eip, params: Mapping[str, str]) -> bool:
    have = {"AssociatedInstanceId": eip.lb, "AllocationId": eip.id, "EipAddress": eip.ip}
    return all(not params.get(k) or params[k] == v for k, v in have.items())


def describe_eip_addresses(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    """Pages of ``PageSize`` (10 by default, at most 100) by ``PageNumber``; filters
    ``AssociatedInstanceType`` (``SlbInstance``: the emulator binds EIPs to balancers only),
    ``AssociatedInstanceId``, ``AllocationId``, ``EipAddress``."""
    region = required(params, "RegionId")
    kind = params.get("AssociatedInstanceType", "")
    if kind and kind != "SlbInstance":
        found = []
    else:
        found = [
            e
            for _, e in sorted(world.slb.eips.items())
            if e.region == region and (not kind or e.lb) and _eip_matches(e, params)
        ]
    number = int(params.get("PageNumber") or 1)
    size = min(int(params.get("PageSize") or 10), 100)
    items = [
        {
            "AllocationId": e.id,
            "IpAddress": e.ip,
            "RegionId": e.region,
            "Status": "InUse" if e.lb else "Available",
            "InstanceId": e.lb,
            "InstanceType": "SlbInstance" if e.lb else "",
            "InternetChargeType": "PayByTraffic",
        }
        for e in found[(number - 1) * size : number * size]
    ]
    return {
        "EipAddresses": {"EipAddress": items},
        "TotalCount": len(found),
        "PageNumber": number,
        "PageSize": size,
    }


ACTIONS[(VERSION, "DescribeEipAddresses")] = describe_eip_addresses
ACTIONS[(VERSION, "DescribeRouteTableList")] = describe_route_table_list
ACTIONS[(VERSION, "DescribeRouteEntryList")] = describe_route_entry_list
ACTIONS[(VERSION, "CreateRouteEntry")] = create_route_entry
ACTIONS[(VERSION, "DeleteRouteEntry")] = delete_route_entry
ACTIONS[(VERSION, "CreateRouteEntries")] = create_route_entries
ACTIONS[(VERSION, "DeleteRouteEntries")] = delete_route_entries
