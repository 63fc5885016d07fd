"""The Neutron requests the balancer code sends (upstream ``pkg/util/openstack/network.go``,
``security_group.go`` and the gophercloud calls in ``pkg/openstack/loadbalancer*.go``
v1.36.0): floating IPs, networks and subnets, ports, security groups and their rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.api import OpenStackAPI

__all__ = ["Neutron", "Obj"]

Obj = dict[str, Any]
SERVICE = "network"
V2 = "/v2.0"


class Neutron:
    """Neutron v2.0 for the balancer code."""

    def __init__(self, api: OpenStackAPI) -> None:
        self.api = api

    def _list(self, path: str, key: str, params: Mapping[str, Any], op: str) -> list[Obj]:
        return list(self.api.paged(SERVICE, V2 + path, key, params, operation=op))

    def _send(self, method: str, path: str, body: Any, op: str) -> Obj:
        result = self.api.request(SERVICE, method, V2 + path, json=body, operation=op)
        return dict(result or {})

    # -- floating IPs ------------------------------------------------------------------------

    def floating_ips(self, **params: Any) -> list[Obj]:
        """Upstream ``GetFloatingIPs`` (filters: ``port_id``, ``floating_ip_address``)."""
        return self._list("/floatingips", "floatingips", params, "list_floatingips")

    def floating_ip_of_port(self, port_id: str) -> Obj | None:
        """Upstream ``GetFloatingIPByPortID``: the first floating IP on the port, if any."""
        found = self.floating_ips(port_id=port_id)
        return found[0] if found else None

    def create_floating_ip(self, body: Mapping[str, Any]) -> Obj:
        result = self._send("POST", "/floatingips", {"floatingip": body}, "create_floatingip")
        return dict(result.get("floatingip") or {})

    def set_floating_ip_port(self, fip_id: str, port_id: str | None) -> Obj:
        """Upstream ``updateFloatingIP``: attach to ``port_id`` or detach (``None``)."""
        body = {"floatingip": {"port_id": port_id}}
        result = self._send("PUT", f"/floatingips/{fip_id}", body, "update_floatingip")
        return dict(result.get("floatingip") or {})

    def update_floating_ip(self, fip_id: str, body: Mapping[str, Any]) -> Obj:
        """kccm: any update of a floating IP (its description, for address retention)."""
        result = self._send("PUT", f"/floatingips/{fip_id}", dict(body), "update_floatingip")
        return dict(result.get("floatingip") or {})

    def delete_floating_ip(self, fip_id: str) -> None:
        self.api.request(
            SERVICE, "DELETE", f"{V2}/floatingips/{fip_id}", operation="delete_floatingip"
        )

    # -- networks and subnets ----------------------------------------------------------------

    def networks(self, **params: Any) -> list[Obj]:
        return self._list("/networks", "networks", params, "list_networks")

    def subnets(self, **params: Any) -> list[Obj]:
        return self._list("/subnets", "subnets", params, "list_subnets")

    def subnet(self, subnet_id: str) -> Obj:
        result = self._send("GET", f"/subnets/{subnet_id}", None, "get_subnet")
        return dict(result.get("subnet") or {})

    def floating_network_id(self) -> str:
        """Upstream ``GetFloatingNetworkID``: the first external network with an IPv4 subnet
        (or a subnet the project cannot see); ``""`` when there is none."""
        for network in self.networks():
            if not network.get("router:external") or not network.get("subnets"):
                continue
            visible = {s.get("id"): s for s in self.subnets(network_id=network.get("id"))}
            for subnet_id in network.get("subnets") or ():
                subnet = visible.get(subnet_id)
                if subnet is None or subnet.get("ip_version") == 4:
                    return str(network.get("id"))
        return ""

    # -- ports -------------------------------------------------------------------------------

    def ports(self, **params: Any) -> list[Obj]:
        """Upstream ``GetPorts`` (filters: ``device_id``, ``security_groups``)."""
        return self._list("/ports", "ports", params, "list_ports")

    def port(self, port_id: str) -> Obj:
        result = self._send("GET", f"/ports/{port_id}", None, "get_port")
        return dict(result.get("port") or {})

    def set_port_security_groups(self, port_id: str, groups: Sequence[str]) -> None:
        body = {"port": {"security_groups": list(groups)}}
        self._send("PUT", f"/ports/{port_id}", body, "update_port")

    def delete_port_tag(self, port_id: str, tag: str) -> None:
        path = f"{V2}/ports/{port_id}/tags/{tag}"
        self.api.request(SERVICE, "DELETE", path, operation="delete_port_tag")

    # -- security groups ---------------------------------------------------------------------

    def security_group_id(self, name: str) -> str:
        """gophercloud-utils ``IDFromName``: exactly one group of that name, ``""`` if none."""
        found = self._list(
            "/security-groups", "security_groups", {"name": name}, "list_security_groups"
        )
        if len(found) > 1:
            raise CloudProviderError(f"found {len(found)} security groups named {name}")
        return str(found[0].get("id", "")) if found else ""

    def create_security_group(self, name: str, description: str) -> str:
        body = {"security_group": {"name": name, "description": description}}
        result = self._send("POST", "/security-groups", body, "create_security_group")
        return str((result.get("security_group") or {}).get("id", ""))

    def delete_security_group(self, group_id: str) -> None:
        path = f"{V2}/security-groups/{group_id}"
        self.api.request(SERVICE, "DELETE", path, operation="delete_security_group")

    def security_group_rules(self, group_id: str) -> list[Obj]:
        params = {"security_group_id": group_id}
        return self._list(
            "/security-group-rules", "security_group_rules", params, "list_security_group_rules"
        )

    def create_security_group_rule(self, body: Mapping[str, Any]) -> None:
        self._send(
            "POST",
            "/security-group-rules",
            {"security_group_rule": body},
            "create_security_group_rule",
        )

    def delete_security_group_rule(self, rule_id: str) -> None:
        path = f"{V2}/security-group-rules/{rule_id}"
        self.api.request(SERVICE, "DELETE", path, operation="delete_security_group_rule")
