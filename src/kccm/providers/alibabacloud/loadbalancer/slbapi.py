"""The SLB (CLB, API 2014-05-15) calls the classic load balancer makes, as upstream's
``pkg/provider/alibaba/slb`` (v2.14.0: ``loadbalancer.go``, ``listener.go``, ``vgroup.go``)
sends them, over :class:`~kccm.providers.alibabacloud.rpc.RPCClient`.

Answers are read into plain records: :class:`Balancer` (``DescribeLoadBalancers`` /
``DescribeLoadBalancerAttribute``), listeners as flat ``{field: text}`` maps (the listener's
top-level fields and its protocol's ``*ListenerConfig``), :class:`VGroup` with its
:class:`Backend` list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Backend", "Balancer", "Rpc", "SlbApi", "VGroup"]

# Upstream's ``--server-group-batch-size`` default (pkg/config/controller_config.go).
BATCH = 40
_CONFIGS = {
    "tcp": "TCPListenerConfig",
    "udp": "UDPListenerConfig",
    "http": "HTTPListenerConfig",
    "https": "HTTPSListenerConfig",
}


class Rpc(Protocol):
    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]: ...


@dataclass
class Balancer:
    """One CLB instance as the describe calls show it."""

    id: str
    name: str = ""
    address: str = ""
    address_type: str = ""
    ip_version: str = ""
    network_type: str = ""
    vswitch_id: str = ""
    delete_protection: str = ""
    modification_protection: str = ""
    resource_group_id: str = ""
    spec: str = ""
    charge_type: str = ""
    bandwidth: int = 0
    tags: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> Balancer:
        tags = ((item.get("Tags") or {}).get("Tag")) or []
        return cls(
            id=str(item.get("LoadBalancerId") or ""),
            name=str(item.get("LoadBalancerName") or ""),
            address=str(item.get("Address") or ""),
            address_type=str(item.get("AddressType") or ""),
            ip_version=str(item.get("AddressIPVersion") or ""),
            network_type=str(item.get("NetworkType") or ""),
            vswitch_id=str(item.get("VSwitchId") or ""),
            delete_protection=str(item.get("DeleteProtection") or ""),
            modification_protection=str(item.get("ModificationProtectionStatus") or ""),
            resource_group_id=str(item.get("ResourceGroupId") or ""),
            spec=str(item.get("LoadBalancerSpec") or ""),
            charge_type=str(
                item.get("InternetChargeTypeAlias") or item.get("InternetChargeType") or ""
            ),
            bandwidth=int(item.get("Bandwidth") or 0),
            tags={str(t.get("TagKey")): str(t.get("TagValue") or "") for t in tags},
            raw={k: _text(v) for k, v in item.items() if not isinstance(v, (dict, list))},
        )


@dataclass(frozen=True)
class Backend:
    """One vServer group member (``BackendServers`` JSON item)."""

    server_id: str
    port: int
    weight: int
    type: str = "ecs"
    description: str = ""
    server_ip: str = ""

    def body(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "ServerId": self.server_id,
            "Port": self.port,
            "Weight": self.weight,
            "Type": self.type,
            "Description": self.description,
        }
        if self.server_ip:
            item["ServerIp"] = self.server_ip
        return item

    @property
    def key(self) -> tuple[str, str]:
        """Which member this is (``diff`` in upstream's ``vgroups.go``)."""
        return (self.server_id, self.server_ip if self.type == "eni" else "")

    def same(self, other: Backend, *, weight: bool = True) -> bool:
        """Nothing to set: same port, description and (unless ``weight`` is false) weight."""
        if weight and self.weight != other.weight:
            return False
        return (self.port, self.description) == (other.port, other.description)


@dataclass
class VGroup:
    id: str
    name: str
    backends: list[Backend] = field(default_factory=list)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def flat_listener(item: Mapping[str, Any]) -> dict[str, str]:
    """A ``DescribeLoadBalancerListeners`` item as ``{field: text}``: its top-level fields
    (``ListenerPort``, ``ListenerProtocol``, ``VServerGroupId``, ``Scheduler``, ...) and
    those of its protocol's config block."""
    flat = {k: _text(v) for k, v in item.items() if not isinstance(v, (dict, list))}
    config = item.get(_CONFIGS.get(str(item.get("ListenerProtocol")), "")) or {}
    flat.update({k: _text(v) for k, v in config.items() if not isinstance(v, (dict, list))})
    return flat


class SlbApi:
    """The CLB calls; ``rpc`` is the provider's client (or a test's stand-in)."""

    def __init__(self, rpc: Rpc) -> None:
        self.rpc = rpc

    def _call(self, action: str, **params: Any) -> dict[str, Any]:
        return self.rpc.call("slb", action, {k: v for k, v in params.items() if v is not None})

    # balancers
    def describe(self, lb_id: str) -> Balancer:
        return Balancer.of(self._call("DescribeLoadBalancerAttribute", LoadBalancerId=lb_id))

    def find(self, *, tag: tuple[str, str] | None = None, name: str = "") -> list[Balancer]:
        """``DescribeLoadBalancers`` by one tag (``findLoadBalancerByTag``) or by name."""
        params: dict[str, Any] = {}
        if tag is not None:
            params["Tags"] = json.dumps([{"TagKey": tag[0], "TagValue": tag[1]}])
        if name:
            params["LoadBalancerName"] = name
        answer = self._call("DescribeLoadBalancers", **params)
        items = (answer.get("LoadBalancers") or {}).get("LoadBalancer") or []
        return [Balancer.of(item) for item in items]

    def create(self, params: Mapping[str, Any]) -> tuple[str, str]:
        answer = self._call("CreateLoadBalancer", **params)
        return str(answer.get("LoadBalancerId") or ""), str(answer.get("Address") or "")

    def delete(self, lb_id: str) -> None:
        self._call("DeleteLoadBalancer", LoadBalancerId=lb_id)

    def set_delete_protection(self, lb_id: str, flag: str) -> None:
        self._call("SetLoadBalancerDeleteProtection", LoadBalancerId=lb_id, DeleteProtection=flag)

    def set_modification_protection(self, lb_id: str, status: str) -> None:
        """Without a reason: upstream adds one only for the flag ``on``, which no status is."""
        self._call(
            "SetLoadBalancerModificationProtection",
            LoadBalancerId=lb_id,
            ModificationProtectionStatus=status,
        )

    def set_name(self, lb_id: str, name: str) -> None:
        self._call("SetLoadBalancerName", LoadBalancerId=lb_id, LoadBalancerName=name)

    def modify_internet_spec(self, lb_id: str, charge: str, bandwidth: int) -> None:
        self._call(
            "ModifyLoadBalancerInternetSpec",
            LoadBalancerId=lb_id,
            InternetChargeType=charge,
            Bandwidth=bandwidth,
        )

    def modify_spec(self, lb_id: str, spec: str) -> None:
        self._call("ModifyLoadBalancerInstanceSpec", LoadBalancerId=lb_id, LoadBalancerSpec=spec)

    def modify_charge_type(self, lb_id: str, charge: str, spec: str) -> None:
        self._call(
            "ModifyLoadBalancerInstanceChargeType",
            LoadBalancerId=lb_id,
            InstanceChargeType=charge,
            LoadBalancerSpec=spec or None,
        )

    def list_tags(self, lb_id: str) -> dict[str, str]:
        answer = self._call("ListTagResources", **{"ResourceId.1": lb_id}, ResourceType="instance")
        items = (answer.get("TagResources") or {}).get("TagResource") or []
        return {str(t.get("TagKey")): str(t.get("TagValue") or "") for t in items}

    def tag(self, lb_id: str, tags: Mapping[str, str]) -> None:
        params: dict[str, Any] = {"ResourceId.1": lb_id, "ResourceType": "instance"}
        for i, (key, value) in enumerate(sorted(tags.items()), start=1):
            params[f"Tag.{i}.Key"] = key
            params[f"Tag.{i}.Value"] = value
        self._call("TagResources", **params)

    def untag(self, lb_id: str, keys: Sequence[str]) -> None:
        params: dict[str, Any] = {"ResourceId.1": lb_id, "ResourceType": "instance"}
        for i, key in enumerate(sorted(keys), start=1):
            params[f"TagKey.{i}"] = key
        self._call("UntagResources", **params)

    # listeners
    def listeners(self, lb_id: str) -> list[dict[str, str]]:
        """``DescribeLoadBalancerListeners`` (``MaxResults=50``, paged by ``NextToken``)."""
        found: list[dict[str, str]] = []
        token = None
        while True:
            answer = self._call(
                "DescribeLoadBalancerListeners",
                **{"LoadBalancerId.1": lb_id},
                MaxResults=50,
                NextToken=token,
            )
            found += [flat_listener(item) for item in answer.get("Listeners") or []]
            token = answer.get("NextToken") or None
            if token is None:
                return found

    def create_listener(self, lb_id: str, protocol: str, params: Mapping[str, str]) -> None:
        """The SDK's TCP and UDP create requests spell the interval ``healthCheckInterval``."""
        action = f"CreateLoadBalancer{protocol.upper()}Listener"
        sent = dict(params)
        if protocol in ("tcp", "udp") and "HealthCheckInterval" in sent:
            sent["healthCheckInterval"] = sent.pop("HealthCheckInterval")
        self._call(action, LoadBalancerId=lb_id, **sent)

    def set_listener(self, lb_id: str, protocol: str, params: Mapping[str, str]) -> None:
        action = f"SetLoadBalancer{protocol.upper()}ListenerAttribute"
        self._call(action, LoadBalancerId=lb_id, VServerGroup="on", **params)

    def _listener_call(self, action: str, lb_id: str, port: int, protocol: str) -> None:
        self._call(action, LoadBalancerId=lb_id, ListenerPort=port, ListenerProtocol=protocol)

    def start_listener(self, lb_id: str, port: int, protocol: str) -> None:
        self._listener_call("StartLoadBalancerListener", lb_id, port, protocol)

    def delete_listener(self, lb_id: str, port: int, protocol: str) -> None:
        self._listener_call("DeleteLoadBalancerListener", lb_id, port, protocol)

    def eips(self, lb_id: str) -> list[str]:
        """The EIPs bound to the balancer: VPC ``DescribeEipAddresses`` by
        ``AssociatedInstanceType=SlbInstance``, pages of 10
        (``pkg/provider/alibaba/vpc``, ``DescribeEipAddresses``)."""
        found: list[str] = []
        page = 1
        while True:
            answer = self.rpc.call(
                "vpc",
                "DescribeEipAddresses",
                {
                    "AssociatedInstanceType": "SlbInstance",
                    "AssociatedInstanceId": lb_id,
                    "PageSize": 10,
                    "PageNumber": page,
                },
            )
            items = (answer.get("EipAddresses") or {}).get("EipAddress") or []
            found += [str(i.get("IpAddress")) for i in items if i.get("IpAddress")]
            total = int(answer.get("TotalCount") or 0)
            if not items or page * 10 >= total:
                return found
            page += 1

    # HTTPS domain extensions (pkg/provider/alibaba/slb/cert.go)
    def domain_extensions(self, lb_id: str, port: int) -> dict[str, tuple[str, str]]:
        """``{domain: (extension ID, certificate ID)}`` of an HTTPS listener."""
        answer = self._call("DescribeDomainExtensions", LoadBalancerId=lb_id, ListenerPort=port)
        items = (answer.get("DomainExtensions") or {}).get("DomainExtension") or []
        return {
            str(i.get("Domain")): (
                str(i.get("DomainExtensionId") or ""),
                str(i.get("ServerCertificateId") or ""),
            )
            for i in items
        }

    def create_domain_extension(self, lb_id: str, port: int, domain: str, cert: str) -> None:
        self._call(
            "CreateDomainExtension",
            LoadBalancerId=lb_id,
            ListenerPort=port,
            Domain=domain,
            ServerCertificateId=cert,
        )

    def set_domain_extension(self, extension_id: str, cert: str) -> None:
        self._call(
            "SetDomainExtensionAttribute", DomainExtensionId=extension_id, ServerCertificateId=cert
        )

    def delete_domain_extension(self, extension_id: str) -> None:
        self._call("DeleteDomainExtension", DomainExtensionId=extension_id)

    # vServer groups
    def vgroups(self, lb_id: str) -> list[VGroup]:
        answer = self._call("DescribeVServerGroups", LoadBalancerId=lb_id)
        items = (answer.get("VServerGroups") or {}).get("VServerGroup") or []
        return [VGroup(str(i.get("VServerGroupId")), str(i.get("VServerGroupName"))) for i in items]

    def vgroup_backends(self, vgroup_id: str) -> list[Backend]:
        answer = self._call("DescribeVServerGroupAttribute", VServerGroupId=vgroup_id)
        items = (answer.get("BackendServers") or {}).get("BackendServer") or []
        return [
            Backend(
                server_id=str(b.get("ServerId") or ""),
                port=int(b.get("Port") or 0),
                weight=int(b.get("Weight") or 0),
                type=str(b.get("Type") or "ecs"),
                description=str(b.get("Description") or ""),
                server_ip=str(b.get("ServerIp") or ""),
            )
            for b in items
        ]

    def create_vgroup(self, lb_id: str, name: str) -> str:
        answer = self._call("CreateVServerGroup", LoadBalancerId=lb_id, VServerGroupName=name)
        return str(answer.get("VServerGroupId") or "")

    def delete_vgroup(self, vgroup_id: str) -> None:
        self._call("DeleteVServerGroup", VServerGroupId=vgroup_id)

    def _batched(self, action: str, vgroup_id: str, backends: Sequence[Backend]) -> None:
        for start in range(0, len(backends), BATCH):
            body = json.dumps([b.body() for b in backends[start : start + BATCH]])
            self._call(action, VServerGroupId=vgroup_id, BackendServers=body)

    def add_backends(self, vgroup_id: str, backends: Sequence[Backend]) -> None:
        self._batched("AddVServerGroupBackendServers", vgroup_id, backends)

    def remove_backends(self, vgroup_id: str, backends: Sequence[Backend]) -> None:
        self._batched("RemoveVServerGroupBackendServers", vgroup_id, backends)

    def update_backends(self, vgroup_id: str, backends: Sequence[Backend]) -> None:
        self._batched("SetVServerGroupAttribute", vgroup_id, backends)
