"""An optional LoadBalancer capability: say which nodes a provider leaves out of a balancer.

The framework passes every node of the stable node set to ``ensure_load_balancer``; some
providers then keep only some of them (aws: the ``target-node-labels`` annotation). A
LoadBalancer implementation that also implements :class:`BackendNodeSelector` lets
``kccm explain`` name those nodes and why. It makes no cloud call (it reads the Service and
the Node only), so it does not go through the call gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, cast

from kccm.cloudprovider.types import Node, Service

__all__ = ["BackendNodeSelector", "NodeExclusion", "as_backend_node_selector"]

NodeExclusion = Callable[[Node], "str | None"]
"""Why the provider leaves a node out (``"does not match annotation X=..."``), or None."""


class BackendNodeSelector(Protocol):
    def backend_node_exclusion(self, service: Service) -> NodeExclusion | None:
        """For ``service``, a function saying why a node is left out of its balancer, or
        None when the provider keeps every node it is given."""
        ...


def as_backend_node_selector(balancer: object) -> BackendNodeSelector | None:
    """The LoadBalancer implementation as a :class:`BackendNodeSelector`, or None."""
    if callable(getattr(balancer, "backend_node_exclusion", None)):
        return cast(BackendNodeSelector, balancer)
    return None
