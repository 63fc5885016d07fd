"""The ``LoadBalancer`` capability of the ``alibabacloud`` provider: each Service goes to
the classic balancer (:mod:`.clb`) or the network balancer (:mod:`.nlb`), as upstream's
``NeedCLB`` / ``NeedNLB`` (``pkg/controller/helper/service_utils.go``, v2.14.0) decide.

NLB: ``spec.loadBalancerClass: alibabacloud.com/nlb``, or (with the
``LoadBalancerTypeAnnotation`` feature gate) the annotation ``loadbalancer-type: nlb``. The
provider declares the class it serves (:meth:`AlibabaLoadBalancers.load_balancer_classes`),
so kccm serves such Services without ``--load-balancer-class``, as upstream does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kccm.cloudprovider import BalancerView, EndpointsReader, LoadBalancerStatus, Node, Service
from kccm.providers.alibabacloud.loadbalancer.annotations import PREFIX
from kccm.providers.alibabacloud.loadbalancer.clb import ClassicLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlb import NLB_CLASS, NetworkLoadBalancers
from kccm.providers.alibabacloud.loadbalancer.nlbdescribe import describe_nlb

__all__ = ["AlibabaLoadBalancers", "wants_nlb"]


def wants_nlb(service: Service, gates: Collection[str]) -> bool:
    """``NeedNLB`` (the Service is ``type: LoadBalancer``: the framework checked)."""
    if (service.get("spec") or {}).get("loadBalancerClass") == NLB_CLASS:
        return True
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    kind = annotations.get(f"{PREFIX}loadbalancer-type", "")
    return "LoadBalancerTypeAnnotation" in gates and kind == "nlb"


class AlibabaLoadBalancers:
    """CLB or NLB per Service; plain ``def`` methods (the framework's thread pool)."""

    def __init__(self, clb: ClassicLoadBalancers, nlb: NetworkLoadBalancers) -> None:
        self.clb = clb
        self.nlb = nlb

    def load_balancer_classes(self) -> Collection[str]:
        return (NLB_CLASS,)

    def _nlb(self, service: Service) -> bool:
        gates = {k for k, on in self.clb.config.gates.items() if on}
        return wants_nlb(service, gates)

    # upstream's finalizer and labels (kccm.cloudprovider.ServiceMarker): the CLB's marks,
    # which name the NLB's finalizer for an NLB Service
    def service_finalizer(self, service: Service) -> str:
        return self.clb.service_finalizer(service)

    def service_labels(self, service: Service) -> Mapping[str, str]:
        return self.clb.service_labels(service)

    def service_label_keys(self) -> Collection[str]:
        return self.clb.service_label_keys()

    # the endpoints (kccm.cloudprovider.EndpointsUser): the CLB's or the NLB's
    def uses_endpoints(self, service: Service) -> bool:
        if self._nlb(service):
            return self.nlb.uses_endpoints(service)
        return self.clb.uses_endpoints(service)

    def set_endpoints_reader(self, reader: EndpointsReader) -> None:
        self.clb.set_endpoints_reader(reader)
        self.nlb.set_endpoints_reader(reader)

    def get_load_balancer_name(self, cluster_name: str, service: Service) -> str:
        return self.clb.get_load_balancer_name(cluster_name, service)

    def get_load_balancer(
        self, cluster_name: str, service: Service
    ) -> tuple[LoadBalancerStatus | None, bool]:
        if not self._nlb(service):
            return self.clb.get_load_balancer(cluster_name, service)
        found = self.nlb.find(service)
        return (None, False) if found is None else (self.nlb.status(found), True)

    def describe_load_balancer(self, cluster_name: str, service: Service) -> BalancerView | None:
        if self._nlb(service):
            found = self.nlb.find(service)
            return None if found is None else describe_nlb(self.nlb.api, found)
        return self.clb.describe_load_balancer(cluster_name, service)

    def ensure_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> LoadBalancerStatus:
        if self._nlb(service):
            status, lb_id = self.nlb.ensure_balancer(service, nodes)
            self.clb.marks.ensured(service, lb_id)
            return status
        return self.clb.ensure_load_balancer(cluster_name, service, nodes)

    def update_load_balancer(
        self, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> None:
        self.ensure_load_balancer(cluster_name, service, nodes)

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        if self._nlb(service):
            self.clb.marks.deleted(service)
            self.nlb.delete(service)
        else:
            self.clb.ensure_load_balancer_deleted(cluster_name, service)
