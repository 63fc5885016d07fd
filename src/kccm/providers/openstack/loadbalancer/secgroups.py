"""``[LoadBalancer] manage-security-groups``: one security group per Service on the member
ports (upstream ``pkg/openstack/loadbalancer_sg.go`` v1.36.0:
``ensureAndUpdateOctaviaSecurityGroup``, ``getRulesToCreateAndDelete``,
``applyNodeSecurityGroupIDForLB``, ``disassociateSecurityGroupForLB``,
``ensureSecurityGroupDeleted``).

The group ``lb-sg-<uid>-<namespace>-<name>`` allows, from the member subnet's CIDR (from the
source ranges with ovn, which keeps client addresses), each port's nodePort and the
healthCheckNodePort. Rules are compared by direction, protocol, ethertype, prefix and port
range; everything else in the group is removed (Neutron's default egress rules included, as
upstream does). The group is added to the node ports that carry the member address.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kccm.cloudprovider import Node, Service, node_provider_id
from kccm.providers.openstack.api import OpenStackConflict, OpenStackNotFound
from kccm.providers.openstack.loadbalancer.names import (
    security_group_description,
    security_group_name,
)
from kccm.providers.openstack.loadbalancer.neutron import Neutron, Obj
from kccm.providers.openstack.loadbalancer.nodes import (
    instance_id_from_provider_id,
    node_address_for_lb,
)
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = [
    "ensure_security_group",
    "ensure_security_group_deleted",
    "rules_to_change",
    "wanted_rules",
]

log = logging.getLogger(__name__)

_RULE_FIELDS = (
    "direction",
    "protocol",
    "ethertype",
    "remote_ip_prefix",
    "port_range_min",
    "port_range_max",
)


def _rule(cidr: str, protocol: str, port: int, ethertype: str, group_id: str) -> dict[str, Any]:
    return {
        "direction": "ingress",
        "protocol": protocol,
        "ethertype": ethertype,
        "remote_ip_prefix": cidr,
        "security_group_id": group_id,
        "port_range_min": port,
        "port_range_max": port,
    }


def wanted_rules(
    service: Service, subnet_cidr: str, cidrs: Sequence[str], group_id: str
) -> list[dict[str, Any]]:
    """The rules upstream's ``ensureAndUpdateOctaviaSecurityGroup`` wants."""
    ethertype = "IPv6" if ipaddress.ip_network(subnet_cidr, strict=False).version == 6 else "IPv4"
    spec: Mapping[str, Any] = service.get("spec") or {}
    rules = []
    hcnp = int(spec.get("healthCheckNodePort") or 0)
    if hcnp:
        rules.append(_rule(subnet_cidr, "tcp", hcnp, ethertype, group_id))
    for port in spec.get("ports") or ():
        node_port = int(port.get("nodePort") or 0)
        if not node_port:
            continue
        protocol = str(port.get("protocol") or "TCP").lower()
        rules.extend(_rule(cidr, protocol, node_port, ethertype, group_id) for cidr in cidrs)
    return rules


def _same(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Upstream ``compareSecurityGroupRuleAndCreateOpts`` (protocol case-insensitive)."""
    for key in _RULE_FIELDS:
        have, want = existing.get(key), wanted.get(key)
        if key == "protocol":
            have, want = str(have or "").lower(), str(want or "").lower()
        elif key == "remote_ip_prefix":
            have, want = have or "", want or ""
        if have != want:
            return False
    return True


def rules_to_change(
    wanted: Sequence[Mapping[str, Any]], existing: Sequence[Obj]
) -> tuple[list[Mapping[str, Any]], list[Obj]]:
    """Upstream ``getRulesToCreateAndDelete``."""
    create = [w for w in wanted if not any(_same(e, w) for e in existing)]
    delete = [e for e in existing if not any(_same(e, w) for w in wanted)]
    return create, delete


def _group(neutron: Neutron, cluster: str, service: Service) -> str:
    name = security_group_name(service)
    group_id = neutron.security_group_id(name)
    return group_id or neutron.create_security_group(
        name, security_group_description(cluster, service)
    )


def _sync_rules(neutron: Neutron, wanted: Sequence[Mapping[str, Any]], group_id: str) -> None:
    create, delete = rules_to_change(wanted, neutron.security_group_rules(group_id))
    for rule in create:
        try:
            neutron.create_security_group_rule(rule)
        except OpenStackConflict:
            log.warning("Security group rule already found in %s (concurrent update)", group_id)
    for rule in delete:
        log.info("Deleting rule %s from security group %s", rule.get("id"), group_id)
        try:
            neutron.delete_security_group_rule(str(rule.get("id")))
        except OpenStackNotFound:
            log.warning("Security group rule %s found missing when deleting it", rule.get("id"))
            return  # upstream returns here too


def _member_port(port: Obj, address: str, subnet_id: str) -> bool:
    """Upstream ``isPortMember``."""
    return any(
        (not subnet_id or subnet_id == f.get("subnet_id")) and f.get("ip_address") == address
        for f in port.get("fixed_ips") or ()
    )


_PORT_LOCK = threading.Lock()


def _change_port_groups(
    neutron: Neutron, port_id: str, change: Callable[[list[str]], list[str]]
) -> None:
    """Read the port's groups afresh and write ``change(groups)``, one port update at a time
    in this process. Upstream reads, then writes what it read plus or minus its group (its
    TODO: "This isn't an atomic operation"); kccm syncs Services concurrently, and two of them
    on the same node port would undo each other's group (or write back one just deleted)."""
    with _PORT_LOCK:
        try:
            groups = list(neutron.port(port_id).get("security_groups") or ())
        except OpenStackNotFound:
            return  # the port went with its server
        wanted = change(groups)
        if wanted != groups:
            neutron.set_port_security_groups(port_id, wanted)


def _apply_to_nodes(
    neutron: Neutron, conf: ServiceConfig, nodes: Sequence[Node], group_id: str
) -> None:
    """Upstream ``applyNodeSecurityGroupIDForLB``."""
    for node in nodes:
        server_id = instance_id_from_provider_id(node_provider_id(node))
        address = node_address_for_lb(node, conf.ip_family)
        if not address:
            continue
        for port in neutron.ports(device_id=server_id):
            groups = list(port.get("security_groups") or ())
            if not port.get("port_security_enabled", True) or group_id in groups:
                continue
            if _member_port(port, address, conf.member_subnet_id):
                _change_port_groups(neutron, str(port["id"]), lambda g: [*g, group_id])


def ensure_security_group(
    neutron: Neutron,
    cluster: str,
    service: Service,
    nodes: Sequence[Node],
    conf: ServiceConfig,
    lb_provider: str,
) -> None:
    """Upstream ``ensureAndUpdateOctaviaSecurityGroup``."""
    group_id = _group(neutron, cluster, service)
    subnet_cidr = str(neutron.subnet(conf.member_subnet_id).get("cidr", ""))
    cidrs = list(conf.allowed_cidrs) if lb_provider == "ovn" else [subnet_cidr]
    _sync_rules(neutron, wanted_rules(service, subnet_cidr, cidrs, group_id), group_id)
    _apply_to_nodes(neutron, conf, nodes, group_id)


def ensure_security_group_deleted(neutron: Neutron, service: Service) -> None:
    """Upstream ``ensureSecurityGroupDeleted`` + ``disassociateSecurityGroupForLB``."""
    group_id = neutron.security_group_id(security_group_name(service))
    if not group_id:
        return
    for port in neutron.ports(security_groups=group_id):
        _change_port_groups(neutron, str(port["id"]), lambda g: sorted(set(g) - {group_id}))
        if group_id in (port.get("tags") or ()):
            neutron.delete_port_tag(str(port["id"]), group_id)
    with contextlib.suppress(OpenStackNotFound):
        neutron.delete_security_group(group_id)
