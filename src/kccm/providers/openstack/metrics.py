"""OCCM's Prometheus metrics, with its names and labels (``pkg/metrics/metrics_api.go`` and
``metrics_reconcile.go`` v1.36.0), so dashboards and alerts made for OCCM keep working:

- ``openstack_api_request_duration_seconds`` (histogram), ``openstack_api_requests_total`` and
  ``openstack_api_request_errors_total`` (counters), label ``request``: OCCM's
  ``<resource>_<verb>`` names (``loadbalancer_get``, ``loadbalancer_members_update``,
  ``floating_ip_create``, ``port_list``, ...; :func:`request_label`);
- ``cloudprovider_openstack_reconcile_duration_seconds`` (histogram, OCCM's buckets),
  ``cloudprovider_openstack_reconcile_total`` and ``..._errors_total``, label ``operation``:
  ``loadbalancer_ensure``, ``loadbalancer_update``, ``loadbalancer_delete``.

Differences (docs/providers/openstack.md, "Monitoring"): kccm observes every HTTP request
(OCCM one observation per gophercloud call, which may read several pages), Keystone's token
requests aside as in OCCM; requests OCCM does not wrap (its version discovery, Barbican's
container check) are observed too. A reconcile's duration leaves out the time it waited for
another sync of its balancer (:meth:`OpenStackMetrics.waited`; OCCM runs one sync at a time
and never waits).

The families live outside any registry until the daemon registers them
(:meth:`OpenStackMetrics.register`), so a provider made by a test or a tool records into
metrics nobody reads, at no cost worth counting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["OpenStackMetrics", "request_label"]

GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""client_golang's ``DefBuckets`` (component-base's default for a ``HistogramOpts`` without
buckets), which OCCM's API histogram has."""
RECONCILE_BUCKETS = (
    *(0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0, 12.5, 15.0, 17.5, 20.0, 22.5, 25.0),
    *(27.5, 30.0, 50.0, 75.0, 100.0, 1000.0),
)

_WAITED: ContextVar[list[float] | None] = ContextVar("openstack_reconcile_waited", default=None)
"""The seconds the reconcile running in this context waited for its turn."""

_RESOURCES = {
    # kccm's operation noun (singular) -> OCCM's metric resource
    "load_balancer": "loadbalancer",
    "lb_status": "loadbalancer_status",
    "listener": "loadbalancer_listener",
    "pool": "loadbalancer_pool",
    "member": "loadbalancer_member",
    "healthmonitor": "loadbalancer_healthmonitor",
    "floatingip": "floating_ip",
    "extension": "network_extension",
}
_WHOLE = {
    # operations whose OCCM name is not noun + verb
    "batch_update_members": "loadbalancer_members_update",
    "add_extraroutes": "router_update",
    "remove_extraroutes": "router_update",
}


def request_label(operation: str) -> str:
    """OCCM's ``request`` label for one of kccm's operation names: ``get_loadbalancer`` ->
    ``loadbalancer_get``, ``list_listeners`` -> ``loadbalancer_listener_list``,
    ``update_port`` -> ``port_update``; a name of another shape is kept as it is."""
    if operation in _WHOLE:
        return _WHOLE[operation]
    verb, _, noun = operation.partition("_")
    if not noun:
        return operation
    if noun not in _RESOURCES and noun.endswith("s"):
        noun = noun[:-1]
    return f"{_RESOURCES.get(noun, noun)}_{verb}"


class OpenStackMetrics(Collector):
    """The six families; :meth:`register` puts them on the daemon's registry (once)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.api_duration = Histogram(
            "openstack_api_request_duration_seconds",
            "Latency of an OpenStack API call",
            ["request"],
            buckets=GO_DEFAULT_BUCKETS,
            registry=None,
        )
        self.api_total = Counter(
            "openstack_api_requests",
            "Total number of OpenStack API calls",
            ["request"],
            registry=None,
        )
        self.api_errors = Counter(
            "openstack_api_request_errors",
            "Total number of errors for an OpenStack API call",
            ["request"],
            registry=None,
        )
        self.reconcile_duration = Histogram(
            "cloudprovider_openstack_reconcile_duration_seconds",
            "Time taken by various parts of OpenStack cloud controller manager reconciliation "
            "loops",
            ["operation"],
            buckets=RECONCILE_BUCKETS,
            registry=None,
        )
        self.reconcile_total = Counter(
            "cloudprovider_openstack_reconcile",
            "Total number of OpenStack cloud controller manager reconciliations",
            ["operation"],
            registry=None,
        )
        self.reconcile_errors = Counter(
            "cloudprovider_openstack_reconcile_errors",
            "Total number of OpenStack cloud controller manager reconciliation errors",
            ["operation"],
            registry=None,
        )
        self._registered: set[int] = set()

    def _families(self) -> tuple[Histogram | Counter, ...]:
        return (
            self.api_duration,
            self.api_total,
            self.api_errors,
            self.reconcile_duration,
            self.reconcile_total,
            self.reconcile_errors,
        )

    def collect(self) -> Iterator[Metric]:
        for family in self._families():
            yield from family.collect()

    def register(self, registry: CollectorRegistry) -> None:
        """Expose the families on ``registry`` (a second call for it does nothing)."""
        if id(registry) in self._registered:
            return
        registry.register(self)
        self._registered.add(id(registry))

    def observe_request(self, operation: str, seconds: float, failed: bool) -> None:
        """One OpenStack API request (OCCM's ``MetricContext.ObserveRequest``)."""
        label = request_label(operation)
        self.api_duration.labels(label).observe(seconds)
        self.api_total.labels(label).inc()
        if failed:
            self.api_errors.labels(label).inc()

    @contextmanager
    def reconcile(self, operation: str) -> Iterator[None]:
        """Time a reconcile (OCCM's ``ObserveReconcile``): ``loadbalancer_ensure``, ...; the
        seconds it reports through :meth:`waited` are left out."""
        start = self._monotonic()
        waited = [0.0]
        token = _WAITED.set(waited)
        failed = True
        try:
            yield
            failed = False
        finally:
            _WAITED.reset(token)
            spent = max(0.0, self._monotonic() - start - waited[0])
            self.reconcile_duration.labels(operation).observe(spent)
            self.reconcile_total.labels(operation).inc()
            if failed:
                self.reconcile_errors.labels(operation).inc()

    @staticmethod
    def waited(seconds: float) -> None:
        """``seconds`` the reconcile running in this thread spent waiting for another sync of
        its balancer (:mod:`.loadbalancer.locks`): not part of its duration."""
        found = _WAITED.get()
        if found is not None:
            found[0] += seconds
