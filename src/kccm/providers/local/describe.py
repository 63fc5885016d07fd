"""The local provider's optional describe calls (``kccm explain``): a balancer's listeners with
the data plane's verdict on each backend (``backend_health``, written by its health checker),
and a Node's instance row.

A verdict is only as fresh as the data plane that wrote it: with no data plane heartbeating,
every backend is ``unknown`` and the balancer's state says that nothing serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.cloudprovider import (
    BalancerView,
    InstanceView,
    ListenerView,
    Node,
    Service,
    TargetHealth,
    TargetView,
    default_load_balancer_name,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.local.base import own_provider_id
from kccm.providers.local.records import BackendHealth, LoadBalancerRecord
from kccm.providers.local.supervision import DataplaneSupervision

__all__ = ["LocalDescribing"]

SERVING = "serving"
NO_DATAPLANE = "no-dataplane"
"""The balancer's state when no data plane heartbeats: its VIP answers nothing."""


class LocalDescribing(DataplaneSupervision):
    """``describe_load_balancer`` and ``describe_instance`` over the state file."""

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        """One read: the balancer's row and the data plane's verdicts on its backends."""
        self._read("describe_backends")
        record, health = self.store.describe_backends(default_load_balancer_name(service))
        if record is None:
            return None
        now = self._clock.now().timestamp()
        serving = self._probe_dataplane(self.store.path, now) is not None
        verdicts = {h.node: h for h in health} if serving else {}
        listeners = [_listener(port, record, verdicts) for port in record.ports]
        return BalancerView(
            record.name,
            state=SERVING if serving else NO_DATAPLANE,
            listeners=listeners,
            detail={"vip": record.vip, "health_check": _health_check(record.health)},
        )

    def describe_instance(self, node: Node) -> InstanceView | None:
        """One read: the node's instance row (its state: ``running`` or ``stopped``)."""
        provider_id = node_provider_id(node)
        self._read("find_instance")
        if provider_id:
            instance = self.store.find_instance_by_provider_id(
                own_provider_id(provider_id, node_name(node))
            )
        else:
            instance = self.store.find_instance(node_name(node))
        if instance is None:
            return InstanceView(provider_id=provider_id, exists=False)
        return InstanceView(
            provider_id=instance.provider_id,
            state=instance.state,
            detail={
                "instance_type": instance.instance_type,
                "zone": instance.zone,
                "addresses": ", ".join(f"{kind}={ip}" for kind, ip in instance.addresses),
            },
        )


def _listener(
    port: Mapping[str, Any], record: LoadBalancerRecord, verdicts: Mapping[str, BackendHealth]
) -> ListenerView:
    node_port = int(port.get("node_port", 0))
    return ListenerView(
        port=int(port.get("port", 0)),
        protocol=str(port.get("protocol", "TCP")),
        targets=[_target(backend, node_port, verdicts) for backend in record.backends],
    )


def _target(
    backend: Mapping[str, Any], node_port: int, verdicts: Mapping[str, BackendHealth]
) -> TargetView:
    node = str(backend.get("node", ""))
    verdict = verdicts.get(node)
    if verdict is None:
        health, detail = TargetHealth.UNKNOWN, "not checked (yet)"
    elif verdict.healthy:
        health, detail = TargetHealth.HEALTHY, ""
    else:
        health, detail = TargetHealth.UNHEALTHY, verdict.detail
    address = str(backend.get("address", ""))
    draining = bool(backend.get("draining"))
    return TargetView(node, f"local://{node}", address, node_port, health, detail, draining)


def _health_check(health: Mapping[str, Any]) -> str:
    mode = str(health.get("mode", ""))
    if mode == "tcp":
        return "tcp connect to each node port"
    return f"{mode}: GET :{health.get('port', '')}{health.get('path', '')}"
