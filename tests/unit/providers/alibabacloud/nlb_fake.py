"""A small in-memory NLB (API 2022-04-30) at the RPC seam: answers the calls
:mod:`kccm.providers.alibabacloud.loadbalancer.nlbapi` makes (flat SDK-style parameters),
keeps their state and records each call. Every write answers a ``JobId`` that reads
``Processing`` for ``job_polls`` ``GetJobStatus`` calls, then ``Succeeded``; a new balancer is
``Provisioning`` for its first ``GetLoadBalancerAttribute``."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider.apicalls import CloudAPICalls, classify_by_verb
from kccm.providers.alibabacloud.errors import AlibabaError


def _order(key: str) -> list[tuple[int, int, str]]:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split(".")]


def unflatten(params: Mapping[str, Any]) -> dict[str, Any]:
    """``Tag.1.Key=a`` -> ``{"Tag": [{"Key": "a"}]}`` (numeric parts are list indexes)."""
    root: dict[str, Any] = {}
    for key in sorted(params, key=_order):
        parts = key.split(".")
        node: Any = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            nxt = parts[i + 1] if not last else ""
            if isinstance(node, list):
                index = int(part) - 1
                while len(node) <= index:
                    node.append({} if not nxt.isdigit() else [])
                if last:
                    node[index] = params[key]
                node = node[index]
            else:
                if last:
                    node[part] = params[key]
                else:
                    node = node.setdefault(part, [] if nxt.isdigit() else {})
    return root


def _bool(text: Any) -> bool:
    return str(text).lower() == "true"


class FakeNlb:
    def __init__(self, job_polls: int = 1) -> None:
        self.balancers: dict[str, dict[str, Any]] = {}
        self.listeners: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, int] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.ledger = CloudAPICalls()
        self.region = "cn-hangzhou"
        self.job_polls = job_polls
        self._ids = itertools.count(1)

    # the seam
    def call(self, product: str, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        assert product == "nlb", product
        assert all(isinstance(v, str) for v in params.values()), params
        self.calls.append((action, dict(params)))
        self.ledger.record(f"nlb:{action}", mutating=classify_by_verb(action))
        handler = getattr(self, f"_{action}", None)
        if handler is None:
            raise AssertionError(f"FakeNlb: no {action}")
        result: dict[str, Any] = handler(unflatten(params))
        return result

    def actions(self) -> list[str]:
        return [a for a, _ in self.calls]

    def writes(self) -> list[str]:
        return [a for a, _ in self.calls if classify_by_verb(a)]

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _job(self, **extra: Any) -> dict[str, Any]:
        job = self._id("job")
        self.jobs[job] = self.job_polls
        return {"JobId": job, **extra}

    def _GetJobStatus(self, p: dict[str, Any]) -> dict[str, Any]:
        left = self.jobs[p["JobId"]]
        self.jobs[p["JobId"]] = left - 1
        return {"Status": "Processing" if left > 0 else "Succeeded"}

    # balancers
    def _lb(self, lb_id: str) -> dict[str, Any]:
        if lb_id not in self.balancers:
            raise AlibabaError("no nlb", code="ResourceNotFound.loadBalancer")
        return self.balancers[lb_id]

    def _CreateLoadBalancer(self, p: dict[str, Any]) -> dict[str, Any]:
        lb_id = self._id("nlb")
        self.balancers[lb_id] = {
            "LoadBalancerId": lb_id,
            "LoadBalancerName": p["LoadBalancerName"],
            "LoadBalancerStatus": "Provisioning",
            "AddressType": {"internet": "Internet", "intranet": "Intranet"}.get(
                p["AddressType"].lower(), p["AddressType"]
            ),
            "AddressIpVersion": p.get("AddressIpVersion", "ipv4"),
            "VpcId": p["VpcId"],
            "DNSName": f"{lb_id}.{self.region}.nlb.aliyuncsslb.com",
            "ResourceGroupId": p.get("ResourceGroupId", "rg-default"),
            "SecurityGroupIds": [],
            "CrossZoneEnabled": True,
            "DeletionProtectionConfig": {
                "Enabled": _bool(p.get("DeletionProtectionConfig", {}).get("Enabled"))
            },
            "ModificationProtectionConfig": {
                "Status": p.get("ModificationProtectionConfig", {}).get("Status", "NonProtection")
            },
            "ZoneMappings": [
                {"ZoneId": z["ZoneId"], "VSwitchId": z["VSwitchId"], "LoadBalancerAddresses": []}
                for z in p.get("ZoneMappings", [])
            ],
            "Tags": [
                {"TagKey": t["Key"], "TagValue": t.get("Value", "")} for t in p.get("Tag", [])
            ],
            "ClientToken": p.get("ClientToken"),
        }
        return {"LoadbalancerId": lb_id, "OrderId": 1}

    def _GetLoadBalancerAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p["LoadBalancerId"])
        answer = {k: v for k, v in lb.items() if k != "ClientToken"}
        lb["LoadBalancerStatus"] = "Active"
        return answer

    def _ListLoadBalancers(self, p: dict[str, Any]) -> dict[str, Any]:
        found = []
        for lb in self.balancers.values():
            tags = {t["TagKey"]: t["TagValue"] for t in lb["Tags"]}
            if any(tags.get(t["Key"]) != t.get("Value") for t in p.get("Tag", [])):
                continue
            names = p.get("LoadBalancerNames")
            if names and lb["LoadBalancerName"] not in names:
                continue
            item = {k: v for k, v in lb.items() if k not in ("Tags", "ClientToken")}
            item["Tags"] = [{"Key": t["TagKey"], "Value": t["TagValue"]} for t in lb["Tags"]]
            found.append(item)
        return {"LoadBalancers": found, "TotalCount": len(found)}

    def _DeleteLoadBalancer(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p["LoadBalancerId"])
        if lb["DeletionProtectionConfig"]["Enabled"]:
            raise AlibabaError("protected", code="Forbidden.DeletionProtection")
        del self.balancers[p["LoadBalancerId"]]
        for lid in [
            k for k, v in self.listeners.items() if v["LoadBalancerId"] == lb["LoadBalancerId"]
        ]:
            del self.listeners[lid]
        return self._job()

    def _UpdateLoadBalancerProtection(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p["LoadBalancerId"])
        if "DeletionProtectionEnabled" in p:
            lb["DeletionProtectionConfig"]["Enabled"] = _bool(p["DeletionProtectionEnabled"])
        if "ModificationProtectionStatus" in p:
            lb["ModificationProtectionConfig"]["Status"] = p["ModificationProtectionStatus"]
        return {}

    def _UpdateLoadBalancerAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p["LoadBalancerId"])
        if "LoadBalancerName" in p:
            lb["LoadBalancerName"] = p["LoadBalancerName"]
        if "CrossZoneEnabled" in p:
            lb["CrossZoneEnabled"] = _bool(p["CrossZoneEnabled"])
        return self._job()

    def _UpdateLoadBalancerAddressTypeConfig(self, p: dict[str, Any]) -> dict[str, Any]:
        self._lb(p["LoadBalancerId"])["AddressType"] = p["AddressType"]
        return self._job()

    def _UpdateLoadBalancerZones(self, p: dict[str, Any]) -> dict[str, Any]:
        self._lb(p["LoadBalancerId"])["ZoneMappings"] = [
            {"ZoneId": z["ZoneId"], "VSwitchId": z["VSwitchId"]} for z in p["ZoneMappings"]
        ]
        return self._job()

    def _LoadBalancerJoinSecurityGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        self._lb(p["LoadBalancerId"])["SecurityGroupIds"] += p["SecurityGroupIds"]
        return self._job()

    def _LoadBalancerLeaveSecurityGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        lb = self._lb(p["LoadBalancerId"])
        lb["SecurityGroupIds"] = [
            g for g in lb["SecurityGroupIds"] if g not in p["SecurityGroupIds"]
        ]
        return self._job()

    # tags
    def _tagged(self, kind: str, rid: str) -> list[dict[str, str]]:
        if kind == "loadbalancer":
            return [{"Key": t["TagKey"], "Value": t["TagValue"]} for t in self._lb(rid)["Tags"]]
        return list(self.groups[rid]["Tags"])

    def _set_tags(self, kind: str, rid: str, tags: list[dict[str, str]]) -> None:
        if kind == "loadbalancer":
            self._lb(rid)["Tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in tags]
        else:
            self.groups[rid]["Tags"] = tags

    def _TagResources(self, p: dict[str, Any]) -> dict[str, Any]:
        for rid in p["ResourceId"]:
            tags = {t["Key"]: t["Value"] for t in self._tagged(p["ResourceType"], rid)}
            tags.update({t["Key"]: t.get("Value", "") for t in p["Tag"]})
            self._set_tags(
                p["ResourceType"], rid, [{"Key": k, "Value": v} for k, v in tags.items()]
            )
        return {}

    def _UntagResources(self, p: dict[str, Any]) -> dict[str, Any]:
        for rid in p["ResourceId"]:
            kept = [t for t in self._tagged(p["ResourceType"], rid) if t["Key"] not in p["TagKey"]]
            self._set_tags(p["ResourceType"], rid, kept)
        return {}

    # listeners
    def _CreateListener(self, p: dict[str, Any]) -> dict[str, Any]:
        lid = self._id("lsn")
        self.listeners[lid] = {
            **p,
            "ListenerId": lid,
            "ListenerPort": int(p["ListenerPort"]),
            "ListenerStatus": "Running",
        }
        return self._job(ListenerId=lid)

    def _ListListeners(self, p: dict[str, Any]) -> dict[str, Any]:
        ids = p["LoadBalancerIds"]
        found = [dict(v) for v in self.listeners.values() if v["LoadBalancerId"] in ids]
        return {"Listeners": found, "TotalCount": len(found)}

    def _UpdateListenerAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        self.listeners[p["ListenerId"]].update(p)
        return self._job()

    def _DeleteListener(self, p: dict[str, Any]) -> dict[str, Any]:
        del self.listeners[p["ListenerId"]]
        return self._job()

    def _StartListener(self, p: dict[str, Any]) -> dict[str, Any]:
        self.listeners[p["ListenerId"]]["ListenerStatus"] = "Running"
        return self._job()

    # server groups
    def _CreateServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        gid = self._id("sgp")
        health = {"HealthCheckEnabled": True, "HealthCheckType": "TCP"}  # NLB's default
        health.update(p.pop("HealthCheckConfig", {}))
        self.groups[gid] = {
            **p,
            "ServerGroupId": gid,
            "ServerGroupType": p.get("ServerGroupType", "Instance"),
            "HealthCheck": health,
            "Tags": p.get("Tag", []),
            "Servers": [],
        }
        return self._job(ServerGroupId=gid)

    def _ListServerGroups(self, p: dict[str, Any]) -> dict[str, Any]:
        found = []
        for gid, group in self.groups.items():
            tags = {t["Key"]: t["Value"] for t in group["Tags"]}
            if any(tags.get(t["Key"]) != t.get("Value") for t in p.get("Tag", [])):
                continue
            if p.get("ServerGroupIds") and gid not in p["ServerGroupIds"]:
                continue
            item = {k: v for k, v in group.items() if k not in ("Servers", "Tag")}
            found.append({**item, "ServerCount": len(group["Servers"])})
        return {"ServerGroups": found, "TotalCount": len(found)}

    def _UpdateServerGroupAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.groups[p["ServerGroupId"]]
        health = p.pop("HealthCheckConfig", None)
        group.update(p)
        if health is not None:
            group["HealthCheck"] = health
        return self._job()

    def _DeleteServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        gid = p["ServerGroupId"]
        if any(v["ServerGroupId"] == gid for v in self.listeners.values()):
            raise AlibabaError("in use", code="ResourceInUse.serverGroup")
        del self.groups[gid]
        return self._job()

    def _ListServerGroupServers(self, p: dict[str, Any]) -> dict[str, Any]:
        servers = [dict(s) for s in self.groups[p["ServerGroupId"]]["Servers"]]
        return {"Servers": servers, "TotalCount": len(servers)}

    @staticmethod
    def _key(server: Mapping[str, Any]) -> tuple[str, str]:
        return (server["ServerId"], server.get("ServerIp", ""))

    def _AddServersToServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.groups[p["ServerGroupId"]]
        for s in p["Servers"]:
            group["Servers"].append({**s, "Port": int(s["Port"]), "Weight": int(s["Weight"])})
        return self._job()

    def _RemoveServersFromServerGroup(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.groups[p["ServerGroupId"]]
        gone = {self._key(s) for s in p["Servers"]}
        group["Servers"] = [s for s in group["Servers"] if self._key(s) not in gone]
        return self._job()

    def _UpdateServerGroupServersAttribute(self, p: dict[str, Any]) -> dict[str, Any]:
        group = self.groups[p["ServerGroupId"]]
        new = {self._key(s): s for s in p["Servers"]}
        group["Servers"] = [
            {
                **s,
                **new[self._key(s)],
                "Port": int(new[self._key(s)]["Port"]),
                "Weight": int(new[self._key(s)]["Weight"]),
            }
            if self._key(s) in new
            else s
            for s in group["Servers"]
        ]
        return self._job()
