"""The finalizer and labels upstream's manager writes on the Services it balances, which kccm
writes the same way (:class:`~kccm.cloudprovider.ServiceMarker`; docs/behaviour.md, "A
provider's marks on Services"), so a switch from upstream's manager to kccm and back needs no
hand edit of any Service.

Upstream (cloud-provider-alibaba-cloud v2.14.0, ``pkg/controller/helper/service_utils.go``):
the finalizer ``service.k8s.alibaba/resources`` (CLB, ``clbv1/service_controller.go``) or
``service.k8s.alibaba/nlb`` (NLB, ``nlbv2/nlb_controller.go``), and after each successful
reconcile the labels ``service.beta.kubernetes.io/hash`` (``GetServiceHash``, see
:mod:`.servicehash`) and ``service.k8s.alibaba/loadbalancer-id`` (the balancer's ID), both
removed, with the finalizer, once the balancer is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from kccm.cloudprovider import Service
from kccm.providers.alibabacloud.loadbalancer.servicehash import service_hash

__all__ = [
    "CLB_FINALIZER",
    "LABEL_LOADBALANCER_ID",
    "LABEL_SERVICE_HASH",
    "NLB_FINALIZER",
    "AlibabaServiceMarks",
    "needs_nlb",
]

CLB_FINALIZER = "service.k8s.alibaba/resources"
NLB_FINALIZER = "service.k8s.alibaba/nlb"
LABEL_SERVICE_HASH = "service.beta.kubernetes.io/hash"
LABEL_LOADBALANCER_ID = "service.k8s.alibaba/loadbalancer-id"


NLB_CLASS = "alibabacloud.com/nlb"
TYPE_ANNOTATION = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-type"


def needs_nlb(service: Service, gates: Mapping[str, bool]) -> bool:
    """``NeedNLB``: the class ``alibabacloud.com/nlb``, or ``loadbalancer-type: nlb`` under
    the ``LoadBalancerTypeAnnotation`` feature gate."""
    if (service.get("spec") or {}).get("loadBalancerClass") == NLB_CLASS:
        return True
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    return (
        bool(gates.get("LoadBalancerTypeAnnotation")) and annotations.get(TYPE_ANNOTATION) == "nlb"
    )


def _uid(service: Service) -> str:
    return str((service.get("metadata") or {}).get("uid") or "")


class AlibabaServiceMarks:
    """Upstream's marks for one provider: the finalizer by balancer kind (``is_nlb``), and the
    labels from the ID of the balancer the last ensure of each Service found or made (kept in
    memory: the service controller asks right after that ensure, in the same sync)."""

    def __init__(self, is_nlb: Callable[[Service], bool]) -> None:
        self._is_nlb = is_nlb
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def ensured(self, service: Service, balancer_id: str) -> None:
        """Called by an ensure that succeeded (the provider's worker threads)."""
        with self._lock:
            self._ids[_uid(service)] = balancer_id

    def deleted(self, service: Service) -> None:
        with self._lock:
            self._ids.pop(_uid(service), None)

    def service_finalizer(self, service: Service) -> str:
        return NLB_FINALIZER if self._is_nlb(service) else CLB_FINALIZER

    def service_labels(self, service: Service) -> Mapping[str, str]:
        """``addServiceLabels``: the hash, and the balancer's ID when known."""
        labels = {LABEL_SERVICE_HASH: service_hash(service)}
        with self._lock:
            balancer_id = self._ids.get(_uid(service), "")
        if balancer_id:
            labels[LABEL_LOADBALANCER_ID] = balancer_id
        return labels

    def service_label_keys(self) -> Collection[str]:
        """``removeServiceLabels``."""
        return (LABEL_SERVICE_HASH, LABEL_LOADBALANCER_ID)
