"""Load-balancer classes a provider serves by itself (kccm, not upstream).

Some CCMs kccm replaces serve a ``spec.loadBalancerClass`` without any flag (alibabacloud's
``alibabacloud.com/nlb``, cloud-provider-alibaba-cloud v2.14.0
``pkg/controller/helper/service_utils.go`` ``NeedNLB``). A provider's ``LoadBalancer``
implementation that declares them (:class:`LoadBalancerClassServer`) has them served besides
the class-less Services and ``--load-balancer-class``'s (docs/behaviour.md, "Classes a
provider serves"). Not a provider call: a constant read once, when the service controller
starts; nothing goes through the call gate.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

__all__ = ["LoadBalancerClassServer", "served_load_balancer_classes"]


@runtime_checkable
class LoadBalancerClassServer(Protocol):
    """Optional, on the ``LoadBalancer`` implementation: the classes it serves by itself."""

    def load_balancer_classes(self) -> Collection[str]:
        """The ``spec.loadBalancerClass`` values; read once, when the controller starts."""
        ...


def served_load_balancer_classes(load_balancer: object) -> frozenset[str]:
    """The classes a :class:`LoadBalancerClassServer` serves; empty for any other."""
    if isinstance(load_balancer, LoadBalancerClassServer):
        return frozenset(load_balancer.load_balancer_classes())
    return frozenset()
