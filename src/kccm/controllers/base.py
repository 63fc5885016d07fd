"""What every cloud controller is built from, and the metrics they share.

A controller gets one :class:`ControllerContext` (production values, test seams explicit):
the API client, the shared informer factory, the provider behind the call gate, the event
broadcaster, the metrics registry, the clock and the cluster name. Each controller module
exposes ``build(context, options) -> <Controller> | None`` returning None (with a logged
warning) when the provider lacks the capability it needs — upstream skips such a controller
instead of failing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from kccm.cloudprovider.gated import GatedCloud
from kccm.kube.interface import KubeClient
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = ["DEFAULT_CLUSTER_NAME", "ControllerContext", "running_managed_controllers"]

DEFAULT_CLUSTER_NAME = "kubernetes"


@dataclass
class ControllerContext:
    kube: KubeClient
    informers: SharedInformerFactory
    cloud: GatedCloud
    events: EventBroadcaster
    registry: CollectorRegistry
    clock: Clock = REAL_CLOCK
    cluster_name: str = DEFAULT_CLUSTER_NAME


_GAUGES: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()


def running_managed_controllers(registry: CollectorRegistry, name: str) -> Gauge:
    """``running_managed_controllers{name, manager="cloud-controller-manager"}`` (BETA upstream),
    set to 1 while a controller runs and 0 once stopped; ``name`` is the legacy short name
    (``cloud-node``, ``cloud-node-lifecycle``, ``service``, ``route``)."""
    gauge = _GAUGES.get(registry)
    if gauge is None:
        gauge = Gauge(
            "running_managed_controllers",
            "Indicates where instances of a controller are currently running",
            ["name", "manager"],
            registry=registry,
        )
        _GAUGES[registry] = gauge
    return gauge.labels(name=name, manager="cloud-controller-manager")
