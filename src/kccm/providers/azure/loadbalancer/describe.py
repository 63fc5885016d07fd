"""A Service's part of the shared balancer as ARM has it now, for ``kccm explain``: one
listener per load-balancing rule of the Service, the pool's members as its targets. ARM keeps
no per-backend health on the balancer (that is Azure Monitor's), so every target's health is
unknown."""

from __future__ import annotations

from kccm.cloudprovider import BalancerView, ListenerView, Service, TargetView
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import owns_name

__all__ = ["balancer_view"]

_PROTOCOL = {"Tcp": "TCP", "Udp": "UDP", "All": "ALL"}


def _target(member_id: str) -> TargetView:
    """A member: ``.../networkInterfaces/<nic>/ipConfigurations/<ipc>`` (a VM's interface) or
    ``.../virtualMachineScaleSets/<ss>/virtualMachines/<id>/networkInterfaces/...``."""
    parts = member_id.split("/")
    lowered = [part.lower() for part in parts]
    if "virtualmachinescalesets" in lowered:
        at = lowered.index("virtualmachinescalesets")
        instance = f"{parts[at + 1]}/{parts[at + 3]}"
    elif "networkinterfaces" in lowered:
        instance = parts[lowered.index("networkinterfaces") + 1]
    else:
        instance = member_id
    return TargetView(instance=instance)


def balancer_view(lb: Json, service: Service, pool_name: str, address: str) -> BalancerView:
    props = lb.get("properties") or {}
    targets: list[TargetView] = []
    for pool in props.get("backendAddressPools") or ():
        if str(pool.get("name", "")).lower() == pool_name.lower():
            configs = (pool.get("properties") or {}).get("backendIPConfigurations") or ()
            targets = [_target(str(item.get("id", ""))) for item in configs]
    listeners = [
        ListenerView(
            port=int((rule.get("properties") or {}).get("frontendPort") or 0),
            protocol=_PROTOCOL.get(str((rule.get("properties") or {}).get("protocol")), "TCP"),
            targets=targets,
            detail=str(rule.get("name", "")),
        )
        for rule in props.get("loadBalancingRules") or ()
        if owns_name(service, str(rule.get("name", "")))
    ]
    detail = {"id": str(lb.get("id", "")), "sku": str((lb.get("sku") or {}).get("name", ""))}
    if address:
        detail["address"] = address
    return BalancerView(
        name=str(lb.get("name", "")),
        state=str(props.get("provisioningState", "")),
        listeners=listeners,
        detail=detail,
    )
