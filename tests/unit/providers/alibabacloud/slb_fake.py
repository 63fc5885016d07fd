"""A small in-memory SLB (CLB) at the RPC seam: answers the calls
:mod:`kccm.providers.alibabacloud.loadbalancer.slbapi` makes, keeps their state and records
each call (action and parameters), like :class:`ali_stub.StubRPC`."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider.apicalls import CloudAPICalls, classify_by_verb
from kccm.providers.alibabacloud.errors import AlibabaError

_TOP = {
    "ListenerPort",
    "ListenerProtocol",
    "Status",
    "VServerGroupId",
    "Scheduler",
    "Bandwidth",
    "Description",
    "AclId",
    "AclStatus",
    "AclType",
}


def _member_key(item: Mapping[str, Any]) -> str:
    """``i-1`` for an ECS member, ``eni-1/10.0.0.5`` for an ENI one."""
    ip = item.get("ServerIp") if item.get("Type") == "eni" else None
    return f"{item['ServerId']}/{ip}" if ip else str(item["ServerId"])


class FakeSlb:
    def __init__(self) -> None:
        self.balancers: dict[str, dict[str, Any]] = {}
        self.listeners: dict[str, dict[tuple[int, str], dict[str, Any]]] = {}
        self.vgroups: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.health: dict[str, str] = {}
        self.eips: dict[str, list[str]] = {}
        self.domains: dict[str, tuple[str, int, str, str]] = {}
        self.enis: dict[str, str] = {}
        self.ledger = CloudAPICalls()
        self.region = "cn-hangzhou"
        self._ids = itertools.count(1)

    # the seam
    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        if product == "vpc":
            return self._vpc(action, dict(params))
        if product == "ecs":
            return self._ecs(action, dict(params))
        assert product == "slb"
        self.calls.append((action, dict(params)))
        self.ledger.record(f"slb:{action}", mutating=classify_by_verb(action))
        handler = getattr(self, f"_{action}", None)
        if handler is None:
            listener = self._listener_action(action)
            if listener is None:
                raise AssertionError(f"FakeSlb: no {action}")
            return listener(dict(params))
        result: dict[str, Any] = handler(dict(params))
        return result

    def _vpc(self, action: str, p: dict[str, Any]) -> dict[str, Any]:
        """The EIPs bound to balancers (``eips``: ``{lb: [ip, ...]}``), 10 a page."""
        assert action == "DescribeEipAddresses"
        self.calls.append((action, p))
        self.ledger.record(f"vpc:{action}", mutating=False)
        ips = self.eips.get(p["AssociatedInstanceId"], [])
        page = int(p["PageNumber"])
        items = [{"IpAddress": ip} for ip in ips[(page - 1) * 10 : page * 10]]
        return {"EipAddresses": {"EipAddress": items}, "TotalCount": len(ips)}

    def _ecs(self, action: str, p: dict[str, Any]) -> dict[str, Any]:
        """ENIs by private IP (``enis``: ``{ip: ENI id}``), one page."""
        assert action == "DescribeNetworkInterfaces"
        assert p["Status"] == "InUse"
        self.calls.append((action, p))
        self.ledger.record(f"ecs:{action}", mutating=False)
        asked = [v for k, v in p.items() if k.startswith("PrivateIpAddress.")]
        found: dict[str, list[str]] = {}
        for ip in asked:
            if ip in self.enis:
                found.setdefault(self.enis[ip], []).append(ip)
        items = [
            {
                "NetworkInterfaceId": eni,
                "PrivateIpSets": {"PrivateIpSet": [{"PrivateIpAddress": ip} for ip in ips]},
            }
            for eni, ips in found.items()
        ]
        return {"NetworkInterfaceSets": {"NetworkInterfaceSet": items}}

    def mutating(self) -> list[str]:
        return [a for a, _ in self.calls if classify_by_verb(a)]

    def actions(self) -> list[str]:
        return [a for a, _ in self.calls]

    def _new(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):04d}"

    def _lb(self, params: Mapping[str, Any]) -> dict[str, Any]:
        lb_id = params.get("LoadBalancerId") or params.get("ResourceId.1")
        if lb_id not in self.balancers:
            raise AlibabaError("no such lb", status=400, code="InvalidLoadBalancerId.NotFound")
        return self.balancers[str(lb_id)]

    # balancers
    def add_balancer(self, **fields: Any) -> str:
        lb_id = str(fields.pop("LoadBalancerId", None) or self._new("lb"))
        self.balancers[lb_id] = {
            "LoadBalancerId": lb_id,
            "LoadBalancerName": fields.pop("LoadBalancerName", lb_id),
            "Address": fields.pop("Address", f"47.0.0.{len(self.balancers) + 1}"),
            "AddressType": fields.pop("AddressType", "internet"),
            "NetworkType": "vpc",
            "DeleteProtection": fields.pop("DeleteProtection", "off"),
            "ModificationProtectionStatus": fields.pop("ModificationProtectionStatus", ""),
            "InternetChargeType": "paybytraffic",
            "Bandwidth": 5120,
            "tags": fields.pop("tags", {}),
            **fields,
        }
        self.listeners[lb_id] = {}
        return lb_id

    def _view(self, lb: Mapping[str, Any]) -> dict[str, Any]:
        view = {k: v for k, v in lb.items() if k != "tags"}
        tags = [{"TagKey": k, "TagValue": v} for k, v in lb["tags"].items()]
        return {**view, "Tags": {"Tag": tags}}

    def _DescribeLoadBalancers(self, p: dict[str, Any]) -> dict[str, Any]:
        found = list(self.balancers.values())
        if "Tags" in p:
            wanted = json.loads(p["Tags"])
            found = [
                b for b in found if any(b["tags"].get(t["TagKey"]) == t["TagValue"] for t in wanted)
            ]
        if "LoadBalancerName" in p:
            found = [b for b in found if b["LoadBalancerName"] == p["LoadBalancerName"]]
        return {"LoadBalancers": {"LoadBalancer": [self._view(b) for b in found]}}

    def _DescribeLoadBalancerAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._view(self._lb(p))

    def _CreateLoadBalancer(self, p: dict[str, Any]) -> dict[str, Any]:
        tags = {}
        for i in itertools.count(1):
            if f"Tag.{i}.Key" not in p:
                break
            tags[p.pop(f"Tag.{i}.Key")] = p.pop(f"Tag.{i}.Value")
        for key in ("ClientToken", "ModificationProtectionReason"):
            p.pop(key, None)
        lb_id = self.add_balancer(tags=tags, **p)
        return {"LoadBalancerId": lb_id, "Address": self.balancers[lb_id]["Address"]}

    def _DeleteLoadBalancer(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p)
        if lb["DeleteProtection"] == "on":
            raise AlibabaError("protected", status=400, code="OperationDenied.DeleteProtection")
        del self.balancers[lb["LoadBalancerId"]]
        self.listeners.pop(lb["LoadBalancerId"])
        for vg_id in [k for k, v in self.vgroups.items() if v["lb"] == lb["LoadBalancerId"]]:
            del self.vgroups[vg_id]
        return {}

    def _set(self, p: dict[str, Any], field: str) -> dict[str, Any]:
        self._lb(p)[field] = p[field]
        return {}

    def _SetLoadBalancerDeleteProtection(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._set(p, "DeleteProtection")

    def _SetLoadBalancerModificationProtection(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._set(p, "ModificationProtectionStatus")

    def _SetLoadBalancerName(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._set(p, "LoadBalancerName")

    def _ModifyLoadBalancerInstanceSpec(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._set(p, "LoadBalancerSpec")

    def _ModifyLoadBalancerInstanceChargeType(self, p: dict[str, Any]) -> dict[str, Any]:
        if "LoadBalancerSpec" in p:
            self._set(p, "LoadBalancerSpec")
        return self._set(p, "InstanceChargeType")

    def _ModifyLoadBalancerInternetSpec(self, p: dict[str, Any]) -> dict[str, Any]:
        self._set(p, "InternetChargeType")
        return self._set(p, "Bandwidth")

    def _ListTagResources(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p)
        items = [{"TagKey": k, "TagValue": v} for k, v in lb["tags"].items()]
        return {"TagResources": {"TagResource": items}}

    def _TagResources(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p)
        for i in itertools.count(1):
            if f"Tag.{i}.Key" not in p:
                return {}
            lb["tags"][p[f"Tag.{i}.Key"]] = p[f"Tag.{i}.Value"]
        return {}

    def _UntagResources(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p)
        for i in itertools.count(1):
            if f"TagKey.{i}" not in p:
                return {}
            lb["tags"].pop(p[f"TagKey.{i}"], None)
        return {}

    # listeners
    def _DescribeLoadBalancerListeners(self, p: dict[str, Any]) -> dict[str, Any]:
        lb_id = p["LoadBalancerId.1"]
        items = []
        for (_, protocol), fields in sorted(self.listeners.get(lb_id, {}).items()):
            top = {k: v for k, v in fields.items() if k in _TOP}
            config = {k: v for k, v in fields.items() if k not in _TOP}
            items.append({**top, f"{protocol.upper()}ListenerConfig": config})
        return {"Listeners": items}

    def _listener_action(self, action: str) -> Any:
        for protocol in ("tcp", "udp", "https", "http"):
            if action == f"CreateLoadBalancer{protocol.upper()}Listener":
                return functools.partial(self._create_listener, protocol=protocol)
            if action == f"SetLoadBalancer{protocol.upper()}ListenerAttribute":
                return functools.partial(self._set_listener, protocol=protocol)
        return None

    def _create_listener(self, p: dict[str, Any], protocol: str) -> dict[str, Any]:
        lb_id = p.pop("LoadBalancerId")
        port = int(p["ListenerPort"])
        if any(k[0] == port for k in self.listeners[lb_id]):
            raise AlibabaError("port used", status=400, code="ListenerAlreadyExists")
        fields = {k: str(v) for k, v in p.items()}
        if "healthCheckInterval" in fields:  # the TCP/UDP create spelling; read back as usual
            fields["HealthCheckInterval"] = fields.pop("healthCheckInterval")
        self.listeners[lb_id][(port, protocol)] = {
            **fields,
            "ListenerPort": port,
            "ListenerProtocol": protocol,
            "Status": "stopped",
        }
        return {}

    def _set_listener(self, p: dict[str, Any], protocol: str) -> dict[str, Any]:
        lb_id = p.pop("LoadBalancerId")
        p.pop("VServerGroup", None)
        item = self.listeners[lb_id][(int(p["ListenerPort"]), protocol)]
        item.update({k: str(v) for k, v in p.items() if k != "ListenerPort"})
        return {}

    def _StartLoadBalancerListener(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (int(p["ListenerPort"]), p["ListenerProtocol"])
        self.listeners[p["LoadBalancerId"]][key]["Status"] = "running"
        return {}

    def _DeleteLoadBalancerListener(self, p: dict[str, Any]) -> dict[str, Any]:
        del self.listeners[p["LoadBalancerId"]][(int(p["ListenerPort"]), p["ListenerProtocol"])]
        return {}

    def _DescribeHealthStatus(self, p: dict[str, Any]) -> dict[str, Any]:
        items = []
        for (port, _), fields in self.listeners[self._lb(p)["LoadBalancerId"]].items():
            group = self.vgroups.get(str(fields.get("VServerGroupId")), {"backends": {}})
            for member in group["backends"].values():
                status = self.health.get(member["ServerId"], "normal")
                items.append({**member, "ListenerPort": port, "ServerHealthStatus": status})
        return {"BackendServers": {"BackendServer": items}}

    # domain extensions: {id: (lb, port, domain, cert)}
    def _DescribeDomainExtensions(self, p: dict[str, Any]) -> dict[str, Any]:
        items = [
            {"DomainExtensionId": k, "Domain": d, "ServerCertificateId": c}
            for k, (lb, port, d, c) in self.domains.items()
            if lb == p["LoadBalancerId"] and port == int(p["ListenerPort"])
        ]
        return {"DomainExtensions": {"DomainExtension": items}}

    def _CreateDomainExtension(self, p: dict[str, Any]) -> dict[str, Any]:
        key = (p["LoadBalancerId"], int(p["ListenerPort"]), p["Domain"], p["ServerCertificateId"])
        self.domains[self._new("de")] = key
        return {}

    def _SetDomainExtensionAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        lb, port, domain, _ = self.domains[p["DomainExtensionId"]]
        self.domains[p["DomainExtensionId"]] = (lb, port, domain, p["ServerCertificateId"])
        return {}

    def _DeleteDomainExtension(self, p: dict[str, Any]) -> dict[str, Any]:
        del self.domains[p["DomainExtensionId"]]
        return {}

    # vServer groups
    def _DescribeVServerGroups(self, p: dict[str, Any]) -> dict[str, Any]:
        items = [
            {"VServerGroupId": k, "VServerGroupName": v["name"]}
            for k, v in self.vgroups.items()
            if v["lb"] == p["LoadBalancerId"]
        ]
        return {"VServerGroups": {"VServerGroup": items}}

    def _DescribeVServerGroupAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.vgroups[p["VServerGroupId"]]
        return {"BackendServers": {"BackendServer": list(group["backends"].values())}}

    def _CreateVServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        self._lb(p)
        vg_id = self._new("rsp")
        self.vgroups[vg_id] = {
            "lb": p["LoadBalancerId"],
            "name": p["VServerGroupName"],
            "backends": {},
        }
        return {"VServerGroupId": vg_id}

    def _DeleteVServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        vg_id = p["VServerGroupId"]
        used = self.listeners.get(self.vgroups[vg_id]["lb"], {}).values()
        if any(item.get("VServerGroupId") == vg_id for item in used):
            raise AlibabaError("in use", status=400, code="RspoolVipExist")
        del self.vgroups[vg_id]
        return {}

    def _members(self, p: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.vgroups[p["VServerGroupId"]]["backends"], json.loads(p["BackendServers"])

    def _AddVServerGroupBackendServers(self, p: dict[str, Any]) -> dict[str, Any]:
        members, items = self._members(p)
        for item in items:
            members[_member_key(item)] = item
        return {}

    def _RemoveVServerGroupBackendServers(self, p: dict[str, Any]) -> dict[str, Any]:
        members, items = self._members(p)
        for item in items:
            members.pop(_member_key(item), None)
        return {}

    def _SetVServerGroupAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._AddVServerGroupBackendServers(p)
