"""Octavia's provisioning states: what a change may do while its balancer is pending, and
what the provider's worker does when it finishes.

Mirrors octavia/db/repositories.py (``test_and_set_provisioning_status`` and
``test_and_set_lb_and_listeners_prov_status``: a change is accepted only while the balancer
is ``ACTIVE``, a delete also from ``ERROR``; the balancer, the listeners and pool concerned
become ``PENDING_UPDATE``) and the controllers' checks (members and monitors first refuse a
pending pool). Where a real provider's worker moves a balancer on, a timer on the server's
loop does after ``World.lb_active_delay`` seconds: ``PENDING_CREATE``/``PENDING_UPDATE``
become ``ACTIVE`` (operating status ``ONLINE``, members ``NO_MONITOR`` without a monitor),
``PENDING_DELETE`` objects go, and a deleted balancer takes its children and its
Octavia-owned VIP port along.

The health monitor is emulated where it shows (:func:`member_health`): a monitored member
whose address is a Nova server's that is not ``ACTIVE`` (stopped, in error) is ``ERROR``, as
Octavia's health manager reports a member failing its checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from kccm.emulators.openstack.errors import EmuError
from kccm.emulators.openstack.octavia_model import children, immutable
from kccm.emulators.openstack.world import Obj, World, now_iso

__all__ = ["check_mutable", "lock", "remove", "settle", "settle_later", "settle_now"]

PENDING = ("PENDING_CREATE", "PENDING_UPDATE", "PENDING_DELETE")


def lock(
    world: World,
    lb: Obj,
    *,
    resource_error: bool = True,
    lb_status: str = "PENDING_UPDATE",
    touched: Iterable[tuple[Obj, str]] = (),
) -> None:
    """``test_and_set_lb_and_listeners_prov_status``: refuse unless the balancer is
    ``ACTIVE`` (``ERROR`` too for a delete), then set it and ``touched`` objects pending and
    start the timer that settles them."""
    check_mutable(lb, resource_error=resource_error, lb_status=lb_status)
    lb["provisioning_status"] = lb_status
    lb["updated_at"] = now_iso(zulu=False, micro=True)
    for obj, status in touched:
        obj["provisioning_status"] = status
        if status != "PENDING_CREATE":
            obj["updated_at"] = now_iso(zulu=False, micro=True)
    settle_later(world, lb["id"])


def check_mutable(
    lb: Obj,
    *,
    resource_error: bool = True,
    lb_status: str = "PENDING_UPDATE",
    pool: Obj | None = None,
) -> None:
    """Raise what Octavia answers a change of a balancer that is not ``ACTIVE`` with:
    ``ImmutableObject`` for a child (``Pool <id>`` first when the pool itself is pending,
    as member and monitor changes check it), ``LBPendingStateError`` for the balancer."""
    if pool is not None and pool["provisioning_status"] != "ACTIVE":
        raise immutable("Pool", pool["id"])
    allowed = ("ACTIVE", "ERROR") if lb_status == "PENDING_DELETE" else ("ACTIVE",)
    if lb["provisioning_status"] in allowed:
        return
    if resource_error:
        raise immutable("Load Balancer", lb["id"])
    raise EmuError(
        409, f"Invalid state {lb['provisioning_status']} of loadbalancer resource {lb['id']}"
    )


def settle_later(world: World, lb_id: str) -> None:
    """Start (or restart) the balancer's timer on the running loop."""
    old = world.timers.pop(lb_id, None)
    if old is not None:
        old.cancel()

    def fire() -> None:
        world.timers.pop(lb_id, None)
        settle(world, lb_id)

    loop = asyncio.get_running_loop()
    world.timers[lb_id] = loop.call_later(max(world.lb_active_delay, 0.0), fire)


def settle_now(world: World) -> list[str]:
    """Settle every balancer whose timer runs, at once (``POST /_emu/settle``); the ids."""
    settled = list(world.timers)
    for lb_id in settled:
        world.timers.pop(lb_id).cancel()
        settle(world, lb_id)
    return settled


def _tree(world: World, lb_id: str) -> list[tuple[str, Obj]]:
    pools = children(world, "pools", "_lb", lb_id)
    found: list[tuple[str, Obj]] = [
        ("listeners", li) for li in children(world, "listeners", "_lb", lb_id)
    ]
    found += [("pools", p) for p in pools]
    for pool in pools:
        found += [("members", m) for m in children(world, "members", "_pool", pool["id"])]
        found += [
            ("healthmonitors", h) for h in children(world, "healthmonitors", "_pool", pool["id"])
        ]
    return found


def remove(world: World, kind: str, obj: Obj) -> None:
    """Drop ``obj`` and what hangs below it (a pool's members and monitor; a listener's
    default pool link)."""
    store: dict[str, Obj] = getattr(world, kind)
    store.pop(obj["id"], None)
    if kind == "pools":
        for child_kind in ("members", "healthmonitors"):
            for child in children(world, child_kind, "_pool", obj["id"]):
                getattr(world, child_kind).pop(child["id"], None)
        for listener in world.listeners.values():
            if listener["default_pool_id"] == obj["id"]:
                listener["default_pool_id"] = None


def _online(world: World, kind: str, obj: Obj) -> str:
    if not obj.get("admin_state_up", True):
        return "OFFLINE"
    if kind == "members":
        pool_monitors = children(world, "healthmonitors", "_pool", obj["_pool"])
        return "ONLINE" if pool_monitors else "NO_MONITOR"
    return "ONLINE"


def member_health(world: World, member: Obj) -> str:
    """The member's operating status as the health monitor sees it now: its stored one, but
    ``ERROR`` when it is monitored (stored ``ONLINE``) and its address belongs to a server that
    is not ``ACTIVE``."""
    stored = str(member["operating_status"])
    if stored != "ONLINE":
        return stored
    for port in world.ports.values():
        server = world.servers.get(str(port.get("device_id") or ""))
        if server is None or server["status"] == "ACTIVE":
            continue
        if any(ip.get("ip_address") == member["address"] for ip in port.get("fixed_ips") or ()):
            return "ERROR"
    return stored


def _delete_vip_port(world: World, port_id: str) -> None:
    """Octavia deletes the VIP port it allocated; Neutron's port delete disassociates the
    port's floating IPs (neutron/db/l3_db.py, ``disassociate_floatingips``), so a floating IP
    the user kept (OCCM's ``loadBalancerIP``) is left unassociated, not pointing at a port
    that is gone."""
    if world.ports.pop(port_id, None) is None:
        return
    for fip in world.floatingips.values():
        if fip["port_id"] == port_id:
            fip.update(
                port_id=None,
                fixed_ip_address=None,
                router_id=None,
                status="DOWN",
                port_details=None,
            )


def settle(world: World, lb_id: str) -> None:
    """What the provider's worker does when it finishes: pending objects become ACTIVE,
    pending deletes go (a deleted balancer takes its tree and VIP port)."""
    lb = world.loadbalancers.get(lb_id)
    if lb is None:
        return
    if lb["provisioning_status"] == "PENDING_DELETE":
        for kind, obj in _tree(world, lb_id):
            getattr(world, kind).pop(obj["id"], None)
        del world.loadbalancers[lb_id]
        if lb.get("_vip_owned"):
            _delete_vip_port(world, lb["vip_port_id"])
        return
    for kind, obj in _tree(world, lb_id):
        if obj["provisioning_status"] == "PENDING_DELETE":
            remove(world, kind, obj)
    for kind, obj in [("loadbalancers", lb), *_tree(world, lb_id)]:
        online = _online(world, kind, obj)
        if obj["provisioning_status"] in PENDING or obj["operating_status"] != online:
            obj["updated_at"] = now_iso(zulu=False, micro=True)  # the status update writes the row
        if obj["provisioning_status"] in PENDING:
            obj["provisioning_status"] = "ACTIVE"
        obj["operating_status"] = online
