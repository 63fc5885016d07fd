"""The Service's rules in the cluster's security group (cloud-provider-azure v1.36.5
``azure_loadbalancer.go`` ``reconcileSecurityGroup``): its destination addresses are taken out
of every managed rule, then (while it wants a balancer, unless
``azure-disable-load-balancer-nsg-rule``) put back where its access configuration says; the
group is written only when its rules differ, with ``If-Match``.

The group's managed rules then keep only destinations the cluster still has (upstream's
``RetainSecurityGroup``, :mod:`.nsgretain`), in the same read-compare-write: nothing stale,
nothing written.

Not done (upstream's ``listSharedIPPortMapping``): keeping ports of other Services sharing
this Service's address (kccm refuses such sharing).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Collection, Sequence

from kccm.cloudprovider import Node, Service
from kccm.providers.azure.loadbalancer.access import access_control, destination_ports
from kccm.providers.azure.loadbalancer.annotations import ServiceAnnotations
from kccm.providers.azure.loadbalancer.armapi import ArmApi, read_modify_write
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings
from kccm.providers.azure.loadbalancer.nsgrules import PROTOCOLS, RuleHelper, destinations
from kccm.providers.azure.loadbalancer.tags import parse_tags, reconcile_tags

__all__ = ["node_addresses", "reconcile_security_group"]

log = logging.getLogger(__name__)


def node_addresses(nodes: Sequence[Node]) -> list[str]:
    """The Nodes' IPv4 InternalIPs: the destinations when floating IP is off."""
    found: list[str] = []
    for node in nodes:
        for address in (node.get("status") or {}).get("addresses") or ():
            text = str(address.get("address", ""))
            if address.get("type") == "InternalIP" and text.count(".") == 3:
                found.append(text)
    return sorted(set(found))


def _node_port_destinations(helper: RuleHelper, ports: dict[str, list[int]]) -> list[str]:
    """Deleting a Service without floating IP: the destinations of the managed allow rules
    for exactly its nodePorts (nodePorts are the cluster's, so such a rule is the Service's)."""
    found: set[str] = set()
    for rule in helper.rules.values():
        props = rule.get("properties") or {}
        wanted = sorted(str(p) for p in ports.get(str(props.get("protocol")), ()))
        if wanted and sorted(props.get("destinationPortRanges") or ()) == wanted:
            found.update(destinations(rule))
    return sorted(found)


def reconcile_security_group(
    arm: ArmApi,
    settings: LBSettings,
    service: Service,
    ann: ServiceAnnotations,
    dsts: Sequence[str],
    *,
    want_lb: bool,
    retain: Collection[str] | None = None,
) -> bool:
    """Bring the Service's rules to what it wants (``want_lb``) or remove them, then keep in
    the managed rules only the destinations of ``retain`` (None: skip that pass); True when
    the group was written."""
    if not settings.security_group_name:
        log.warning("azure: no securityGroupName in the cloud config; no security rules made")
        return False
    control = access_control(service, ann) if want_lb else None

    def change(current: Json | None) -> Json | None:
        if current is None:
            raise LookupError(f"security group {settings.nsg_path()} not found")
        group = copy.deepcopy(current)
        helper = RuleHelper(group)
        targets = list(dsts)
        if not want_lb and ann.disable_floating_ip:
            targets = _node_port_destinations(helper, destination_ports(service, ann))
        if targets:
            for protocol in PROTOCOLS:
                helper.remove_destinations(protocol, targets)
        if control is not None and not ann.disable_nsg_rule:
            control.patch(helper, list(dsts))
        if retain is not None:
            helper.retain_destinations(retain)
        group, changed = helper.result()
        wanted = parse_tags(settings.tags, settings.tags_map)
        if wanted:
            tags, retagged = reconcile_tags(
                dict(group.get("tags") or {}), wanted, settings.system_tags
            )
            group["tags"] = tags
            changed = changed or retagged
        return group if changed else None

    return read_modify_write(arm, settings.nsg_path(), change)[1]
