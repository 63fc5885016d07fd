"""The conformance kit's ``load_balancer_tamper`` for the openstack provider: changes and
deletes an Octavia balancer behind kccm's back (through the same API, not through the
provider's ensure), and reads whether it serves what the Service and the Nodes ask for.

Use from ``tests/conformance/test_openstack.py``::

    @pytest.fixture
    def load_balancer_tamper(self) -> OctaviaTamper:
        return OctaviaTamper()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kccm.cloudprovider import Interface, Node, Service
from kccm.providers.openstack.lblookup import find_for_service
from kccm.providers.openstack.lbnodes import node_address_for_lb
from kccm.providers.openstack.loadbalancer import OctaviaLoadBalancers


def _balancers(cloud: Interface) -> OctaviaLoadBalancers:
    found = cloud.load_balancer()
    assert isinstance(found, OctaviaLoadBalancers)
    return found


class OctaviaTamper:
    """Drift for the kit: the first listener (and its pool) goes; or the whole balancer."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        b = _balancers(cloud)
        lb = find_for_service(b.octavia, cluster_name, service)
        assert lb is not None
        listener = b.octavia.listeners(lb["id"])[0]
        pool = b.octavia.pool_of_listener(lb["id"], listener["id"])
        if pool is not None:
            b.octavia.delete_pool(lb["id"], pool["id"])
        b.octavia.delete_listener(lb["id"], listener["id"])

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        b = _balancers(cloud)
        lb = find_for_service(b.octavia, cluster_name, service)
        assert lb is not None
        fip = b.neutron.floating_ip_of_port(str(lb.get("vip_port_id")))
        if fip is not None:
            b.neutron.delete_floating_ip(fip["id"])
        b.octavia.delete_load_balancer(lb["id"], cascade=True)

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        b = _balancers(cloud)
        lb = find_for_service(b.octavia, cluster_name, service)
        if lb is None or lb.get("provisioning_status") != "ACTIVE":
            return False
        ports: list[Any] = (service.get("spec") or {}).get("ports") or []
        listeners = {
            (li["protocol"], li["protocol_port"]): li for li in b.octavia.listeners(lb["id"])
        }
        addresses = sorted(node_address_for_lb(n) for n in nodes)
        for port in ports:
            listener = listeners.get((port.get("protocol", "TCP"), port["port"]))
            if listener is None:
                return False
            pool = b.octavia.pool_of_listener(lb["id"], listener["id"])
            if pool is None:
                return False
            members = b.octavia.members(pool["id"])
            if sorted(m["address"] for m in members) != addresses:
                return False
            if any(m["protocol_port"] != port.get("nodePort") for m in members):
                return False
        return len(listeners) == len(ports)
