"""``local``: a cloud on one machine, its state in a SQLite file.

- InstancesV2 and Zones read the ``instances`` table (``kccm local instances ...`` writes it):
  a stopped instance is shut down, a deleted one does not exist; with ``auto-adopt`` a Node
  without an instance becomes one at initialization, from its reported addresses.
- LoadBalancer: a VIP per Service from the pool (``ip_claims``), the desired proxy state in
  ``load_balancers`` (ports with nodePorts, backends = the nodes' InternalIP, health checks,
  source ranges, session affinity) for the data plane to serve; status ip=VIP, ipMode Proxy.
- Routes: the ``routes`` table.
- ``describe_load_balancer`` / ``describe_instance`` (optional, for ``kccm explain``): a
  balancer's listeners with the data plane health checker's verdict on each backend, and a
  Node's instance row (:mod:`.describe`).

Ensure, update and delete are read-compare-write: they read the balancer's row and the
Service's IP claim, compare them with what the Service, the nodes and the cloud config
(``health-check-mode``) ask for, and write only when something differs, so an unchanged
balancer costs one read and a drifted one (edited in the state file, deleted) is repaired.
Every store operation is counted in a :class:`~kccm.cloudprovider.apicalls.CloudAPICalls`
ledger (:meth:`LocalCloud.cloud_api_calls`), reads apart from writes.

Every method but :meth:`LocalCloud.initialize` is a plain ``def``: the framework runs them in
its thread pool, and the SQLite calls block only that thread. ``initialize`` is ``async``: it
starts the data plane and then supervises it (a task on the daemon's loop checks its heartbeat
every ``dataplane-check-interval`` on the clock and starts a new one when it has died).

Layout (shaped like the aws provider): this module is the composition root; one class per
capability (:mod:`.instances` InstancesV2 and Zones, :mod:`.balancers`, :mod:`.routes`) over
the shared :class:`~.base.LocalBase`; :mod:`.supervision` watches the data plane process; the
data plane itself is the :mod:`.dataplane` subpackage; :mod:`.store` and :mod:`.records` are
the state file; :mod:`.cli` is ``kccm local ...``.
"""

from __future__ import annotations

from typing import TextIO

from kccm.cloudprovider import (
    AddressRetainer,
    BalancerSharer,
    InstanceDescriber,
    InstanceMetadataLister,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    Routes,
    TargetDrainer,
    Zones,
)
from kccm.providers.local.base import PROVIDER_NAME
from kccm.providers.local.config import LocalCloudConfig, load_local_config
from kccm.providers.local.describe import LocalDescribing
from kccm.providers.local.desired import (
    ANNOTATION_RETAIN_IP,
    ANNOTATION_SOURCE_RANGES,
    KUBE_PROXY_HEALTH_PORT,
    LocalLoadBalancerError,
    desired_load_balancer,
)
from kccm.providers.local.drain import LocalDraining
from kccm.providers.local.instances import LocalInstances
from kccm.providers.local.retention import LocalRetention
from kccm.providers.local.routes import LocalRoutes
from kccm.providers.local.sharing import LocalSharing
from kccm.providers.local.store import (
    LocalStore,
    resolve_state_path,
)
from kccm.providers.local.supervision import (
    DataplaneProbe,
    DataplaneStarter,
    DataplaneStopper,
    probe_dataplane,
    start_dataplane,
    stop_dataplane,
)
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "ANNOTATION_RETAIN_IP",
    "ANNOTATION_SOURCE_RANGES",
    "KUBE_PROXY_HEALTH_PORT",
    "PROVIDER_NAME",
    "DataplaneProbe",
    "DataplaneStarter",
    "DataplaneStopper",
    "LocalCloud",
    "LocalLoadBalancerError",
    "desired_load_balancer",
    "new_local_cloud",
    "probe_dataplane",
    "start_dataplane",
    "stop_dataplane",
]


class LocalCloud(
    LocalInstances, LocalRetention, LocalDraining, LocalSharing, LocalRoutes, LocalDescribing
):
    """The ``local`` provider over one :class:`LocalStore`: the composition root of its
    capabilities (one class each, sharing :class:`~.base.LocalBase`'s store and ledger)."""

    def __init__(
        self,
        store: LocalStore,
        config: LocalCloudConfig | None = None,
        *,
        dataplane_starter: DataplaneStarter = start_dataplane,
        dataplane_probe: DataplaneProbe = probe_dataplane,
        dataplane_stopper: DataplaneStopper = stop_dataplane,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        super().__init__(store, config)
        self._init_supervision(dataplane_starter, dataplane_probe, clock, dataplane_stopper)

    def load_balancer(self) -> LocalCloud:
        return self

    def instances(self) -> None:
        return None

    def instances_v2(self) -> LocalCloud:
        return self

    def zones(self) -> LocalCloud:
        return self

    def clusters(self) -> None:
        return None

    def routes(self) -> LocalCloud:
        return self

    def provider_name(self) -> str:
        return PROVIDER_NAME

    def has_cluster_id(self) -> bool:
        return True


def new_local_cloud(config: TextIO | None) -> LocalCloud:
    """The ``local`` entry point: the cloud config (optional, see
    :class:`~kccm.providers.local.config.LocalCloudConfig`) names the state file and the pool."""
    parsed = load_local_config(config)
    store = LocalStore(resolve_state_path(parsed.global_.state_file or None))
    return LocalCloud(store, parsed)


def _implements(
    cloud: LocalCloud,
) -> tuple[
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    AddressRetainer,
    TargetDrainer,
    BalancerSharer,
    InstancesV2,
    InstanceDescriber,
    InstanceMetadataLister,
    Zones,
    Routes,
]:
    """Never called: mypy checks here that LocalCloud implements these interfaces."""
    return (cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud, cloud)


new_local_cloud.config_schema = LocalCloudConfig  # type: ignore[attr-defined]
