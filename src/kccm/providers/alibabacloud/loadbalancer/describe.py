"""A classic load balancer as SLB sees it now, for ``kccm explain`` (kccm's own
``describe_load_balancer``; upstream has none): its listeners, each listener's vServer group
members and their health (``DescribeHealthStatus``: ``normal`` healthy, ``abnormal``
unhealthy, anything else unknown). Only reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kccm.cloudprovider import BalancerView, ListenerView, TargetHealth, TargetView
from kccm.providers.alibabacloud.errors import AlibabaError, AlibabaThrottled
from kccm.providers.alibabacloud.loadbalancer.slbapi import Backend, Balancer, SlbApi

__all__ = ["describe"]

_HEALTH = {"normal": TargetHealth.HEALTHY, "abnormal": TargetHealth.UNHEALTHY}


def _health(api: SlbApi, lb_id: str) -> tuple[dict[tuple[int, str, int], str], str]:
    """``{(listener port, server ID, backend port): status}``, or a reason it is unknown."""
    try:
        answer = api.rpc.call("slb", "DescribeHealthStatus", {"LoadBalancerId": lb_id})
    except AlibabaThrottled:
        raise
    except AlibabaError as err:
        return {}, f"health not known: {err}"
    items = (answer.get("BackendServers") or {}).get("BackendServer") or []
    return {
        (int(i.get("ListenerPort") or 0), str(i.get("ServerId")), int(i.get("Port") or 0)): str(
            i.get("ServerHealthStatus") or ""
        )
        for i in items
    }, ""


def _targets(
    port: int, members: Sequence[Backend], health: Mapping[tuple[int, str, int], str]
) -> list[TargetView]:
    targets = []
    for member in members:
        status = health.get((port, member.server_id, member.port), "")
        targets.append(
            TargetView(
                instance=member.server_id,
                address=member.server_ip,
                port=member.port,
                health=_HEALTH.get(status, TargetHealth.UNKNOWN),
                detail="" if status in ("normal", "") else status,
            )
        )
    return targets


def describe(api: SlbApi, balancer: Balancer) -> BalancerView:
    """The view of ``balancer``: one listener per SLB listener, the members of its group."""
    listeners = api.listeners(balancer.id)
    groups = {
        item["VServerGroupId"]: api.vgroup_backends(item["VServerGroupId"])
        for item in listeners
        if item.get("VServerGroupId")
    }
    health, unknown = _health(api, balancer.id) if listeners else ({}, "")
    views = []
    for item in sorted(listeners, key=lambda i: int(i.get("ListenerPort") or 0)):
        port = int(item.get("ListenerPort") or 0)
        members = groups.get(item.get("VServerGroupId", ""), [])
        detail = "; ".join(
            t for t in (item.get("Status", ""), item.get("Description", ""), unknown) if t
        )
        views.append(
            ListenerView(
                port=port,
                protocol=item.get("ListenerProtocol", "").upper(),
                targets=_targets(port, members, health),
                detail=detail,
            )
        )
    facts = {
        "id": balancer.id,
        "address": balancer.address,
        "address type": balancer.address_type,
        "delete protection": balancer.delete_protection,
    }
    state = balancer.raw.get("LoadBalancerStatus", "")
    return BalancerView(
        name=balancer.name,
        state=state,
        listeners=views,
        detail={k: v for k, v in facts.items() if v},
    )
