"""Pool members: one per node on the Service port's nodePort (upstream
``buildBatchUpdateMemberOpts``, ``buildCreateMemberOpts``, the member part of
``ensureOctaviaPool`` and ``canUseHTTPMonitor`` in ``pkg/openstack/loadbalancer.go``;
``SeriallyReconcilePoolMembers`` in ``pkg/util/openstack/loadbalancer_serial.go`` v1.36.0).

Members are compared as ``name-address-port-monitorport`` strings and replaced in one batch
PUT only when the sets differ. One deliberate difference: upstream puts the
healthCheckNodePort in the wanted key even where it sends no ``monitor_port`` (ovn, UDP on
Octavia < 2.16), so it rewrites those members on every sync; kccm keys what it sends.

kccm's drain (:mod:`.drain`): during a call made with :data:`DRAINING` Node names, the member
of such a Node is sent with ``weight`` 0 (Octavia sends it no new connection, established ones
stay) when the pool has it now, and left out when it has not (never added). The serial path
(``SeriallyReconcilePoolMembers``) has no weights: a draining Node goes at once there.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import Node, node_name
from kccm.providers.openstack.loadbalancer.names import cut255
from kccm.providers.openstack.loadbalancer.nodes import node_address_for_lb
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["DRAINING", "build_members", "can_use_http_monitor", "ensure_members", "member_key"]

log = logging.getLogger(__name__)

DRAINING: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "kccm_openstack_draining_nodes", default=frozenset()
)
"""kccm's drain: the names of the Nodes draining during the current call."""


def can_use_http_monitor(octavia: Octavia, port: Mapping[str, Any]) -> bool:
    """Upstream ``canUseHTTPMonitor``: never with ovn; on UDP only from Octavia 2.16."""
    if octavia.lb_provider == "ovn":
        return False
    if port.get("protocol") == "UDP":
        return octavia.supports("http_monitors_on_udp")
    return True


def member_key(member: Mapping[str, Any]) -> str:
    """``name-address-port-monitorport``; kccm: ``-w0`` after it for a member of weight 0
    (draining), so a drain's start and end are changes (other weights key as upstream's)."""
    key = "-".join(
        str(member.get(k) or 0) if k != "name" else str(member.get(k) or "")
        for k in ("name", "address", "protocol_port", "monitor_port")
    )
    return key + "-w0" if str(member.get("weight")) == "0" else key


def build_members(
    octavia: Octavia,
    port: Mapping[str, Any],
    nodes: Sequence[Node],
    conf: ServiceConfig,
    current: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Upstream ``buildBatchUpdateMemberOpts`` (the same shape serves the fully populated
    create): nodes without a usable address are skipped; nothing when nodePort is 0.
    ``current``: the names of the pool's members now (a draining Node's member is kept, with
    weight 0, only if it is one)."""
    node_port = int(port.get("nodePort") or 0)
    if not node_port:
        return []
    http = conf.health_check_node_port > 0 and can_use_http_monitor(octavia, port)
    draining = DRAINING.get()
    members = []
    for node in nodes:
        if node_name(node) in draining and node_name(node) not in current:
            continue
        address = node_address_for_lb(node, conf.ip_family)
        if not address:
            log.warning("Failed to get the address of node %s for creating member", node_name(node))
            continue
        member: dict[str, Any] = {
            "address": address,
            "protocol_port": node_port,
            "name": node_name(node),
        }
        if conf.member_subnet_id:
            member["subnet_id"] = conf.member_subnet_id
        if http:
            member["monitor_port"] = conf.health_check_node_port
        if node_name(node) in draining:
            member["weight"] = 0
        members.append(member)
    return members


def ensure_members(
    octavia: Octavia,
    lb_id: str,
    pool: LB,
    port: Mapping[str, Any],
    nodes: Sequence[Node],
    conf: ServiceConfig,
    serial: bool,
) -> None:
    """The member half of upstream ``ensureOctaviaPool``."""
    pool_id = str(pool["id"])
    draining = DRAINING.get()
    if serial:
        serving = [n for n in nodes if node_name(n) not in draining] if draining else nodes
        _serial(octavia, lb_id, pool_id, int(port.get("nodePort") or 0), serving)
        return
    if draining:  # the pool's members first: a draining Node's is kept only if it is there
        found = octavia.members(pool_id)
        wanted = build_members(octavia, port, nodes, conf, {str(m.get("name")) for m in found})
    else:  # upstream's order
        wanted = build_members(octavia, port, nodes, conf)
        found = octavia.members(pool_id)
    current = {member_key(m) for m in found}
    if current != {member_key(m) for m in wanted}:
        log.info("Updating %d members for pool %s", len(wanted), pool_id)
        octavia.batch_update_members(lb_id, pool_id, wanted)


def _serial_address(node: Node) -> str:
    """``getNodeAddressForLB`` of the serial path: the first InternalIP, else the first
    address of any type."""
    addresses: Sequence[Mapping[str, Any]] = (node.get("status") or {}).get("addresses") or ()
    for item in addresses:
        if item.get("type") == "InternalIP":
            return str(item.get("address", ""))
    return str(addresses[0].get("address", "")) if addresses else ""


def _serial(
    octavia: Octavia, lb_id: str, pool_id: str, node_port: int, nodes: Sequence[Node]
) -> None:
    """Upstream ``SeriallyReconcilePoolMembers``: one POST per missing member, one DELETE
    per obsolete one, each waited for."""
    members = octavia.members(pool_id)
    for node in nodes:
        address = _serial_address(node)
        if not address:
            continue
        found = [
            m
            for m in members
            if m.get("address") == address and m.get("protocol_port") == node_port
        ]
        if found:
            members = [m for m in members if m not in found]
            continue
        body = {
            "name": cut255(f"member_{node_name(node)}_{address}_{node_port}"),
            "protocol_port": node_port,
            "address": address,
        }
        octavia.create_member(lb_id, pool_id, body)
    for member in members:
        octavia.delete_member(lb_id, pool_id, str(member["id"]))
