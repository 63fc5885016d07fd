"""A network load balancer as NLB sees it now, for ``kccm explain`` (kccm's own
``describe_load_balancer``; upstream has none): its listeners by port, each listener's server
group members, and the balancer's DNS name, zones and protection. Only reads
(``ListListeners``, ``ListServerGroupServers``). Member health is not read: upstream's NLB
controller reads none, and the emulator models none, so each member shows ``unknown``."""

from __future__ import annotations

from kccm.cloudprovider import BalancerView, ListenerView, TargetView
from kccm.providers.alibabacloud.loadbalancer.nlbapi import Nlb, NlbApi, NlbListener, Server

__all__ = ["describe_nlb"]


def _targets(servers: list[Server]) -> list[TargetView]:
    return [
        TargetView(instance=s.server_id, address=s.server_ip, port=s.port)
        for s in sorted(servers, key=lambda s: (s.server_id, s.server_ip, s.port))
    ]


def _listener(item: NlbListener, servers: list[Server]) -> ListenerView:
    detail = "; ".join(t for t in (item.status, item.description) if t)
    return ListenerView(
        port=item.port, protocol=item.protocol.upper(), targets=_targets(servers), detail=detail
    )


def describe_nlb(api: NlbApi, balancer: Nlb) -> BalancerView:
    """The view of ``balancer``: one listener per NLB listener, the servers of its group."""
    listeners = sorted(api.listeners(balancer.id), key=lambda item: (item.port, item.protocol))
    groups = {item.server_group_id for item in listeners if item.server_group_id}
    servers = {group: api.servers(group) for group in sorted(groups)}
    zones = ", ".join(
        f"{z.zone_id} {z.ipv4}".strip() for z in balancer.zones if z.zone_id or z.ipv4
    )
    facts = {
        "id": balancer.id,
        "dns name": balancer.dns_name,
        "address type": balancer.address_type,
        "zones": zones,
        "delete protection": "on" if balancer.delete_protection else "",
    }
    return BalancerView(
        name=balancer.name,
        state=balancer.status,
        listeners=[_listener(i, servers.get(i.server_group_id, [])) for i in listeners],
        detail={k: v for k, v in facts.items() if v},
    )
