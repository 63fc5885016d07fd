"""NLB server groups and their servers.

A server group belongs to a VPC and a region, not to a balancer (listeners point at it;
``RelatedLoadBalancerIds`` says whose). ``ServerGroupType`` ``Instance`` (the default) takes
``Ecs``, ``Eni`` and ``Eci`` servers, ``Ip`` takes ``Ip`` ones; an ``Ecs`` server must be an
instance of the emulator (``ResourceNotFound.BackendServer``) and reads back with its private
address; ``Port`` is needed unless the group has ``AnyPortEnabled``; ``Weight`` is 0..100 (100).
A server is named by its ``ServerId``, ``ServerIp`` and ``Port`` (a removal or update without
``ServerIp`` names it by the other two): adding one already there changes nothing, removing or
updating one not there is ``ResourceNotFound.BackendServer``.
Every write answers a ``JobId``: a new group is ``Creating``, a changed one ``Configuring``, new
or changed servers ``Adding``/``Configuring`` until it settles; removals and deletes take effect
at once. A group a listener uses cannot be deleted (``ResourceInUse.ServerGroup``); an instance
the test API deletes leaves every group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.nlbmodel import ServerGroup, ServerMember
from kccm.emulators.alibabacloud.nlbwire import (
    flag,
    integer,
    kept,
    nested,
    not_found,
    objects,
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

__all__ = ["render_group", "render_server"]

PROTOCOLS = ("TCP", "UDP", "TCPUDP", "TCPSSL")
MEMBER_TYPES = {"Instance": ("Ecs", "Eni", "Eci"), "Ip": ("Ip",)}
_SETTINGS = (
    "Scheduler",
    "AnyPortEnabled",
    "ConnectionDrainEnabled",
    "ConnectionDrainTimeout",
    "PreserveClientIpEnabled",
    "AddressIPVersion",
    "IpVersionAffinityMode",
    "ResourceGroupId",
)
_CHECK_INTS = {
    "HealthCheckConnectPort": 0,
    "HealthyThreshold": 2,
    "UnhealthyThreshold": 2,
    "HealthCheckConnectTimeout": 5,
    "HealthCheckInterval": 10,
}
_CHECK_TEXTS = {
    "HealthCheckType": "TCP",
    "HealthCheckDomain": "",
    "HealthCheckUrl": "",
    "HttpCheckMethod": "",
}


def _group(world: World, group_id: str) -> ServerGroup:
    found = world.nlb.groups.get(group_id)
    if found is None:
        raise not_found("serverGroup", group_id)
    return found


def _bool(group: ServerGroup, name: str, default: bool) -> bool:
    raw = group.fields.get(name)
    return default if raw is None else raw == "true"


def _health(group: ServerGroup) -> dict[str, Any]:
    sent = {
        k[len("HealthCheckConfig.") :]: v
        for k, v in group.fields.items()
        if k.startswith("HealthCheckConfig.")
    }
    check: dict[str, Any] = {"HealthCheckEnabled": sent.get("HealthCheckEnabled", "true") == "true"}
    check.update({k: int(sent.get(k) or d) for k, d in _CHECK_INTS.items()})
    check.update({k: sent.get(k, d) for k, d in _CHECK_TEXTS.items()})
    codes = sorted(
        (k for k in sent if k.startswith("HealthCheckHttpCode.")),
        key=lambda k: int(k.rpartition(".")[2]),
    )
    check["HealthCheckHttpCode"] = [sent[k] for k in codes]
    return check


def render_group(world: World, group: ServerGroup) -> dict[str, Any]:
    related = sorted({i.lb for i in world.nlb.listeners.values() if i.group == group.id})
    return {
        "ServerGroupId": group.id,
        "ServerGroupName": group.name,
        "ServerGroupType": group.type,
        "ServerGroupStatus": group.status,
        "Protocol": group.protocol,
        "VpcId": group.vpc,
        "RegionId": group.region,
        "Scheduler": group.fields.get("Scheduler") or "Wrr",
        "AnyPortEnabled": _bool(group, "AnyPortEnabled", False),
        "ConnectionDrainEnabled": _bool(group, "ConnectionDrainEnabled", False),
        "ConnectionDrainTimeout": int(group.fields.get("ConnectionDrainTimeout") or 0),
        "PreserveClientIpEnabled": _bool(
            group, "PreserveClientIpEnabled", group.type == "Instance"
        ),
        "AddressIPVersion": group.fields.get("AddressIPVersion") or "ipv4",
        "IpVersionAffinityMode": group.fields.get("IpVersionAffinityMode", ""),
        "ResourceGroupId": group.fields.get("ResourceGroupId") or "rg-default",
        "ServerCount": len(group.servers),
        "RelatedLoadBalancerIds": related,
        "HealthCheck": _health(group),
        "Tags": render_tags(group.tags),
    }


def render_server(world: World, group: ServerGroup, m: ServerMember) -> dict[str, Any]:
    instance = world.instances.get(m.server_id)
    ip = m.server_ip or (instance.private_ip if instance and m.server_type == "Ecs" else "")
    return {
        "ServerGroupId": group.id,
        "ServerId": m.server_id,
        "ServerIp": ip,
        "ServerType": m.server_type,
        "Port": m.port,
        "Weight": m.weight,
        "Description": m.description,
        "Status": m.status,
        "ZoneId": instance.zone if instance else "",
    }


def _settings(params: Mapping[str, str]) -> dict[str, str]:
    for name in ("AnyPortEnabled", "ConnectionDrainEnabled", "PreserveClientIpEnabled"):
        flag(params, name)
    integer(params, "ConnectionDrainTimeout", 0, 900)
    check = nested(params, "HealthCheckConfig")
    for name in _CHECK_INTS:
        integer(check, name, 0, 65535)
    picked = {k: params[k] for k in _SETTINGS if params.get(k)}
    return kept({**picked, **{f"HealthCheckConfig.{k}": v for k, v in check.items()}})


def _configuring(world: World, group: ServerGroup, action: str, transient: str) -> str:
    group.status = transient

    def settle(succeeded: bool) -> None:
        if not succeeded and action == "CreateServerGroup":
            world.nlb.groups.pop(group.id, None)
        group.status = "Available"

    return start_job(world, action, group.id, settle).id


def create_group(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    kind = params.get("ServerGroupType") or "Instance"
    protocol = params.get("Protocol") or "TCP"
    if kind not in MEMBER_TYPES or protocol not in PROTOCOLS:
        raise RpcError(
            "IllegalParam.ServerGroupType", f"ServerGroupType {kind!r}, Protocol {protocol!r}"
        )
    group = ServerGroup(
        id=world.new_id("sgp"),
        region=region(world, params),
        name=required(params, "ServerGroupName"),
        vpc=required(params, "VpcId"),
        type=kind,
        protocol=protocol,
        fields=_settings(params),
        tags=tags(params),
    )
    world.nlb.groups[group.id] = group
    return {
        "ServerGroupId": group.id,
        "JobId": _configuring(world, group, "CreateServerGroup", "Creating"),
    }


def update_group(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    settings = _settings(params)
    if any(k.startswith("HealthCheckConfig.HealthCheckHttpCode.") for k in settings):
        group.fields = {
            k: v
            for k, v in group.fields.items()
            if not k.startswith("HealthCheckConfig.HealthCheckHttpCode.")
        }
    group.fields.update(settings)
    group.name = params.get("ServerGroupName") or group.name
    return {
        "ServerGroupId": group.id,
        "JobId": _configuring(world, group, "UpdateServerGroupAttribute", "Configuring"),
    }


def delete_group(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    users = sorted(i.id for i in world.nlb.listeners.values() if i.group == group.id)
    if users:
        raise RpcError(
            "ResourceInUse.ServerGroup", f"server group {group.id} is used by listeners {users}"
        )
    del world.nlb.groups[group.id]
    return {"JobId": start_job(world, "DeleteServerGroup", group.id).id}


def _member(world: World, group: ServerGroup, item: dict[str, str], *, new: bool) -> ServerMember:
    kind = item.get("ServerType", "")
    server_id = item.get("ServerId", "")
    any_port = group.fields.get("AnyPortEnabled") == "true"
    port = integer(item, "Port", 0 if any_port else 1, 65535)
    weight = integer(item, "Weight", 0, 100)
    if not server_id or kind not in MEMBER_TYPES[group.type] or (port is None and not any_port):
        raise RpcError("IllegalParam.Servers", f"server {item!r} for a {group.type} group")
    if new and kind == "Ecs" and server_id not in world.instances:
        raise RpcError(
            "ResourceNotFound.BackendServer", f"ECS instance {server_id} is not found", 404
        )
    return ServerMember(
        server_id=server_id,
        server_type=kind,
        port=port or 0,
        server_ip=item.get("ServerIp", "") or _default_ip(world, kind, server_id),
        weight=100 if weight is None else weight,
        description=item.get("Description", ""),
    )


def _default_ip(world: World, kind: str, server_id: str) -> str:
    """An ``Ip`` server's is its id, an ``Ecs`` one's its instance's private address."""
    instance = world.instances.get(server_id)
    if kind == "Ecs" and instance is not None:
        return instance.private_ip
    return server_id if kind == "Ip" else ""


def _members(
    world: World, group: ServerGroup, params: Mapping[str, str], *, new: bool
) -> list[ServerMember]:
    items = objects(params, "Servers")
    if not items:
        raise RpcError("MissingParameter", "The input parameter 'Servers' that is mandatory")
    return [_member(world, group, item, new=new) for item in items]


def _index(group: ServerGroup, member: ServerMember) -> int:
    for index, have in enumerate(group.servers):
        same_server = (have.server_id, have.port) == (member.server_id, member.port)
        if same_server and member.server_ip in ("", have.server_ip):
            return index
    raise RpcError(
        "ResourceNotFound.BackendServer",
        f"{member.server_id}:{member.port} is not in {group.id}",
        404,
    )


def _servers_job(
    world: World, group: ServerGroup, action: str, changed: list[ServerMember], transient: str
) -> str:
    for m in changed:
        m.status = transient

    def settle(succeeded: bool) -> None:
        for m in changed:
            m.status = "Available"
        if not succeeded and action == "AddServersToServerGroup":
            group.servers = [m for m in group.servers if m not in changed]

    return start_job(world, action, group.id, settle).id


def add_servers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    have = {m.key for m in group.servers}
    added = [m for m in _members(world, group, params, new=True) if m.key not in have]
    group.servers += added
    return {
        "ServerGroupId": group.id,
        "JobId": _servers_job(world, group, "AddServersToServerGroup", added, "Adding"),
    }


def remove_servers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    for member in _members(world, group, params, new=False):
        del group.servers[_index(group, member)]
    return {
        "ServerGroupId": group.id,
        "JobId": start_job(world, "RemoveServersFromServerGroup", group.id).id,
    }


def update_servers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    changed = []
    for member in _members(world, group, params, new=False):
        index = _index(group, member)
        have = group.servers[index]
        have.weight, have.description = member.weight, member.description or have.description
        changed.append(have)
    action = "UpdateServerGroupServersAttribute"
    return {
        "ServerGroupId": group.id,
        "JobId": _servers_job(world, group, action, changed, "Configuring"),
    }


def _listed(group: ServerGroup, params: Mapping[str, str], wanted: dict[str, str]) -> bool:
    ids, names = strings(params, "ServerGroupIds"), strings(params, "ServerGroupNames")
    simple = {"ServerGroupType": group.type, "VpcId": group.vpc}
    return (
        (not ids or group.id in ids)
        and (not names or group.name in names)
        and all(params.get(k) in (None, "", v) for k, v in simple.items())
        and all(group.tags.get(k) == v for k, v in wanted.items())
    )


def list_groups(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    where, wanted = region(world, params), tags(params)
    found = [
        g
        for _, g in sorted(world.nlb.groups.items())
        if g.region == where and _listed(g, params, wanted)
    ]

    def shown(group: Any) -> dict[str, Any]:
        read_jobs(world, group.id)
        return render_group(world, group)

    return token_listing(params, found, "ServerGroups", shown)


def list_servers(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    group = _group(world, required(params, "ServerGroupId"))
    read_jobs(world, group.id)
    ids, ips = strings(params, "ServerIds"), strings(params, "ServerIps")
    rendered = [render_server(world, group, m) for m in group.servers]
    found = [
        s
        for s in rendered
        if (not ids or s["ServerId"] in ids) and (not ips or s["ServerIp"] in ips)
    ]
    return token_listing(params, found, "Servers")


register(
    {
        "CreateServerGroup": create_group,
        "UpdateServerGroupAttribute": update_group,
        "DeleteServerGroup": delete_group,
        "AddServersToServerGroup": add_servers,
        "RemoveServersFromServerGroup": remove_servers,
        "UpdateServerGroupServersAttribute": update_servers,
        "ListServerGroups": list_groups,
        "ListServerGroupServers": list_servers,
    }
)
