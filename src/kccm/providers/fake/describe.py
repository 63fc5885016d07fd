"""The fake's optional describe calls (``kccm explain``): its balancers' listeners and targets
with a health that tests set (:meth:`FakeDescribing.set_target_health`), and its machines."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import (
    BalancerView,
    InstanceNotFound,
    InstanceView,
    ListenerView,
    Node,
    NodeAddressType,
    NodeName,
    Service,
    TargetHealth,
    TargetView,
    default_load_balancer_name,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.fake.model import FakeBalancer, FakeInstance, _service_key

__all__ = ["FakeDescribing"]


class FakeDescribing:
    """Mixed into :class:`~kccm.providers.fake.FakeCloud` (it provides the state below)."""

    _lock: threading.Lock
    _balancers: dict[str, FakeBalancer]
    _instances: dict[NodeName, FakeInstance]
    _target_health: dict[NodeName, tuple[TargetHealth, str]]

    async def _enter(self, method: str, *args: Any) -> None:
        raise NotImplementedError  # FakeCloud's

    def _for_node(self, node: Node) -> FakeInstance:
        raise NotImplementedError  # FakeCloud's

    def set_target_health(
        self, node: NodeName, health: TargetHealth | str | None, detail: str = ""
    ) -> None:
        """What the cloud's health check says of ``node`` as a backend of every balancer;
        ``None`` goes back to the default (healthy, unhealthy when shut down or gone)."""
        with self._lock:
            if health is None:
                self._target_health.pop(node, None)
            else:
                self._target_health[node] = (TargetHealth(health), detail)

    async def describe_load_balancer(
        self, cluster_name: str, service: Service
    ) -> BalancerView | None:
        """One read: the balancer's ports as listeners, its hosts as targets on the node ports."""
        await self._enter("describe_load_balancer", cluster_name, _service_key(service))
        with self._lock:
            balancer = self._balancers.get(default_load_balancer_name(service))
            if balancer is None:
                return None
            node_ports = _node_ports(service)
            listeners = [
                ListenerView(
                    port=port.port,
                    protocol=port.protocol,
                    targets=[
                        self._target(host, node_ports.get((port.port, port.protocol), 0))
                        for host in balancer.hosts
                    ],
                )
                for port in balancer.ports
            ]
        detail = {"address": balancer.ip, "ip_mode": str(balancer.ip_mode)}
        return BalancerView(balancer.name, state="active", listeners=listeners, detail=detail)

    def _target(self, host: NodeName, port: int) -> TargetView:
        """The lock is held."""
        instance = self._instances.get(host)
        health, detail = self._target_health.get(host, _default_health(instance))
        address = _internal_ip(instance)
        instance_id = instance.provider_id if instance is not None else ""
        return TargetView(host, instance_id, address, port, health, detail)

    async def describe_instance(self, node: Node) -> InstanceView | None:
        """One read: the machine, its state (``running`` or ``shutdown``) and its facts."""
        await self._enter("describe_instance", node_name(node))
        try:
            instance = self._for_node(node)
        except InstanceNotFound:
            provider_id = node_provider_id(node)
            return InstanceView(provider_id=provider_id, exists=False, state="")
        return InstanceView(
            provider_id=instance.provider_id,
            state="shutdown" if instance.shutdown else "running",
            detail={
                "instance_type": instance.instance_type,
                "zone": instance.zone,
                "region": instance.region,
            },
        )


def _default_health(instance: FakeInstance | None) -> tuple[TargetHealth, str]:
    if instance is None:
        return TargetHealth.UNHEALTHY, "no such instance"
    if instance.shutdown:
        return TargetHealth.UNHEALTHY, "instance is shut down"
    return TargetHealth.HEALTHY, ""


def _internal_ip(instance: FakeInstance | None) -> str:
    if instance is None:
        return ""
    for address in instance.addresses:
        if address.type == NodeAddressType.INTERNAL_IP:
            return address.address
    return ""


def _node_ports(service: Service) -> Mapping[tuple[int, str], int]:
    return {
        (int(p.get("port", 0)), str(p.get("protocol", "TCP"))): int(p.get("nodePort") or 0)
        for p in service.get("spec", {}).get("ports") or ()
    }
