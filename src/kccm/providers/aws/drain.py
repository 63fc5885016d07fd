"""The aws provider's part in draining a leaving Node (kccm's
:class:`~kccm.cloudprovider.interface.TargetDrainer`, docs/behaviour.md "Draining a Node's
targets").

An NLB has no per-target "no new connections" state short of deregistration, and
deregistration is AWS's own drain: the target is ``draining`` for the target group's
``deregistration_delay.timeout_seconds``, then gone. So on an NLB a Node passed as draining
is passed on as a target (kept registered, with its security-group rules) while a target
group of the NLB holds it now (one that holds it no more is never registered again), until
the framework's drain time has passed; the plain update then calls ``DeregisterTargets`` and
AWS drains it for the group's delay. A Classic ELB has upstream's own connection-draining
annotation: its Nodes go at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import LoadBalancerStatus, Node, Service, default_load_balancer_name
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.loadbalancer import NetworkLoadBalancers, target_instance_ids

__all__ = ["NLBTargetHolding"]


class NLBTargetHolding:
    """TargetDrainer over NLB target groups (mixed into the LoadBalancer)."""

    _api: AWSAPI
    _nlb: NetworkLoadBalancers

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        raise NotImplementedError  # the LoadBalancer's own ensure

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        raise NotImplementedError  # the LoadBalancer's own update

    def _is_nlb(self, service: Service) -> bool:
        raise NotImplementedError  # whether the Service's balancer is an NLB of this provider

    def ensure_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> LoadBalancerStatus:
        held = self._held(service, nodes, draining)
        return self.ensure_load_balancer(cluster_name, service, [*nodes, *held])

    def update_load_balancer_draining(
        self, cluster_name: str, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> None:
        held = self._held(service, nodes, draining)
        self.update_load_balancer(cluster_name, service, [*nodes, *held])

    def _held(
        self, service: Service, nodes: Sequence[Node], draining: Sequence[Node]
    ) -> list[Node]:
        """The draining Nodes whose instance a target group of the Service's NLB holds now
        (read from the cloud: a Node it does not hold is never registered again)."""
        if not draining or not self._is_nlb(service):
            return []
        registered = self._registered(service)
        serving = set(target_instance_ids(nodes, {}))
        held = [
            node for node in draining if set(target_instance_ids([node], {})) & registered - serving
        ]
        return held

    def _registered(self, service: Service) -> set[str]:
        lb = self._nlb.describe(default_load_balancer_name(service))
        if lb is None:
            return set()
        found: set[str] = set()
        for group in self._nlb.groups.of_listeners(self._nlb._listeners(lb)).values():
            health: Mapping[str, Any] = self._api.call(
                "elbv2", "describe_target_health", TargetGroupArn=group["TargetGroupArn"]
            )
            found |= {
                str(t["Target"]["Id"])
                for t in health.get("TargetHealthDescriptions", ())
                if (t.get("TargetHealth") or {}).get("State") != "draining"
            }
        return found
