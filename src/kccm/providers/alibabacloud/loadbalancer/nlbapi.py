"""The NLB (API 2022-04-30) calls the network load balancer makes, as upstream's
``pkg/provider/alibaba/nlb`` (v2.14.0: ``loadbalancer.go``, ``listener.go``,
``servergroup.go``) sends them, over the provider's RPC client.

Parameters are flattened as the Alibaba Cloud SDKs flatten them (``Tag.1.Key``,
``ZoneMappings.1.VSwitchId``, ``HealthCheckConfig.HealthCheckEnabled``, booleans ``true`` /
``false``). Answers are read into plain records: :class:`Nlb` (``GetLoadBalancerAttribute``,
``ListLoadBalancers``), :class:`NlbListener`, :class:`ServerGroup` with its :class:`Server`
list.

The writes are asynchronous: each answers a ``JobId`` that :meth:`NlbApi.wait_job` polls with
``GetJobStatus`` (upstream's ``WaitJobFinish``: a first poll at once, then one every 3 s, 1.2 s
for server changes, 20 s for a deletion); a found balancer still ``Provisioning`` is read
again every 20 s (``waitNLBActive``). Waiting sleeps on the provider's clock seam
(:class:`Waiter`), so tests run on fake time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.providers.alibabacloud.errors import AlibabaError
from kccm.providers.alibabacloud.loadbalancer.slbapi import Rpc

__all__ = [
    "JOB_INTERVAL",
    "Nlb",
    "NlbApi",
    "NlbListener",
    "Server",
    "ServerGroup",
    "Waiter",
    "ZoneMapping",
    "flatten",
]

PRODUCT = "nlb"
JOB_INTERVAL, JOB_TIMEOUT = 3.0, 30.0  # nlb.DefaultRetryInterval, DefaultRetryTimeout
SERVERS_INTERVAL = 1.2  # Add/Remove/UpdateServers and CreateServerGroup
DELETE_INTERVAL, DELETE_TIMEOUT = 20.0, 180.0  # DeleteNLB
ACTIVE_INTERVAL, ACTIVE_TIMEOUT = 20.0, 120.0  # waitNLBActive
PAGE = 100


def _flag(value: bool) -> str:
    return "true" if value else "false"


def flatten(prefix: str, value: Any) -> dict[str, str]:
    """``value`` as the SDKs' form parameters: lists 1-based (``Name.1``), objects dotted
    (``Name.Key``), booleans ``true``/``false``, ``None`` left out."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {prefix: _flag(value)}
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(flatten(f"{prefix}.{key}" if prefix else str(key), item))
        return out
    if isinstance(value, (list, tuple)):
        out = {}
        for i, item in enumerate(value, 1):
            out.update(flatten(f"{prefix}.{i}", item))
        return out
    return {prefix: str(value)}


def _bool(value: Any) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    return str(value).lower() == "true"


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _texts(value: Any) -> list[str]:
    return [str(v) for v in value or []]


@dataclass(frozen=True)
class ZoneMapping:
    """``zone:vswitch[:ipv4[:allocation]]`` (``parseZoneMappings``)."""

    zone_id: str
    vswitch_id: str
    ipv4: str = ""
    allocation_id: str = ""

    def body(self) -> dict[str, str]:
        item = {"VSwitchId": self.vswitch_id, "ZoneId": self.zone_id}
        if self.allocation_id:
            item["AllocationId"] = self.allocation_id
        if self.ipv4:
            item["PrivateIPv4Address"] = self.ipv4
        return item


@dataclass
class Nlb:
    """One NLB instance as ``GetLoadBalancerAttribute`` / ``ListLoadBalancers`` show it."""

    id: str
    name: str = ""
    status: str = ""
    address_type: str = ""
    ip_version: str = ""
    ipv6_address_type: str = ""
    vpc_id: str = ""
    dns_name: str = ""
    resource_group_id: str = ""
    security_group_ids: list[str] = field(default_factory=list)
    cross_zone: bool | None = None
    delete_protection: bool = False
    modification_protection: str = ""
    zones: list[ZoneMapping] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> Nlb:
        tags = {
            str(t.get("TagKey") or t.get("Key")): str(t.get("TagValue") or t.get("Value") or "")
            for t in item.get("Tags") or []
        }
        return cls(
            id=str(item.get("LoadBalancerId") or ""),
            name=str(item.get("LoadBalancerName") or ""),
            status=str(item.get("LoadBalancerStatus") or ""),
            address_type=str(item.get("AddressType") or ""),
            ip_version=str(item.get("AddressIpVersion") or ""),
            ipv6_address_type=str(item.get("Ipv6AddressType") or ""),
            vpc_id=str(item.get("VpcId") or ""),
            dns_name=str(item.get("DNSName") or ""),
            resource_group_id=str(item.get("ResourceGroupId") or ""),
            security_group_ids=_texts(item.get("SecurityGroupIds")),
            cross_zone=_bool(item.get("CrossZoneEnabled")),
            delete_protection=bool(
                _bool((item.get("DeletionProtectionConfig") or {}).get("Enabled"))
            ),
            modification_protection=str(
                (item.get("ModificationProtectionConfig") or {}).get("Status") or ""
            ),
            zones=[_zone(z) for z in item.get("ZoneMappings") or []],
            tags=tags,
        )


def _zone(item: Mapping[str, Any]) -> ZoneMapping:
    addresses = item.get("LoadBalancerAddresses") or [{}]
    first = addresses[0] if addresses else {}
    return ZoneMapping(
        zone_id=str(item.get("ZoneId") or ""),
        vswitch_id=str(item.get("VSwitchId") or ""),
        ipv4=str(first.get("PrivateIPv4Address") or ""),
        allocation_id=str(first.get("AllocationId") or ""),
    )


@dataclass
class NlbListener:
    """One listener (``ListListeners``); ``fields`` holds what the update compares."""

    id: str
    protocol: str
    port: int
    description: str = ""
    server_group_id: str = ""
    status: str = ""
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> NlbListener:
        keys: tuple[str, ...] = ("IdleTimeout", "Cps", "ProxyProtocolEnabled", "CaEnabled")
        keys += ("SecurityPolicyId", "CertificateIds", "CaCertificateIds", "AlpnEnabled")
        keys += ("AlpnPolicy",)
        return cls(
            id=str(item.get("ListenerId") or ""),
            protocol=str(item.get("ListenerProtocol") or ""),
            port=_int(item.get("ListenerPort")),
            description=str(item.get("ListenerDescription") or ""),
            server_group_id=str(item.get("ServerGroupId") or ""),
            status=str(item.get("ListenerStatus") or ""),
            fields={k: item.get(k) for k in keys if item.get(k) is not None},
        )


@dataclass(frozen=True)
class Server:
    """One server group member (``ListServerGroupServers``)."""

    server_id: str
    server_type: str
    port: int
    weight: int
    description: str = ""
    server_ip: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """Which member this is (``isServerEqual``: type, ID and, but for ECS, IP)."""
        ip = "" if self.server_type == "Ecs" else self.server_ip
        return (self.server_type, self.server_id, ip)

    def body(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "ServerId": self.server_id,
            "ServerType": self.server_type,
            "Port": self.port,
            "Weight": self.weight,
            "Description": self.description,
        }
        if self.server_ip:
            item["ServerIp"] = self.server_ip
        return item


@dataclass
class ServerGroup:
    """One server group (``ListServerGroups``) and its servers."""

    id: str
    name: str
    type: str = ""
    protocol: str = ""
    server_count: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    health: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    servers: list[Server] = field(default_factory=list)

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> ServerGroup:
        keys: tuple[str, ...] = ("Scheduler", "ConnectionDrainEnabled", "ConnectionDrainTimeout")
        keys += ("PreserveClientIpEnabled", "ResourceGroupId")
        return cls(
            id=str(item.get("ServerGroupId") or ""),
            name=str(item.get("ServerGroupName") or ""),
            type=str(item.get("ServerGroupType") or ""),
            protocol=str(item.get("Protocol") or ""),
            server_count=_int(item.get("ServerCount")),
            fields={k: item.get(k) for k in keys if item.get(k) is not None},
            health=dict(item.get("HealthCheck") or {}),
            tags={str(t.get("Key")): str(t.get("Value") or "") for t in item.get("Tags") or []},
        )


class Waiter:
    """Polling time on the provider's clock seam: ``monotonic`` and a blocking ``sleep``
    (a clock's ``sleep_blocking`` when it has one, as the tests' step clock does)."""

    def __init__(self, clock: object | None = None) -> None:
        custom = getattr(clock, "sleep_blocking", None)
        self.sleep: Callable[[float], None] = custom if callable(custom) else time.sleep
        mono = getattr(clock, "monotonic", None)
        self.monotonic: Callable[[], float] = mono if callable(mono) else time.monotonic


class NlbApi:
    """The NLB calls; ``rpc`` is the provider's client (or a test's stand-in)."""

    def __init__(self, rpc: Rpc, waiter: Waiter | None = None) -> None:
        self.rpc = rpc
        self.waiter = waiter or Waiter()

    def _call(self, action: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        flat: dict[str, str] = {}
        for key, value in (params or {}).items():
            flat.update(flatten(key, value))
        return self.rpc.call(PRODUCT, action, flat)

    def _pages(self, action: str, params: Mapping[str, Any], items: str) -> Iterator[Any]:
        token = ""
        while True:
            page = self._call(action, {**params, "MaxResults": PAGE, "NextToken": token or None})
            yield from page.get(items) or []
            token = str(page.get("NextToken") or "")
            if not token:
                return

    # jobs
    def wait_job(
        self, action: str, job_id: str, interval: float = JOB_INTERVAL, timeout: float = JOB_TIMEOUT
    ) -> None:
        """``WaitJobFinish``: ``GetJobStatus`` until ``Succeeded``; ``Failed`` or the timeout
        is an error naming the action."""
        if not job_id:
            return
        deadline = self.waiter.monotonic() + timeout
        while True:
            status = str(self._call("GetJobStatus", {"JobId": job_id}).get("Status") or "")
            if status == "Succeeded":
                return
            if status == "Failed":
                raise AlibabaError(f"nlb:{action}: job {job_id} failed")
            if self.waiter.monotonic() + interval > deadline:
                raise AlibabaError(f"nlb:{action}: job {job_id} still {status or 'unknown'}")
            self.waiter.sleep(interval)

    def _job(self, action: str, params: Mapping[str, Any], interval: float = JOB_INTERVAL) -> None:
        answer = self._call(action, params)
        self.wait_job(action, str(answer.get("JobId") or ""), interval)

    # balancers
    def get(self, lb_id: str) -> Nlb:
        """``waitNLBActive``: the balancer, read again while it is ``Provisioning``."""
        deadline = self.waiter.monotonic() + ACTIVE_TIMEOUT
        while True:
            found = Nlb.of(self._call("GetLoadBalancerAttribute", {"LoadBalancerId": lb_id}))
            if found.status != "Provisioning":
                return found
            if self.waiter.monotonic() + ACTIVE_INTERVAL > deadline:
                raise AlibabaError(f"nlb {lb_id} is in creating status")
            self.waiter.sleep(ACTIVE_INTERVAL)

    def find(self, *, tag: tuple[str, str] | None = None, name: str = "") -> list[Nlb]:
        """``ListLoadBalancers`` by one tag (``findNLBByTag``) or by name."""
        params: dict[str, Any] = {}
        if tag is not None:
            params["Tag"] = [{"Key": tag[0], "Value": tag[1]}]
        if name:
            params["LoadBalancerNames"] = [name]
        return [Nlb.of(item) for item in self._pages("ListLoadBalancers", params, "LoadBalancers")]

    def create(self, params: Mapping[str, Any]) -> str:
        return str(self._call("CreateLoadBalancer", params).get("LoadbalancerId") or "")

    def delete(self, lb_id: str) -> None:
        self._call("DeleteLoadBalancer", {"LoadBalancerId": lb_id})

    def wait_deleted(self, job_id: str) -> None:
        self.wait_job("DeleteLoadBalancer", job_id, DELETE_INTERVAL, DELETE_TIMEOUT)

    def delete_and_wait(self, lb_id: str) -> None:
        answer = self._call("DeleteLoadBalancer", {"LoadBalancerId": lb_id})
        self.wait_deleted(str(answer.get("JobId") or ""))

    def update_attribute(self, lb_id: str, name: str = "", cross_zone: bool | None = None) -> None:
        params: dict[str, Any] = {"LoadBalancerId": lb_id, "CrossZoneEnabled": cross_zone}
        if name:
            params["LoadBalancerName"] = name
        self._job("UpdateLoadBalancerAttribute", params)

    def update_address_type(self, lb_id: str, address_type: str) -> None:
        self._job(
            "UpdateLoadBalancerAddressTypeConfig",
            {"LoadBalancerId": lb_id, "AddressType": address_type},
        )

    def update_zones(self, lb_id: str, zones: Sequence[ZoneMapping]) -> None:
        self._job(
            "UpdateLoadBalancerZones",
            {"LoadBalancerId": lb_id, "ZoneMappings": [z.body() for z in zones]},
        )

    def set_protection(
        self, lb_id: str, *, deletion: bool | None = None, modification: str = ""
    ) -> None:
        """``UpdateLoadBalancerProtection``: deletion protection on or off, and/or the
        modification protection status (``ConsoleProtection`` with upstream's reason)."""
        params: dict[str, Any] = {"LoadBalancerId": lb_id, "DeletionProtectionEnabled": deletion}
        if modification:
            params["ModificationProtectionStatus"] = modification
            if modification == "ConsoleProtection":
                params["ModificationProtectionReason"] = "managed.by.ack"
        self._call("UpdateLoadBalancerProtection", params)

    def join_security_groups(self, lb_id: str, ids: Sequence[str]) -> None:
        self._job(
            "LoadBalancerJoinSecurityGroup", {"LoadBalancerId": lb_id, "SecurityGroupIds": ids}
        )

    def leave_security_groups(self, lb_id: str, ids: Sequence[str]) -> None:
        self._job(
            "LoadBalancerLeaveSecurityGroup", {"LoadBalancerId": lb_id, "SecurityGroupIds": ids}
        )

    # tags
    def list_tags(self, resource_id: str, kind: str = "loadbalancer") -> dict[str, str]:
        answer = self._call("ListTagResources", {"ResourceType": kind, "ResourceId": [resource_id]})
        return {
            str(t.get("TagKey")): str(t.get("TagValue") or "")
            for t in answer.get("TagResources") or []
            if str(t.get("ResourceId") or resource_id) == resource_id
        }

    def tag(self, resource_id: str, tags: Mapping[str, str], kind: str = "loadbalancer") -> None:
        self._call(
            "TagResources",
            {
                "ResourceType": kind,
                "ResourceId": [resource_id],
                "Tag": [{"Key": k, "Value": v} for k, v in tags.items()],
            },
        )

    def untag(self, resource_id: str, keys: Sequence[str], kind: str = "loadbalancer") -> None:
        self._call(
            "UntagResources", {"ResourceType": kind, "ResourceId": [resource_id], "TagKey": keys}
        )

    # listeners
    def listeners(self, lb_id: str) -> list[NlbListener]:
        items = self._pages("ListListeners", {"LoadBalancerIds": [lb_id]}, "Listeners")
        return [NlbListener.of(item) for item in items]

    def create_listener(self, params: Mapping[str, Any]) -> str:
        answer = self._call("CreateListener", params)
        self.wait_job("CreateListener", str(answer.get("JobId") or ""))
        return str(answer.get("ListenerId") or "")

    def update_listener(self, params: Mapping[str, Any]) -> None:
        self._job("UpdateListenerAttribute", params)

    def delete_listener(self, listener_id: str) -> None:
        self._job("DeleteListener", {"ListenerId": listener_id})

    def start_listener(self, listener_id: str) -> None:
        self._call("StartListener", {"ListenerId": listener_id})

    # server groups
    def server_groups(self, tags: Mapping[str, str]) -> list[ServerGroup]:
        """``ListNLBServerGroups``: the groups carrying every tag, with their servers."""
        params = {"Tag": [{"Key": k, "Value": v} for k, v in tags.items()]}
        groups = [
            ServerGroup.of(i) for i in self._pages("ListServerGroups", params, "ServerGroups")
        ]
        for group in groups:
            if group.server_count:
                group.servers = self.servers(group.id)
        return groups

    def servers(self, group_id: str) -> list[Server]:
        items = self._pages("ListServerGroupServers", {"ServerGroupId": group_id}, "Servers")
        return [
            Server(
                server_id=str(s.get("ServerId") or ""),
                server_type=str(s.get("ServerType") or ""),
                port=_int(s.get("Port")),
                weight=_int(s.get("Weight")),
                description=str(s.get("Description") or ""),
                server_ip=str(s.get("ServerIp") or ""),
            )
            for s in items
        ]

    def create_server_group(self, params: Mapping[str, Any]) -> str:
        answer = self._call("CreateServerGroup", params)
        self.wait_job("CreateServerGroup", str(answer.get("JobId") or ""), SERVERS_INTERVAL)
        return str(answer.get("ServerGroupId") or "")

    def update_server_group(self, params: Mapping[str, Any]) -> None:
        """Not waited for, as upstream's ``UpdateNLBServerGroup``."""
        self._call("UpdateServerGroupAttribute", params)

    def delete_server_group(self, group_id: str) -> None:
        """Not waited for, as upstream's ``DeleteNLBServerGroup``."""
        self._call("DeleteServerGroup", {"ServerGroupId": group_id})

    def add_servers(self, group_id: str, servers: Sequence[Server]) -> None:
        self._servers("AddServersToServerGroup", group_id, servers)

    def remove_servers(self, group_id: str, servers: Sequence[Server]) -> None:
        self._servers("RemoveServersFromServerGroup", group_id, servers)

    def update_servers(self, group_id: str, servers: Sequence[Server]) -> None:
        self._servers("UpdateServerGroupServersAttribute", group_id, servers)

    def _servers(self, action: str, group_id: str, servers: Sequence[Server]) -> None:
        """In batches of 40 (upstream's ``--server-group-batch-size``), each waited for."""
        for start in range(0, len(servers), 40):
            chunk = [s.body() for s in servers[start : start + 40]]
            self._job(action, {"ServerGroupId": group_id, "Servers": chunk}, SERVERS_INTERVAL)
