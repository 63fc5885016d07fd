"""The openstack provider's optional ``describe_load_balancer`` (``kccm explain``): the
Service's balancer as Octavia reports it now.

Three reads: the balancer (found as ``get_load_balancer`` finds it), its listeners (ports and
protocols, which Octavia's status tree leaves out), and its status tree ``GET
/v2/lbaas/loadbalancers/{id}/status`` (Octavia's ``StatusController``: operating and
provisioning status of every listener, pool, member and health monitor). A member's
``operating_status`` is its health: ``ONLINE`` healthy; ``ERROR`` (its checks fail) and
``OFFLINE`` (administratively down) unhealthy; ``NO_MONITOR`` (the pool has no health
monitor), ``DRAINING`` and anything else unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import BalancerView, ListenerView, TargetHealth, TargetView
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia

__all__ = ["balancer_view", "member_health", "member_node"]

_HEALTH = {
    "ONLINE": TargetHealth.HEALTHY,
    "ERROR": TargetHealth.UNHEALTHY,
    "OFFLINE": TargetHealth.UNHEALTHY,
}


def member_health(member: Mapping[str, Any]) -> tuple[TargetHealth, str]:
    """(health, detail) of a member of the status tree."""
    operating = str(member.get("operating_status") or "")
    health = _HEALTH.get(operating, TargetHealth.UNKNOWN)
    words = [] if health is TargetHealth.HEALTHY else [operating]
    if operating == "NO_MONITOR":
        words = ["NO_MONITOR: the pool has no health monitor"]
    provisioning = str(member.get("provisioning_status") or "")
    if provisioning and provisioning != "ACTIVE":
        words.append(f"provisioning {provisioning}")
    return health, "; ".join(w for w in words if w)


def member_node(member: Mapping[str, Any]) -> str:
    """The Node a member stands for: kccm and OCCM name members after the Node (batch
    updates), or ``member_<node>_<address>_<port>`` (one by one)."""
    name = str(member.get("name") or "")
    if name.startswith("member_") and name.count("_") >= 3:
        return name.removeprefix("member_").rsplit("_", 2)[0]
    return name


def _target(member: Mapping[str, Any]) -> TargetView:
    health, detail = member_health(member)
    return TargetView(
        node=member_node(member),
        instance=str(member.get("id") or ""),
        address=str(member.get("address") or ""),
        port=int(member.get("protocol_port") or 0),
        health=health,
        detail=detail,
    )


def _listener(listener: Mapping[str, Any], status: Mapping[str, Any]) -> ListenerView:
    members = [m for pool in status.get("pools") or () for m in pool.get("members") or ()]
    words = [
        f"{k.removesuffix('_status')} {status[k]}"
        for k, fine in (("operating_status", "ONLINE"), ("provisioning_status", "ACTIVE"))
        if status.get(k) and status[k] != fine
    ]
    if not status.get("pools"):
        words.append("no pool")
    return ListenerView(
        port=int(listener.get("protocol_port") or 0),
        protocol=str(listener.get("protocol") or ""),
        targets=sorted(map(_target, members), key=lambda t: (t.node, t.address, t.port)),
        detail="; ".join(words),
    )


def balancer_view(octavia: Octavia, lb: LB) -> BalancerView:
    """The balancer, its listeners and their members' health (two more reads)."""
    listeners: Sequence[Mapping[str, Any]] = octavia.listeners(str(lb["id"]))
    tree = octavia.status_tree(str(lb["id"]))
    by_id = {str(li.get("id")): li for li in tree.get("listeners") or ()}
    views = [_listener(li, by_id.get(str(li.get("id")), {})) for li in listeners]
    detail = {
        "id": str(lb.get("id", "")),
        "vip_address": str(lb.get("vip_address", "")),
        "operating_status": str(tree.get("operating_status") or lb.get("operating_status", "")),
        "provider": str(lb.get("provider", "")),
    }
    return BalancerView(
        name=str(lb.get("name", "")),
        state=str(tree.get("provisioning_status") or lb.get("provisioning_status", "")),
        listeners=sorted(views, key=lambda v: (v.port, v.protocol)),
        detail=detail,
    )
