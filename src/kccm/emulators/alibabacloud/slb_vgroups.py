"""SLB vServer groups and their members.

``BackendServers`` is JSON text: ``[{"ServerId", "Port", "Weight", "Type", "Description",
"ServerIp"}]`` (``Type`` ``ecs`` by default: a member added must be an existing ECS instance;
``eni`` members carry their ``ServerIp``; an instance deleted leaves every group; the keys in
any case, as upstream sends ``serverId``, ``port``...). A member is
named by its server, port and (``eni``) IP: adding one already there changes nothing, removing
or setting one not there is refused, ``SetVServerGroupAttribute`` changes weights and
descriptions (and the group's name), ``ModifyVServerGroupBackendServers`` swaps
``OldBackendServers`` for ``NewBackendServers``. A group a listener uses cannot be deleted
(``RspoolVipExist``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.rpc import ACTIONS, RpcError, required
from kccm.emulators.alibabacloud.slb import VERSION, balancer
from kccm.emulators.alibabacloud.slbmodel import Member, VGroup
from kccm.emulators.alibabacloud.world import World

__all__: list[str] = []

MEMBER_TYPES = ("ecs", "eni", "eci")


def _group(world: World, params: Mapping[str, str]) -> VGroup:
    group_id = required(params, "VServerGroupId")
    found = world.slb.vgroups.get(group_id)
    if found is None:
        raise RpcError(
            "InvalidParameter.VServerGroupId",
            f"The specified VServerGroupId {group_id} does not exist.",
        )
    return found


_KEYS = {k.lower(): k for k in ("ServerId", "Port", "Weight", "Type", "Description", "ServerIp")}


def _keyed(item: Any) -> dict[str, Any]:
    """A member's fields by their API spelling: SLB takes them in any case (upstream's
    ``model.BackendAttribute`` marshals ``serverId``, ``port``, ``weight``...; kccm sends
    ``ServerId``...)."""
    if not isinstance(item, dict):
        raise RpcError("InvalidParameter.BackendServers", f"a member is no object: {item!r}")
    return {_KEYS.get(str(k).lower(), str(k)): v for k, v in item.items()}


def _member(world: World, raw: Any, *, new: bool) -> Member:
    item = _keyed(raw)
    if not item.get("ServerId"):
        raise RpcError("InvalidParameter.BackendServers", f"a member needs a ServerId: {raw!r}")
    kind = str(item.get("Type") or "ecs")
    port = int(str(item.get("Port") or 0))
    weight = int(str(item.get("Weight", 100)))
    if kind not in MEMBER_TYPES or not 1 <= port <= 65535 or not 0 <= weight <= 100:
        raise RpcError("InvalidParameter.BackendServers", f"member {raw!r}")
    if new and kind == "ecs" and item["ServerId"] not in world.instances:
        raise RpcError(
            "InvalidBackendServers.ServerIdNotExist", f"ECS instance {item['ServerId']} not found"
        )
    if kind == "eni" and not item.get("ServerIp"):
        raise RpcError(
            "InvalidParameter.BackendServers", f"an eni member needs a ServerIp: {raw!r}"
        )
    return Member(
        server_id=str(item["ServerId"]),
        port=port,
        weight=weight,
        type=kind,
        description=str(item.get("Description") or ""),
        server_ip=str(item.get("ServerIp") or ""),
    )


def _members(
    world: World, params: Mapping[str, str], name: str, *, new: bool = True
) -> list[Member]:
    raw = required(params, name)
    try:
        items = json.loads(raw)
    except ValueError as err:
        raise RpcError("InvalidParameter.BackendServers", f"{name} is not JSON: {raw!r}") from err
    if not isinstance(items, list):
        raise RpcError("InvalidParameter.BackendServers", f"{name} is not a JSON array")
    return [_member(world, item, new=new) for item in items]


def _render(group: VGroup) -> dict[str, Any]:
    return {
        "VServerGroupId": group.id,
        "VServerGroupName": group.name,
        "LoadBalancerId": group.lb,
        "BackendServers": {"BackendServer": [m.render() for m in group.members]},
    }


def describe_vgroups(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    groups = [g for _, g in sorted(world.slb.vgroups.items()) if g.lb == b.id]
    return {
        "VServerGroups": {
            "VServerGroup": [
                {"VServerGroupId": g.id, "VServerGroupName": g.name, "ServerCount": len(g.members)}
                for g in groups
            ]
        }
    }


def describe_vgroup_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    return _render(_group(world, params))


def _add(group: VGroup, members: list[Member]) -> None:
    have = {m.key for m in group.members}
    for member in members:
        if member.key not in have:
            group.members.append(member)
            have.add(member.key)


def _index(group: VGroup, member: Member) -> int:
    for index, have in enumerate(group.members):
        if have.key == member.key:
            return index
    raise RpcError(
        "InvalidParameter.BackendServers",
        f"{member.server_id}:{member.port} is not a member of {group.id}",
    )


def create_vgroup(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    b = balancer(world, required(params, "LoadBalancerId"))
    name = params.get("VServerGroupName") or ""
    members = _members(world, params, "BackendServers") if params.get("BackendServers") else []
    group = VGroup(world.new_id("rsp"), b.id, name)
    _add(group, members)
    world.slb.vgroups[group.id] = group
    return _render(group)


def delete_vgroup(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, params)
    owner = world.slb.balancers.get(group.lb)
    if owner is not None and any(
        item.fields.get("VServerGroupId") == group.id for item in owner.listeners.values()
    ):
        raise RpcError("RspoolVipExist", f"there are listeners of {group.lb} using {group.id}")
    del world.slb.vgroups[group.id]
    return {}


def add_backends(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, params)
    _add(group, _members(world, params, "BackendServers"))
    return _render(group)


def remove_backends(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, params)
    for member in _members(world, params, "BackendServers", new=False):
        del group.members[_index(group, member)]
    return _render(group)


def set_vgroup_attribute(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, params)
    members = (
        _members(world, params, "BackendServers", new=False) if params.get("BackendServers") else []
    )
    indexes = [_index(group, m) for m in members]
    for index, member in zip(indexes, members, strict=True):
        group.members[index] = member
    group.name = params.get("VServerGroupName") or group.name
    return _render(group)


def modify_backends(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, params)
    old = _members(world, params, "OldBackendServers", new=False)
    new = _members(world, params, "NewBackendServers")
    for index in sorted((_index(group, m) for m in old), reverse=True):
        del group.members[index]
    _add(group, new)
    return _render(group)


for _action, _handler in {
    "DescribeVServerGroups": describe_vgroups,
    "DescribeVServerGroupAttribute": describe_vgroup_attribute,
    "CreateVServerGroup": create_vgroup,
    "DeleteVServerGroup": delete_vgroup,
    "AddVServerGroupBackendServers": add_backends,
    "RemoveVServerGroupBackendServers": remove_backends,
    "SetVServerGroupAttribute": set_vgroup_attribute,
    "ModifyVServerGroupBackendServers": modify_backends,
}.items():
    ACTIONS[(VERSION, _action)] = _handler
