"""A balancer's backends: which nodes a provider leaves out, and work done once per node list.

The framework passes every node of the stable node set to ``ensure_load_balancer``; some
providers then keep only some of them (aws: the ``target-node-labels`` annotation). A
LoadBalancer implementation that also implements :class:`BackendNodeSelector` lets
``kccm explain`` name those nodes and why. It makes no cloud call (it reads the Service and
the Node only), so it does not go through the call gate.

The service controller hands every ensure and update the same ``nodes`` tuple while no Node of
the set changed (the promise is on :class:`~kccm.cloudprovider.interface.LoadBalancer`), so a
provider can derive its backends from a node list once for a thousand balancers:
:class:`IdentityMemo` remembers what was made from the last few tuples, found by identity.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, cast

from kccm.cloudprovider.types import Node, Service

__all__ = ["BackendNodeSelector", "IdentityMemo", "NodeExclusion", "as_backend_node_selector"]

K = TypeVar("K")
V = TypeVar("V")

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


class IdentityMemo(Generic[K, V]):
    """What ``make`` gave for the last ``size`` keys, found by identity (``is``), never by
    equality; the keys are held, so an id is not reused while remembered.

    Thread-safe: a value is made under the one lock, once, and every other caller waits for
    it, a caller asking for another key too (``make`` must not ask this memo again). Only
    pass keys that never change (tuples): a list may change between two calls.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, tuple[K, V]] = OrderedDict()

    def get(self, key: K, make: Callable[[K], V]) -> V:
        """``make(key)``, or what it gave when it was last asked for this very object."""
        with self._lock:
            found = self._entries.get(id(key))
            if found is not None and found[0] is key:
                self._entries.move_to_end(id(key))
                return found[1]
            value = make(key)
            self._entries[id(key)] = (key, value)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value
