"""Upstream ``KubeCloudSharedOptions`` (options/kubecloudshared.go)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    ManagerConfig,
)
from kccm.app.flags import FlagSet
from kccm.app.options.checks import (
    IGNORED,
    positive,
)
from kccm.controllers.base import DEFAULT_CLUSTER_NAME
from kccm.controllers.nodelifecycle import NodeLifecycleControllerOptions
from kccm.controllers.route import RouteControllerOptions, parse_cluster_cidrs


@dataclass
class KubeCloudSharedOptions:
    """Upstream ``KubeCloudSharedOptions`` (section "generic")."""

    route: RouteControllerOptions = field(default_factory=RouteControllerOptions)
    lifecycle: NodeLifecycleControllerOptions = field(
        default_factory=NodeLifecycleControllerOptions
    )
    cloud_provider: str = ""
    cloud_config: str = ""
    external_cloud_volume_plugin: str = ""
    use_service_account_credentials: bool = False
    allow_untagged_cloud: bool = False
    cluster_name: str = DEFAULT_CLUSTER_NAME
    allocate_node_cidrs: bool = False
    cidr_allocator_type: str = "RangeAllocator"
    node_sync_period: float = 0.0

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("generic")
        s.string(
            self,
            "cloud_provider",
            "cloud-provider",
            "The provider for cloud services: a registered name (entry point group "
            "kccm.cloud_providers) or a module:factory reference. Required.",
        )
        s.string(
            self,
            "cloud_config",
            "cloud-config",
            "The path to the cloud provider configuration file, handed to the provider's "
            "factory. Empty string for no configuration file.",
        )
        s.string(
            self,
            "external_cloud_volume_plugin",
            "external-cloud-volume-plugin",
            f"The plugin to use when cloud provider is set to external. {IGNORED}",
        )
        s.boolean(
            self,
            "use_service_account_credentials",
            "use-service-account-credentials",
            "If true, use individual service account credentials for each controller. "
            "Not supported yet: true logs a warning at start and every controller uses the "
            "main credentials (--kubeconfig or the pod's service account).",
        )
        s.boolean(
            self,
            "allow_untagged_cloud",
            "allow-untagged-cloud",
            "Allow the cluster to run without the cluster-id on cloud instances: a provider "
            "whose has_cluster_id() is false then only gets a warning instead of stopping "
            "kccm. Deprecated upstream.",
        )
        s.duration(
            self.route,
            "route_reconciliation_period",
            "route-reconciliation-period",
            "The period for reconciling routes created for Nodes by the cloud provider.",
        )
        s.duration(
            self.lifecycle,
            "node_monitor_period",
            "node-monitor-period",
            "The period for syncing NodeStatus in the cloud node lifecycle controller.",
        )
        s.string(
            self,
            "cluster_name",
            "cluster-name",
            "The instance prefix for the cluster, passed to every load balancer and route call.",
        )
        s.string(
            self.route,
            "cluster_cidr",
            "cluster-cidr",
            "CIDR range for Pods in the cluster (one, or an IPv4 and an IPv6 range "
            "separated by a comma). Required when the route controller runs with "
            "--configure-cloud-routes=true.",
        )
        s.boolean(
            self,
            "allocate_node_cidrs",
            "allocate-node-cidrs",
            "Should CIDRs for Pods be allocated and set on the cloud provider. Not "
            "consulted by the cloud controllers (as upstream).",
        )
        s.string(
            self,
            "cidr_allocator_type",
            "cidr-allocator-type",
            f"Type of CIDR allocator to use. {IGNORED}",
        )
        s.boolean(
            self.route,
            "configure_cloud_routes",
            "configure-cloud-routes",
            "Should CIDRs allocated by allocate-node-cidrs be configured on the cloud provider.",
        )
        s.duration(
            self,
            "node_sync_period",
            "node-sync-period",
            f"Deprecated upstream and a no-op there too. {IGNORED}",
        )

    def validate(self) -> list[str]:
        errors: list[str] = []
        if not self.cloud_provider:
            errors.append("--cloud-provider cannot be empty")
        errors += positive("route-reconciliation-period", self.route.route_reconciliation_period)
        errors += positive("node-monitor-period", self.lifecycle.node_monitor_period)
        if not self.cluster_name:
            errors.append("--cluster-name cannot be empty")
        return errors + _cluster_cidr_errors(self.route.cluster_cidr)

    def apply_to(self, config: ManagerConfig) -> None:
        config.cloud_provider = self.cloud_provider
        config.cloud_config = self.cloud_config
        config.use_service_account_credentials = self.use_service_account_credentials
        config.cluster_name = self.cluster_name
        config.allocate_node_cidrs = self.allocate_node_cidrs
        config.allow_untagged_cloud = self.allow_untagged_cloud
        if self.use_service_account_credentials:
            config.warn(
                "--use-service-account-credentials=true is ignored (not supported yet): every "
                "controller uses the main credentials (--kubeconfig or the pod's service "
                "account)"
            )
        if self.external_cloud_volume_plugin:
            config.warn("--external-cloud-volume-plugin is ignored: no cloud controller uses it")
        if self.cidr_allocator_type != "RangeAllocator":
            config.warn("--cidr-allocator-type is ignored: kccm allocates no CIDRs")
        if self.node_sync_period:
            config.warn("--node-sync-period is ignored (a no-op upstream too)")


def _cluster_cidr_errors(cidr: str) -> list[str]:
    """A given --cluster-cidr must parse. A missing one is only an error once the provider
    turns out to support routes (upstream checks Routes() first): see app.manager."""
    if not cidr.strip():
        return []
    try:
        parse_cluster_cidrs(cidr)
    except ValueError as err:
        return [f"--cluster-cidr: {err}"]
    return []
