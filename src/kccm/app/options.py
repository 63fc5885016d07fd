"""``kccm`` flag groups: upstream's named flag sets, each a small dataclass.

Every group has ``add_flags(fs)`` (register its flags, upstream names and defaults),
``validate() -> list[str]`` (every problem, each message naming its flag) and
``apply_to(parts)`` (copy its values into the :class:`~kccm.app.config.ManagerConfig` under
construction). :class:`KccmOptions` holds all groups plus the checks that span groups
(controllers with cluster CIDR, provider with cloud config) and produces the config
(upstream ``CloudControllerManagerOptions.Config``).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

from kccm.app.config import (
    CONTROLLER_ALIASES,
    DEFAULT_CONTROLLERS,
    DISABLED_BY_DEFAULT,
    ConfigurationError,
    GateSettings,
    LeaderElectionSettings,
    LoggingSettings,
    ManagerConfig,
    ServingSettings,
)
from kccm.app.flags import Flag, FlagSet, go_quote
from kccm.cloudprovider.config import load_cloud_config
from kccm.cloudprovider.errors import CloudConfigError, CloudProviderInitError
from kccm.cloudprovider.gate import METHOD_GROUPS
from kccm.cloudprovider.registry import CloudProviderRegistry, default_registry, is_external
from kccm.controllers.node import DEFAULT_NODE_METADATA_REFRESH_PERIOD
from kccm.controllers.route import parse_cluster_cidrs
from kccm.runtime.tls import (
    CIPHER_SUITES,
    INSECURE_CIPHER_SUITES,
    NamedCertKey,
    cipher_suite_errors,
    curve_errors,
    load_certificates,
    min_version_errors,
)

DEFAULT_KUBE_API_QPS = 1000.0
"""kccm's --kube-api-qps (upstream 20, which caps a large cluster's node initialisation near
10 nodes/s; see docs/behaviour.md)."""
DEFAULT_KUBE_API_BURST = 2000

__all__ = [
    "ALIAS_TO_CONTROLLER",
    "CONTENT_TYPES",
    "KNOWN_FEATURE_GATES",
    "LOGGING_FORMATS",
    "AuthenticationOptions",
    "AuthorizationOptions",
    "ConfigParts",
    "ConfigurationError",
    "DebuggingOptions",
    "GateOptions",
    "GenericOptions",
    "GlobalOptions",
    "KccmOptions",
    "KubeCloudSharedOptions",
    "LeaderElectionOptions",
    "LeaderMigrationOptions",
    "LogsOptions",
    "MiscOptions",
    "NodeControllerOptions",
    "SecureServingOptions",
    "ServiceControllerOptions",
    "WebhookOptions",
    "controller_errors",
    "is_controller_enabled",
    "resolve_controllers",
]

ALIAS_TO_CONTROLLER: dict[str, str] = {alias: name for name, alias in CONTROLLER_ALIASES.items()}
ROUTE_CONTROLLER = "node-route-controller"
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
CONTENT_TYPES = (JSON, PROTOBUF)
LOGGING_FORMATS = ("text", "json")
# upstream's gates that a CCM command line may name; none changes kccm's behaviour (see docs)
KNOWN_FEATURE_GATES = frozenset(
    {
        "AllAlpha",
        "AllBeta",
        "CloudControllerManagerWatchBasedRoutesReconciliation",
        "CloudControllerManagerWebhook",
        "ControllerManagerReleaseLeaderElectionLockOnExit",
        "ComponentSLIs",
        "ContextualLogging",
        "LoggingAlphaOptions",
        "LoggingBetaOptions",
    }
)
IGNORED = "Accepted for compatibility; kccm ignores it."


@dataclass
class ConfigParts:
    """A :class:`ManagerConfig` under construction (groups fill it in ``apply_to``)."""

    fields: dict[str, Any] = field(default_factory=dict)
    leader_election: dict[str, Any] = field(default_factory=dict)
    serving: dict[str, Any] = field(default_factory=dict)
    logging: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def build(self) -> ManagerConfig:
        return ManagerConfig(
            **self.fields,
            warnings=tuple(self.warnings),
            leader_election=LeaderElectionSettings(**self.leader_election),
            serving=ServingSettings(**self.serving),
            logging=LoggingSettings(**self.logging),
            gate=GateSettings(**self.gate),
        )


# -- --controllers -------------------------------------------------------------------------------


def _canonical(entry: str) -> str:
    """Resolve an alias, keeping a leading ``-`` (upstream ApplyTo)."""
    negated = entry.startswith("-")
    name = entry[1:] if negated else entry
    name = ALIAS_TO_CONTROLLER.get(name, name)
    return "-" + name if negated else name


def controller_errors(entries: list[str]) -> list[str]:
    """Upstream Validate: every entry but ``*`` must name a known controller or alias."""
    errors = []
    for entry in entries:
        if entry == "*":
            continue
        name = entry.removeprefix("-")
        if ALIAS_TO_CONTROLLER.get(name, name) not in CONTROLLER_ALIASES:
            errors.append(
                f"--controllers: {go_quote(name)} is not in the list of known controllers "
                f"(known: {', '.join(sorted(CONTROLLER_ALIASES))}; aliases: "
                f"{', '.join(sorted(ALIAS_TO_CONTROLLER))})"
            )
    return errors


def is_controller_enabled(
    name: str, disabled_by_default: frozenset[str], entries: list[str]
) -> bool:
    """Upstream ``IsControllerEnabled``: the first explicit ``name``/``-name`` wins; otherwise
    a ``*`` enables every controller that is not disabled by default."""
    star = False
    for entry in entries:
        if entry == name:
            return True
        if entry == "-" + name:
            return False
        star = star or entry == "*"
    return star and name not in disabled_by_default


def resolve_controllers(entries: list[str]) -> frozenset[str]:
    """The canonical names of the controllers ``entries`` enables (aliases resolved)."""
    canonical = [_canonical(entry) for entry in entries]
    return frozenset(
        name
        for name in CONTROLLER_ALIASES
        if is_controller_enabled(name, DISABLED_BY_DEFAULT, canonical)
    )


# -- small checks --------------------------------------------------------------------------------


def _positive(flag: str, value: float) -> list[str]:
    return [] if value > 0 else [f"--{flag}: must be greater than zero, got {value:g}"]


def _not_negative(flag: str, value: float) -> list[str]:
    return [] if value >= 0 else [f"--{flag}: must not be negative, got {value:g}"]


def _port(flag: str, value: int) -> list[str]:
    if 0 <= value <= 65535:
        return []
    return [f"--{flag}: {value} must be between 0 and 65535, inclusive (0 disables)"]


def _ip(flag: str, value: str) -> list[str]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [f"--{flag}: {go_quote(value)} is not a valid IP address"]
    return []


def _ca_bundle(flag: str, path: str) -> list[str]:
    """A readable PEM file holding at least one certificate."""
    if not path:
        return []
    errors = _readable(flag, path)
    if errors:
        return errors
    try:
        with open(path, "rb") as stream:
            load_certificates(stream.read())
    except ValueError as err:
        return [f"--{flag}: {path} is not a PEM certificate bundle ({err})"]
    return []


def _no_blanks(flag: str, values: list[str]) -> list[str]:
    if any(not value.strip() for value in values):
        return [f"--{flag}: empty value in {_show(values)}"]
    return []


def _show(values: list[str]) -> str:
    return "[" + ",".join(values) + "]"


def _readable(flag: str, path: str) -> list[str]:
    if not path:
        return []
    try:
        with open(path, "rb") as stream:
            stream.read(1)
    except OSError as err:
        return [f"--{flag}: cannot read {path}: {err.strerror or err}"]
    return []


# -- the groups ----------------------------------------------------------------------------------


@dataclass
class KubeCloudSharedOptions:
    """Upstream ``KubeCloudSharedOptions`` (section "generic")."""

    cloud_provider: str = ""
    cloud_config: str = ""
    external_cloud_volume_plugin: str = ""
    use_service_account_credentials: bool = False
    allow_untagged_cloud: bool = False
    route_reconciliation_period: float = 10.0
    node_monitor_period: float = 5.0
    cluster_name: str = "kubernetes"
    cluster_cidr: str = ""
    allocate_node_cidrs: bool = False
    cidr_allocator_type: str = "RangeAllocator"
    configure_cloud_routes: bool = True
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
            self,
            "route_reconciliation_period",
            "route-reconciliation-period",
            "The period for reconciling routes created for Nodes by the cloud provider.",
        )
        s.duration(
            self,
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
            self,
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
            self,
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
        errors += _positive("route-reconciliation-period", self.route_reconciliation_period)
        errors += _positive("node-monitor-period", self.node_monitor_period)
        if not self.cluster_name:
            errors.append("--cluster-name cannot be empty")
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        parts.fields.update(
            cloud_provider=self.cloud_provider,
            cloud_config=self.cloud_config,
            use_service_account_credentials=self.use_service_account_credentials,
            route_reconciliation_period=self.route_reconciliation_period,
            node_monitor_period=self.node_monitor_period,
            cluster_name=self.cluster_name,
            cluster_cidr=self.cluster_cidr,
            allocate_node_cidrs=self.allocate_node_cidrs,
            configure_cloud_routes=self.configure_cloud_routes,
            allow_untagged_cloud=self.allow_untagged_cloud,
        )
        if self.use_service_account_credentials:
            parts.warnings.append(
                "--use-service-account-credentials=true is ignored (not supported yet): every "
                "controller uses the main credentials (--kubeconfig or the pod's service "
                "account)"
            )
        if self.external_cloud_volume_plugin:
            parts.warnings.append(
                "--external-cloud-volume-plugin is ignored: no cloud controller uses it"
            )
        if self.cidr_allocator_type != "RangeAllocator":
            parts.warnings.append("--cidr-allocator-type is ignored: kccm allocates no CIDRs")
        if self.node_sync_period:
            parts.warnings.append("--node-sync-period is ignored (a no-op upstream too)")


@dataclass
class GenericOptions:
    """Upstream ``GenericControllerManagerConfigurationOptions`` (section "generic")."""

    controllers: list[str] = field(default_factory=lambda: list(DEFAULT_CONTROLLERS))
    min_resync_period: float = 12 * 3600.0
    kube_api_content_type: str = JSON
    kube_api_qps: float = DEFAULT_KUBE_API_QPS
    kube_api_burst: int = DEFAULT_KUBE_API_BURST
    controller_start_interval: float = 0.0
    feature_gates: dict[str, bool] = field(default_factory=dict)
    shutdown_grace_period: float = 30.0

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("generic")
        known = ", ".join(sorted(CONTROLLER_ALIASES))
        s.strings(
            self,
            "controllers",
            "controllers",
            "A list of controllers to enable. '*' enables all on-by-default controllers, "
            "'foo' enables the controller named 'foo', '-foo' disables it; the first "
            "entry naming a controller wins. Aliases (cloud-node, cloud-node-lifecycle, "
            f"service, route, pv-label) are accepted. All controllers: {known}. "
            "Disabled-by-default controllers: pv-label-controller.",
        )
        s.duration(
            self,
            "min_resync_period",
            "min-resync-period",
            "The resync period in reflectors. kccm's informers never resync (each "
            f"controller has its own periodic loop). {IGNORED}",
        )
        s.string(
            self,
            "kube_api_content_type",
            "kube-api-content-type",
            "Content type of requests sent to the apiserver. application/json and "
            "application/vnd.kubernetes.protobuf are accepted; kccm always speaks JSON "
            "(upstream default: protobuf).",
        )
        s.number(
            self,
            "kube_api_qps",
            "kube-api-qps",
            "QPS to use while talking with the kubernetes apiserver (each controller's "
            "client has its own limiter; kccm default 1000, upstream 20: the apiserver's "
            "priority and fairness protects it, and answers carrying Retry-After are retried "
            "as client-go does).",
        )
        s.integer(
            self,
            "kube_api_burst",
            "kube-api-burst",
            "Burst to use while talking with the kubernetes apiserver (kccm default 2000, "
            "upstream 30).",
        )
        s.duration(
            self,
            "controller_start_interval",
            "controller-start-interval",
            f"Interval between starting controller managers. {IGNORED}",
        )
        s.map_bool(
            self,
            "feature_gates",
            "feature-gates",
            "A set of key=value pairs for alpha/experimental features. Accepted gates: "
            f"{', '.join(sorted(KNOWN_FEATURE_GATES))}. None of them changes kccm's "
            "behaviour: the route controller is always event-driven with a periodic "
            "safety reconcile, kccm serves no webhooks, and the lease is always "
            "released on a graceful exit.",
        )
        s.duration(
            self,
            "shutdown_grace_period",
            "shutdown-grace-period",
            "kccm: on SIGTERM/SIGINT, how long in-flight syncs (and a cloud provider's "
            "initialize) may take to finish before the process exits. Provider calls still "
            "running then are abandoned; if the orderly stop itself overruns by more than "
            "5s, the process exits with status 1 whatever the provider does.",
        )

    def validate(self) -> list[str]:
        errors = controller_errors(self.controllers)
        if self.kube_api_content_type not in CONTENT_TYPES:
            errors.append(
                f"--kube-api-content-type: {go_quote(self.kube_api_content_type)} is not "
                f"supported (use {JSON} or {PROTOBUF})"
            )
        errors += _not_negative("kube-api-qps", self.kube_api_qps)
        errors += _not_negative("kube-api-burst", self.kube_api_burst)
        errors += _not_negative("shutdown-grace-period", self.shutdown_grace_period)
        errors += [
            f"--feature-gates: unrecognized feature gate: {name}"
            for name in sorted(self.feature_gates)
            if name not in KNOWN_FEATURE_GATES
        ]
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        parts.fields.update(
            controllers=resolve_controllers(self.controllers),
            kube_api_content_type=JSON,
            kube_api_qps=self.kube_api_qps,
            kube_api_burst=self.kube_api_burst,
            shutdown_grace=self.shutdown_grace_period,
            feature_gates=dict(self.feature_gates),
        )
        if self.min_resync_period != 12 * 3600.0:
            parts.warnings.append(
                "--min-resync-period is ignored: kccm's informers never resync (each "
                "controller has its own periodic loop)"
            )
        if self.controller_start_interval:
            parts.warnings.append(
                "--controller-start-interval is ignored: kccm starts its controllers together"
            )


@dataclass
class LeaderElectionOptions:
    """Upstream ``LeaderElectionConfiguration`` flags (section "generic")."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "cloud-controller-manager"
    resource_namespace: str = "kube-system"

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("generic")
        s.boolean(
            self,
            "leader_elect",
            "leader-elect",
            "Start a leader election client and gain leadership before executing the "
            "main loop. Enable this when running replicated components for high "
            "availability.",
        )
        s.duration(
            self,
            "lease_duration",
            "leader-elect-lease-duration",
            "The duration that non-leader candidates will wait after observing a "
            "leadership renewal until attempting to acquire leadership.",
        )
        s.duration(
            self,
            "renew_deadline",
            "leader-elect-renew-deadline",
            "The interval between attempts by the acting leader to renew a leadership "
            "slot before it stops leading. Must be less than the lease "
            "duration.",
        )
        s.duration(
            self,
            "retry_period",
            "leader-elect-retry-period",
            "The duration the clients should wait between attempting acquisition and "
            "renewal of a leadership.",
        )
        s.string(
            self,
            "resource_lock",
            "leader-elect-resource-lock",
            "The type of resource object that is used for locking during leader "
            "election. Only 'leases' is supported.",
        )
        s.string(
            self,
            "resource_name",
            "leader-elect-resource-name",
            "The name of resource object that is used for locking during leader election.",
        )
        s.string(
            self,
            "resource_namespace",
            "leader-elect-resource-namespace",
            "The namespace of resource object that is used for locking during leader election.",
        )

    def validate(self) -> list[str]:
        if not self.leader_elect:
            return []
        errors: list[str] = []
        if self.resource_lock != "leases":
            errors.append(
                f"--leader-elect-resource-lock: must be {go_quote('leases')} when "
                f"--leader-elect is true, got {go_quote(self.resource_lock)}"
            )
        errors += _positive("leader-elect-retry-period", self.retry_period)
        if self.lease_duration <= self.renew_deadline:
            errors.append(
                "--leader-elect-lease-duration: must be greater than "
                f"--leader-elect-renew-deadline ({self.lease_duration:g}s <= "
                f"{self.renew_deadline:g}s)"
            )
        if self.renew_deadline <= 1.2 * self.retry_period:
            errors.append(
                "--leader-elect-renew-deadline: must be greater than 1.2 x "
                f"--leader-elect-retry-period ({self.renew_deadline:g}s <= "
                f"{1.2 * self.retry_period:g}s)"
            )
        for flag, value in (
            ("leader-elect-resource-name", self.resource_name),
            ("leader-elect-resource-namespace", self.resource_namespace),
        ):
            if not value:
                errors.append(f"--{flag} cannot be empty when --leader-elect is true")
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        parts.leader_election.update(
            enabled=self.leader_elect,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            resource_lock=self.resource_lock,
            resource_name=self.resource_name,
            resource_namespace=self.resource_namespace,
        )


@dataclass
class NodeControllerOptions:
    """Section "cloud-node-controller"."""

    concurrent_node_syncs: int = 32
    concurrent_node_status_updates: int = 0

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("cloud-node-controller")
        s.integer(
            self,
            "concurrent_node_syncs",
            "concurrent-node-syncs",
            "Number of workers concurrently synchronizing nodes (kccm default 32; upstream 1).",
        )
        s.integer(
            self,
            "concurrent_node_status_updates",
            "concurrent-node-status-updates",
            "Number of workers concurrently updating node statuses; 0 means use "
            "--concurrent-node-syncs.",
        )

    def validate(self) -> list[str]:
        errors = _positive("concurrent-node-syncs", self.concurrent_node_syncs)
        return errors + _not_negative(
            "concurrent-node-status-updates", self.concurrent_node_status_updates
        )

    def apply_to(self, parts: ConfigParts) -> None:
        parts.fields.update(
            concurrent_node_syncs=self.concurrent_node_syncs,
            concurrent_node_status_updates=self.concurrent_node_status_updates,
        )


@dataclass
class ServiceControllerOptions:
    """Section "service-lb-controller"."""

    concurrent_service_syncs: int = 10
    reuse_unchanged_load_balancers: bool = True
    _reuse_flag: Flag | None = field(default=None, init=False, repr=False, compare=False)

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("service-lb-controller")
        s.integer(
            self,
            "concurrent_service_syncs",
            "concurrent-service-syncs",
            "The number of services that are allowed to sync concurrently (kccm "
            "default 10; upstream 1). Larger number = more responsive service "
            "management, but more CPU and cloud API load.",
        )
        self._reuse_flag = s.boolean(
            self,
            "reuse_unchanged_load_balancers",
            "reuse-unchanged-load-balancers",
            "DEPRECATED, no effect: kccm ensures every load balancer on start as upstream "
            "does; the providers' read-compare-write makes an unchanged one cost reads only. "
            f"{IGNORED}",
        )

    def validate(self) -> list[str]:
        return _positive("concurrent-service-syncs", self.concurrent_service_syncs)

    def apply_to(self, parts: ConfigParts) -> None:
        parts.fields["concurrent_service_syncs"] = self.concurrent_service_syncs
        if self._reuse_flag is not None and self._reuse_flag.changed:
            parts.warnings.append(
                "--reuse-unchanged-load-balancers is deprecated and ignored: every load "
                "balancer is ensured on start, as upstream, and providers write only what "
                "differs from the cloud"
            )


@dataclass
class DebuggingOptions:
    """Section "debugging": accepted, ignored (kccm serves no /debug/pprof)."""

    profiling: bool = True
    contention_profiling: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("debugging")
        s.boolean(
            self,
            "profiling",
            "profiling",
            "Enable profiling via web interface host:port/debug/pprof/. kccm serves no "
            f"pprof endpoints. {IGNORED}",
        )
        s.boolean(
            self,
            "contention_profiling",
            "contention-profiling",
            f"Enable block profiling, if profiling is enabled. {IGNORED}",
        )

    def validate(self) -> list[str]:
        return []

    def apply_to(self, parts: ConfigParts) -> None:
        if self.contention_profiling:
            parts.warnings.append(
                "--contention-profiling is ignored: kccm serves no /debug/pprof endpoints"
            )


@dataclass
class LeaderMigrationOptions:
    """Section "leader-migration": kccm does not implement leader migration."""

    enable_leader_migration: bool = False
    leader_migration_config: str = ""

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("leader-migration")
        s.boolean(
            self,
            "enable_leader_migration",
            "enable-leader-migration",
            "Whether to enable controller leader migration (moving cloud loops out of "
            "kube-controller-manager). Not supported by kccm: true is "
            "rejected.",
        )
        s.string(
            self,
            "leader_migration_config",
            "leader-migration-config",
            "Path to the config file for controller leader migration. Only read when "
            f"--enable-leader-migration is true. {IGNORED}",
        )

    def validate(self) -> list[str]:
        if not self.enable_leader_migration:
            return []
        return [
            "--enable-leader-migration: kccm does not implement leader migration; finish the "
            "migration with upstream's cloud-controller-manager first"
        ]

    def apply_to(self, parts: ConfigParts) -> None:
        if self.leader_migration_config:
            parts.warnings.append(
                "--leader-migration-config is ignored: it is only read with "
                "--enable-leader-migration, which kccm does not support"
            )


@dataclass
class SecureServingOptions:
    """Section "secure serving"."""

    bind_address: str = "0.0.0.0"
    secure_port: int = 10258
    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    tls_min_version: str = ""
    tls_cipher_suites: list[str] = field(default_factory=list)
    tls_curve_preferences: list[int] = field(default_factory=list)
    tls_sni_cert_key: list[str] = field(default_factory=list)
    http2_max_streams_per_connection: int = 0
    disable_http2_serving: bool = False
    permit_port_sharing: bool = False
    permit_address_sharing: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("secure serving")
        s.string(
            self,
            "tls_min_version",
            "tls-min-version",
            "Minimum TLS version supported. Possible values: VersionTLS10, VersionTLS11, "
            "VersionTLS12, VersionTLS13. Empty: TLS 1.2.",
        )
        s.strings(
            self,
            "tls_cipher_suites",
            "tls-cipher-suites",
            "Comma-separated list of cipher suites for the server (TLS 1.2 and older; TLS "
            "1.3 suites are not configurable, as in Go). Empty: OpenSSL's defaults. "
            f"Preferred values: {', '.join(CIPHER_SUITES)}. Insecure values: "
            f"{', '.join(INSECURE_CIPHER_SUITES)}.",
        )
        s.int_list(
            self,
            "tls_curve_preferences",
            "tls-curve-preferences",
            "Comma-separated list of numeric Go crypto/tls CurveID values (23, 24, 25, 29, "
            "4588). Checked, then ignored: kccm uses OpenSSL's key-exchange group order.",
        )
        s.repeated(
            self,
            "tls_sni_cert_key",
            "tls-sni-cert-key",
            "A pair of x509 certificate and private key file paths, optionally suffixed "
            'with a list of domain patterns, e.g. "example.crt,example.key:*.foo.com". '
            "Without patterns, the certificate's DNS names (or CN) are used. A client asking "
            "for a matching server name gets this pair; others get the default certificate. "
            "The flag may be given several times.",
            type_name="namedCertKey",
        )
        s.integer(
            self,
            "http2_max_streams_per_connection",
            "http2-max-streams-per-connection",
            "The limit that the server gives to clients for the maximum number of streams "
            "in an HTTP/2 connection. Ignored: kccm serves HTTP/1.1 only.",
            type_name="int",
        )
        s.boolean(
            self,
            "disable_http2_serving",
            "disable-http2-serving",
            "If true, HTTP2 serving will be disabled. kccm never serves HTTP/2, so this "
            "is always in effect.",
        )
        s.boolean(
            self,
            "permit_port_sharing",
            "permit-port-sharing",
            "If true, SO_REUSEPORT will be used when binding the port, which allows more "
            "than one instance to bind on the same address and port.",
        )
        s.boolean(
            self,
            "permit_address_sharing",
            "permit-address-sharing",
            "If true, SO_REUSEADDR will be used when binding the port (on Unix it always "
            "is, as Go does).",
        )
        s.string(
            self,
            "bind_address",
            "bind-address",
            "The IP address on which to listen for the --secure-port port.",
        )
        s.integer(
            self,
            "secure_port",
            "secure-port",
            "The port on which to serve HTTPS with authentication and authorization. "
            "If 0, don't serve HTTPS at all.",
            type_name="int",
        )
        s.string(
            self,
            "cert_dir",
            "cert-dir",
            "The directory where the TLS certs are located. Ignored if --tls-cert-file "
            "and --tls-private-key-file are provided; when all are empty a self-signed "
            "certificate is generated in memory.",
        )
        s.string(
            self,
            "tls_cert_file",
            "tls-cert-file",
            "File containing the default x509 certificate for HTTPS (CA cert, if any, "
            "concatenated after server cert).",
        )
        s.string(
            self,
            "tls_private_key_file",
            "tls-private-key-file",
            "File containing the default x509 private key matching --tls-cert-file.",
        )

    def validate(self) -> list[str]:
        errors = _port("secure-port", self.secure_port) + _ip("bind-address", self.bind_address)
        if bool(self.tls_cert_file) != bool(self.tls_private_key_file):
            errors.append("--tls-cert-file and --tls-private-key-file must be given together")
        errors += _readable("tls-cert-file", self.tls_cert_file)
        errors += _readable("tls-private-key-file", self.tls_private_key_file)
        errors += min_version_errors("tls-min-version", self.tls_min_version)
        errors += cipher_suite_errors("tls-cipher-suites", self.tls_cipher_suites)
        errors += curve_errors("tls-curve-preferences", self.tls_curve_preferences)
        errors += _not_negative(
            "http2-max-streams-per-connection", self.http2_max_streams_per_connection
        )
        return errors + sni_errors("tls-sni-cert-key", self.tls_sni_cert_key)

    def apply_to(self, parts: ConfigParts) -> None:
        parts.serving.update(
            bind_address=self.bind_address,
            secure_port=self.secure_port,
            cert_dir=self.cert_dir,
            tls_cert_file=self.tls_cert_file,
            tls_private_key_file=self.tls_private_key_file,
            tls_min_version=self.tls_min_version,
            tls_cipher_suites=tuple(self.tls_cipher_suites),
            tls_sni_cert_key=tuple(self.tls_sni_cert_key),
            permit_port_sharing=self.permit_port_sharing,
            permit_address_sharing=self.permit_address_sharing,
        )
        if self.tls_curve_preferences:
            parts.warnings.append(
                "--tls-curve-preferences is ignored: kccm uses OpenSSL's key-exchange groups"
            )
        if self.http2_max_streams_per_connection:
            parts.warnings.append(
                "--http2-max-streams-per-connection is ignored: kccm serves HTTP/1.1 only"
            )


def sni_errors(flag: str, entries: list[str]) -> list[str]:
    """``cert,key[:name,...]`` entries with readable files (cliflag NamedCertKey syntax)."""
    errors: list[str] = []
    for entry in entries:
        try:
            pair = NamedCertKey.parse(entry)
        except ValueError as err:
            errors.append(f"--{flag}: {err}")
            continue
        errors += _readable(flag, pair.cert_file) + _readable(flag, pair.key_file)
    return errors


@dataclass
class AuthenticationOptions:
    """Section "authentication" (delegated: TokenReview)."""

    authentication_kubeconfig: str = ""
    authentication_skip_lookup: bool = False
    token_webhook_cache_ttl: float = 10.0
    tolerate_lookup_failure: bool = False
    client_ca_file: str = ""
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: list[str] = field(default_factory=list)
    requestheader_username_headers: list[str] = field(default_factory=lambda: ["x-remote-user"])
    requestheader_uid_headers: list[str] = field(default_factory=list)
    requestheader_group_headers: list[str] = field(default_factory=lambda: ["x-remote-group"])
    requestheader_extra_headers_prefix: list[str] = field(
        default_factory=lambda: ["x-remote-extra-"]
    )

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("authentication")
        s.duration(
            self,
            "token_webhook_cache_ttl",
            "authentication-token-webhook-cache-ttl",
            "The duration to cache responses from the webhook token authenticator.",
        )
        s.boolean(
            self,
            "tolerate_lookup_failure",
            "authentication-tolerate-lookup-failure",
            "If true, failures to look up missing authentication configuration from the "
            "cluster are not considered fatal. Note that this can result in authentication "
            "that treats all requests as anonymous.",
        )
        s.string(
            self,
            "client_ca_file",
            "client-ca-file",
            "If set, any request presenting a client certificate signed by one of the "
            "authorities in the client-ca-file is authenticated with an identity "
            "corresponding to the CommonName of the client certificate.",
        )
        s.string(
            self,
            "requestheader_client_ca_file",
            "requestheader-client-ca-file",
            "Root certificate bundle to use to verify client certificates on incoming "
            "requests before trusting usernames in headers specified by "
            "--requestheader-username-headers.",
        )
        s.strings(
            self,
            "requestheader_allowed_names",
            "requestheader-allowed-names",
            "List of client certificate common names to allow to provide usernames in "
            "headers specified by --requestheader-username-headers. If empty, any client "
            "certificate validated by the authorities in --requestheader-client-ca-file "
            "is allowed.",
        )
        s.strings(
            self,
            "requestheader_username_headers",
            "requestheader-username-headers",
            "List of request headers to inspect for usernames. X-Remote-User is common.",
        )
        s.strings(
            self,
            "requestheader_uid_headers",
            "requestheader-uid-headers",
            "List of request headers to inspect for UIDs. X-Remote-Uid is suggested.",
        )
        s.strings(
            self,
            "requestheader_group_headers",
            "requestheader-group-headers",
            "List of request headers to inspect for groups. X-Remote-Group is suggested.",
        )
        s.strings(
            self,
            "requestheader_extra_headers_prefix",
            "requestheader-extra-headers-prefix",
            "List of request header prefixes to inspect. X-Remote-Extra- is suggested.",
        )
        s.string(
            self,
            "authentication_kubeconfig",
            "authentication-kubeconfig",
            "kubeconfig file pointing at the 'core' kubernetes server with enough rights "
            "to create tokenreviews.authentication.k8s.io. Optional: the main client "
            "is used when empty.",
        )
        s.boolean(
            self,
            "authentication_skip_lookup",
            "authentication-skip-lookup",
            "If false, the authentication-kubeconfig will be used to lookup missing "
            "authentication configuration from the cluster.",
        )

    def validate(self) -> list[str]:
        errors = _readable("authentication-kubeconfig", self.authentication_kubeconfig)
        errors += _not_negative(
            "authentication-token-webhook-cache-ttl", self.token_webhook_cache_ttl
        )
        errors += _ca_bundle("client-ca-file", self.client_ca_file)
        errors += _ca_bundle("requestheader-client-ca-file", self.requestheader_client_ca_file)
        for flag, values in (
            ("requestheader-username-headers", self.requestheader_username_headers),
            ("requestheader-uid-headers", self.requestheader_uid_headers),
            ("requestheader-group-headers", self.requestheader_group_headers),
            ("requestheader-extra-headers-prefix", self.requestheader_extra_headers_prefix),
            ("requestheader-allowed-names", self.requestheader_allowed_names),
        ):
            errors += _no_blanks(flag, values)
        uids = [value.lower() for value in self.requestheader_uid_headers]
        if uids and "x-remote-uid" not in uids:
            errors.append(
                "--requestheader-uid-headers is set without specifying the standard "
                "X-Remote-Uid header - API aggregation will not work"
            )
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        parts.serving.update(
            authentication_kubeconfig=self.authentication_kubeconfig,
            authentication_skip_lookup=self.authentication_skip_lookup,
            authentication_tolerate_lookup_failure=self.tolerate_lookup_failure,
            token_cache_ttl=self.token_webhook_cache_ttl,
            client_ca_file=self.client_ca_file,
            requestheader_client_ca_file=self.requestheader_client_ca_file,
            requestheader_allowed_names=tuple(self.requestheader_allowed_names),
            requestheader_username_headers=tuple(self.requestheader_username_headers),
            requestheader_uid_headers=tuple(self.requestheader_uid_headers),
            requestheader_group_headers=tuple(self.requestheader_group_headers),
            requestheader_extra_headers_prefix=tuple(self.requestheader_extra_headers_prefix),
        )


@dataclass
class AuthorizationOptions:
    """Section "authorization" (delegated: SubjectAccessReview)."""

    authorization_kubeconfig: str = ""
    always_allow_paths: list[str] = field(default_factory=lambda: ["/healthz", "/readyz", "/livez"])
    authorized_ttl: float = 10.0
    unauthorized_ttl: float = 10.0

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("authorization")
        s.duration(
            self,
            "authorized_ttl",
            "authorization-webhook-cache-authorized-ttl",
            "The duration to cache 'authorized' responses from the webhook authorizer.",
        )
        s.duration(
            self,
            "unauthorized_ttl",
            "authorization-webhook-cache-unauthorized-ttl",
            "The duration to cache 'unauthorized' responses from the webhook authorizer.",
        )
        s.string(
            self,
            "authorization_kubeconfig",
            "authorization-kubeconfig",
            "kubeconfig file pointing at the 'core' kubernetes server with enough rights "
            "to create subjectaccessreviews.authorization.k8s.io. Optional: the main "
            "client is used when empty.",
        )
        s.strings(
            self,
            "always_allow_paths",
            "authorization-always-allow-paths",
            "A list of HTTP paths to skip during authorization, i.e. these are "
            "authorized without contacting the 'core' kubernetes server. An entry ending "
            "in '*' is a prefix. kccm skips authentication for them too, and an allowed "
            "health endpoint covers its per-check paths (/healthz/<check>).",
        )

    def validate(self) -> list[str]:
        errors = _readable("authorization-kubeconfig", self.authorization_kubeconfig)
        errors += _not_negative("authorization-webhook-cache-authorized-ttl", self.authorized_ttl)
        errors += _not_negative(
            "authorization-webhook-cache-unauthorized-ttl", self.unauthorized_ttl
        )
        for path in self.always_allow_paths:
            if not path.startswith("/"):
                errors.append(
                    f"--authorization-always-allow-paths: {go_quote(path)} must start with '/'"
                )
            elif "*" in path[:-1]:
                errors.append(
                    f"--authorization-always-allow-paths: only a trailing '*' is allowed in "
                    f"{go_quote(path)}"
                )
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        parts.serving.update(
            authorization_kubeconfig=self.authorization_kubeconfig,
            always_allow_paths=tuple(self.always_allow_paths),
            authorized_cache_ttl=self.authorized_ttl,
            unauthorized_cache_ttl=self.unauthorized_ttl,
        )


@dataclass
class WebhookOptions:
    """Sections "webhook" and "webhook serving": kccm has no webhooks (like upstream's
    ``NewCloudControllerManagerCommand``), so only an empty list or ``*`` is valid."""

    webhooks: list[str] = field(default_factory=list)
    webhook_bind_address: str = "0.0.0.0"
    webhook_secure_port: int = 10260
    webhook_cert_dir: str = ""
    webhook_tls_cert_file: str = ""
    webhook_tls_private_key_file: str = ""
    webhook_tls_min_version: str = ""
    webhook_tls_cipher_suites: list[str] = field(default_factory=list)
    webhook_tls_curve_preferences: list[int] = field(default_factory=list)
    webhook_tls_sni_cert_key: list[str] = field(default_factory=list)
    webhook_disable_http2_serving: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("webhook")
        s.strings(
            self,
            "webhooks",
            "webhooks",
            "A list of webhooks to enable ('*', 'foo', '-foo'). kccm has no webhooks, "
            "so only '*' or an empty list is valid.",
        )
        s = fs.section("webhook serving")
        s.string(
            self,
            "webhook_bind_address",
            "webhook-bind-address",
            f"The IP address on which to listen for the --webhook-secure-port port. {IGNORED}",
        )
        s.integer(
            self,
            "webhook_secure_port",
            "webhook-secure-port",
            "Secure port to serve cloud provider webhooks. kccm serves none; the value "
            "is only checked.",
            type_name="int",
        )
        unused = "Checked, then ignored: kccm serves no webhooks."
        s.string(
            self, "webhook_cert_dir", "webhook-cert-dir", f"Webhook certificate directory. {unused}"
        )
        s.string(
            self,
            "webhook_tls_cert_file",
            "webhook-tls-cert-file",
            f"x509 certificate file for the webhook server. {unused}",
        )
        s.string(
            self,
            "webhook_tls_private_key_file",
            "webhook-tls-private-key-file",
            f"Private key file matching --webhook-tls-cert-file. {unused}",
        )
        s.string(
            self,
            "webhook_tls_min_version",
            "webhook-tls-min-version",
            f"Minimum TLS version of the webhook server. {unused}",
        )
        s.strings(
            self,
            "webhook_tls_cipher_suites",
            "webhook-tls-cipher-suites",
            f"Cipher suites of the webhook server. {unused}",
        )
        s.int_list(
            self,
            "webhook_tls_curve_preferences",
            "webhook-tls-curve-preferences",
            f"Curve IDs of the webhook server. {unused}",
        )
        s.repeated(
            self,
            "webhook_tls_sni_cert_key",
            "webhook-tls-sni-cert-key",
            f"SNI certificate/key pairs of the webhook server. {unused}",
            type_name="namedCertKey",
        )
        s.boolean(
            self,
            "webhook_disable_http2_serving",
            "webhook-disable-http2-serving",
            f"Disable HTTP/2 on the webhook server. {unused}",
        )

    def validate(self, secure_port: int = 0) -> list[str]:
        errors = [
            f"--webhooks: {go_quote(entry.removeprefix('-'))} is not in the list of known "
            "webhooks (kccm has none)"
            for entry in self.webhooks
            if entry != "*"
        ]
        errors += _port("webhook-secure-port", self.webhook_secure_port)
        errors += _ip("webhook-bind-address", self.webhook_bind_address)
        if self.webhook_secure_port and self.webhook_secure_port == secure_port:
            errors.append("--webhook-secure-port: must differ from --secure-port")
        if bool(self.webhook_tls_cert_file) != bool(self.webhook_tls_private_key_file):
            errors.append(
                "--webhook-tls-cert-file and --webhook-tls-private-key-file must be given together"
            )
        errors += _readable("webhook-tls-cert-file", self.webhook_tls_cert_file)
        errors += _readable("webhook-tls-private-key-file", self.webhook_tls_private_key_file)
        errors += min_version_errors("webhook-tls-min-version", self.webhook_tls_min_version)
        errors += cipher_suite_errors("webhook-tls-cipher-suites", self.webhook_tls_cipher_suites)
        errors += curve_errors("webhook-tls-curve-preferences", self.webhook_tls_curve_preferences)
        return errors + sni_errors("webhook-tls-sni-cert-key", self.webhook_tls_sni_cert_key)

    def apply_to(self, parts: ConfigParts) -> None:
        return None


@dataclass
class MiscOptions:
    """Section "misc"."""

    master: str = ""
    kubeconfig: str = ""
    node_status_update_frequency: float = 300.0
    node_metadata_refresh_period: float = DEFAULT_NODE_METADATA_REFRESH_PERIOD

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("misc")
        s.string(
            self,
            "master",
            "master",
            "The address of the Kubernetes API server (overrides any value in kubeconfig).",
        )
        s.string(
            self,
            "kubeconfig",
            "kubeconfig",
            "Path to kubeconfig file with authorization and master location "
            "information. Empty: in-cluster configuration.",
        )
        s.duration(
            self,
            "node_status_update_frequency",
            "node-status-update-frequency",
            "Specifies how often the controller updates nodes' status.",
        )
        s.duration(
            self,
            "node_metadata_refresh_period",
            "node-metadata-refresh-period",
            "kccm, opt-in: the least time between two periodic cloud metadata reads of one "
            "initialised node, the reads spread evenly over it (fewer calls for providers "
            "without list_instance_metadata; a changed address then takes up to this long to "
            "reach the Node). 0 (default): every node at start and at every "
            "--node-status-update-frequency tick, as upstream; providers with "
            "list_instance_metadata answer each tick for all nodes in one call.",
        )

    def validate(self) -> list[str]:
        errors = _readable("kubeconfig", self.kubeconfig)
        errors += _not_negative("node-metadata-refresh-period", self.node_metadata_refresh_period)
        return errors + _positive("node-status-update-frequency", self.node_status_update_frequency)

    def apply_to(self, parts: ConfigParts) -> None:
        parts.fields.update(
            master=self.master,
            kubeconfig=self.kubeconfig,
            node_status_update_frequency=self.node_status_update_frequency,
            node_metadata_refresh_period=self.node_metadata_refresh_period,
        )


@dataclass
class LogsOptions:
    """Section "logs" (component-base logging flags kccm supports)."""

    verbosity: int = 0
    logging_format: str = "text"
    log_flush_frequency: float = 5.0
    vmodule: str = ""
    text_split_stream: bool = False
    text_info_buffer_size: str = "0"
    json_split_stream: bool = False
    json_info_buffer_size: str = "0"

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("logs")
        s.integer(self, "verbosity", "v", "number for the log level verbosity", type_name="Level")
        fs.set_shorthand("v", "v")
        s.string(
            self,
            "logging_format",
            "logging-format",
            'Sets the log format. Permitted formats: "json", "text".',
        )
        s.duration(
            self,
            "log_flush_frequency",
            "log-flush-frequency",
            f"Maximum number of seconds between log flushes. {IGNORED}",
        )
        s.string(
            self,
            "vmodule",
            "vmodule",
            "comma-separated list of pattern=N settings for file-filtered logging. A "
            "pattern matches a source file's name without its extension (glob syntax); "
            "kccm applies it to both log formats.",
        )
        s.boolean(
            self,
            "text_split_stream",
            "log-text-split-stream",
            "[Alpha] In text format, write error messages to stderr and info messages to "
            "stdout. The default is to write a single stream to stderr. Enable the "
            "LoggingAlphaOptions feature gate to use this.",
        )
        s.string(
            self,
            "text_info_buffer_size",
            "log-text-info-buffer-size",
            "[Alpha] In text format with split output streams, the info messages can be "
            "buffered for a while. Checked, then ignored: kccm's log handler does not buffer. "
            "Enable the LoggingAlphaOptions feature gate to use this.",
        )
        s.boolean(
            self,
            "json_split_stream",
            "log-json-split-stream",
            "[Alpha] In JSON format, write error messages to stderr and info messages to "
            "stdout. Enable the LoggingAlphaOptions feature gate to use this.",
        )
        s.string(
            self,
            "json_info_buffer_size",
            "log-json-info-buffer-size",
            "[Alpha] In JSON format with split output streams, the info messages can be "
            "buffered for a while. Checked, then ignored: kccm's log handler does not buffer. "
            "Enable the LoggingAlphaOptions feature gate to use this.",
        )

    def validate(self, feature_gates: dict[str, bool] | None = None) -> list[str]:
        errors = _not_negative("v", self.verbosity)
        if self.logging_format not in LOGGING_FORMATS:
            errors.append(
                f"--logging-format: format {go_quote(self.logging_format)} is not registered "
                f"(permitted: {', '.join(LOGGING_FORMATS)})"
            )
        try:
            parse_vmodule(self.vmodule)
        except ValueError as err:
            errors.append(f"--vmodule: {err}")
        gates = feature_gates or {}
        alpha = gates.get("LoggingAlphaOptions", gates.get("AllAlpha", False))
        for flag, value in (
            ("log-text-info-buffer-size", self.text_info_buffer_size),
            ("log-json-info-buffer-size", self.json_info_buffer_size),
        ):
            try:
                size = parse_quantity(value)
            except ValueError as err:
                errors.append(f"--{flag}: {err}")
                continue
            if size and not alpha:
                errors.append(f"--{flag}: Forbidden: Feature LoggingAlphaOptions is disabled")
        for flag, on in (
            ("log-text-split-stream", self.text_split_stream),
            ("log-json-split-stream", self.json_split_stream),
        ):
            if on and not alpha:
                errors.append(f"--{flag}: Forbidden: Feature LoggingAlphaOptions is disabled")
        return errors

    def apply_to(self, parts: ConfigParts) -> None:
        split = self.json_split_stream if self.logging_format == "json" else self.text_split_stream
        parts.logging.update(
            verbosity=self.verbosity,
            format=self.logging_format,
            vmodule=parse_vmodule(self.vmodule),
            split_stream=split,
        )
        if self.log_flush_frequency != 5.0:
            parts.warnings.append(
                "--log-flush-frequency is ignored: kccm's log handler does not buffer"
            )
        if parse_quantity(self.text_info_buffer_size) or parse_quantity(self.json_info_buffer_size):
            parts.warnings.append(
                "--log-*-info-buffer-size is ignored: kccm's log handler does not buffer"
            )


_QUANTITY = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?")
_QUANTITY_SCALE = {
    None: 1,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "E": 1000**6,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
}


def parse_quantity(text: str) -> int:
    """A byte count as component-base accepts it: ``512``, ``1K``, ``2Ki``, ``5Mi``..."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{go_quote(text)} is not a quantity (e.g. 512, 1K, 2Ki, 5Mi)")
    return int(match.group(1)) * _QUANTITY_SCALE[match.group(2)]


def parse_vmodule(text: str) -> tuple[tuple[str, int], ...]:
    """klog ``--vmodule``: ``pattern=N,pattern2=M`` (N a non-negative integer)."""
    out: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        pattern, sep, level = item.partition("=")
        if not sep or not pattern or not level.isdigit():
            raise ValueError(f"{go_quote(item)} is not of the form pattern=N")
        out.append((pattern, int(level)))
    return tuple(out)


@dataclass
class GateOptions:
    """Section "cloud call gate" (kccm's own): budgets for calls into the provider."""

    qps: float = 0.0
    burst: int = 1
    group_qps: dict[str, float] = field(default_factory=dict)
    provider_threads: int = 16

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("cloud call gate")
        groups = ", ".join(sorted(set(METHOD_GROUPS.values())))
        s.number(
            self,
            "qps",
            "cloud-call-qps",
            "kccm: calls per second into the cloud provider, per method group; 0 means no budget.",
        )
        s.integer(
            self,
            "burst",
            "cloud-call-burst",
            "kccm: burst of every cloud call budget (--cloud-call-qps and --cloud-call-group-qps).",
        )
        s.map_float(
            self,
            "group_qps",
            "cloud-call-group-qps",
            "kccm: per-group budgets overriding --cloud-call-qps, e.g. "
            f"load_balancer=5,instances=20 (0: unlimited). Groups: {groups}.",
        )
        s.integer(
            self,
            "provider_threads",
            "provider-threads",
            "kccm: size of the thread pool that runs a provider's blocking (def) methods.",
        )

    def validate(self) -> list[str]:
        errors = _not_negative("cloud-call-qps", self.qps)
        if self.qps > 0:
            errors += _positive("cloud-call-burst", self.burst)
        known = set(METHOD_GROUPS.values())
        for group, qps in sorted(self.group_qps.items()):
            if group not in known:
                errors.append(
                    f"--cloud-call-group-qps: unknown method group {go_quote(group)} "
                    f"(known: {', '.join(sorted(known))})"
                )
            errors += _not_negative(f"cloud-call-group-qps {group}", qps)
        return errors + _positive("provider-threads", self.provider_threads)

    def apply_to(self, parts: ConfigParts) -> None:
        parts.gate.update(
            qps=self.qps,
            burst=self.burst,
            group_qps=dict(self.group_qps),
            provider_threads=self.provider_threads,
        )


@dataclass
class GlobalOptions:
    """Section "global": --version and --help (handled by the CLI before validation)."""

    version: bool = False
    help: bool = False

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("global")
        s.boolean(self, "help", "help", "help for kccm")
        fs.set_shorthand("help", "h")
        s.boolean(self, "version", "version", "Print version information and quit")

    def validate(self) -> list[str]:
        return []

    def apply_to(self, parts: ConfigParts) -> None:
        return None


# -- all together --------------------------------------------------------------------------------


@dataclass
class KccmOptions:
    """Every flag group; ``config()`` validates all of them and builds the ManagerConfig."""

    shared: KubeCloudSharedOptions = field(default_factory=KubeCloudSharedOptions)
    generic: GenericOptions = field(default_factory=GenericOptions)
    leader_election: LeaderElectionOptions = field(default_factory=LeaderElectionOptions)
    node_controller: NodeControllerOptions = field(default_factory=NodeControllerOptions)
    service_controller: ServiceControllerOptions = field(default_factory=ServiceControllerOptions)
    debugging: DebuggingOptions = field(default_factory=DebuggingOptions)
    leader_migration: LeaderMigrationOptions = field(default_factory=LeaderMigrationOptions)
    secure_serving: SecureServingOptions = field(default_factory=SecureServingOptions)
    authentication: AuthenticationOptions = field(default_factory=AuthenticationOptions)
    authorization: AuthorizationOptions = field(default_factory=AuthorizationOptions)
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    misc: MiscOptions = field(default_factory=MiscOptions)
    logs: LogsOptions = field(default_factory=LogsOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    global_: GlobalOptions = field(default_factory=GlobalOptions)

    def groups(self) -> list[Any]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    def flag_set(self, name: str = "kccm") -> FlagSet:
        fs = FlagSet(name)
        for group in self.groups():
            group.add_flags(fs)
        return fs

    def validate(self, registry: CloudProviderRegistry = default_registry) -> list[str]:
        errors: list[str] = []
        for group in self.groups():
            if group is self.webhook:
                errors += self.webhook.validate(self.secure_serving.secure_port)
            elif group is self.logs:
                errors += self.logs.validate(self.generic.feature_gates)
            else:
                errors += group.validate()
        errors += self._cluster_cidr_errors()
        if self.shared.cloud_provider:
            errors += _provider_errors(
                self.shared.cloud_provider, self.shared.cloud_config, registry
            )
        return errors

    def _cluster_cidr_errors(self) -> list[str]:
        """A given --cluster-cidr must parse. A missing one is only an error once the provider
        turns out to support routes (upstream checks Routes() first): see app.manager."""
        cidr = self.shared.cluster_cidr
        if not cidr.strip():
            return []
        try:
            parse_cluster_cidrs(cidr)
        except ValueError as err:
            return [f"--cluster-cidr: {err}"]
        return []

    def config(self, registry: CloudProviderRegistry = default_registry) -> ManagerConfig:
        """Validate every group and build the config; raises :class:`ConfigurationError`."""
        errors = self.validate(registry)
        if errors:
            raise ConfigurationError(errors)
        parts = ConfigParts()
        for group in self.groups():
            group.apply_to(parts)
        return parts.build()


# -- provider and cloud config -------------------------------------------------------------------


def _provider_errors(name: str, cloud_config: str, registry: CloudProviderRegistry) -> list[str]:
    """The provider must exist; the cloud config must be readable and, when the factory
    declares ``config_schema`` (a cloud-config dataclass), valid against it."""
    if is_external(name):
        return [
            '--cloud-provider: "external" selects no provider; kccm needs the name of the '
            "provider to run"
        ]
    try:
        factory = registry.factory(name)
    except CloudProviderInitError as err:
        return [f"--cloud-provider: {err}"]
    errors = [] if factory is not None else [_unknown_provider(name, registry)]
    text, read_errors = _read_cloud_config(cloud_config)
    errors += read_errors
    schema = getattr(factory, "config_schema", None)
    if text is not None and dataclasses.is_dataclass(schema) and isinstance(schema, type):
        try:
            load_cloud_config(text, schema, source=cloud_config)
        except CloudConfigError as err:
            errors += [f"--cloud-config: {issue}" for issue in err.issues]
    return errors


def _unknown_provider(name: str, registry: CloudProviderRegistry) -> str:
    known = registry.known_names()
    message = f"--cloud-provider: unknown cloud provider {go_quote(name)}"
    message += f" (known providers: {', '.join(known)})" if known else " (none are installed)"
    close = difflib.get_close_matches(name, known, n=1)
    return message + (f"; did you mean {go_quote(close[0])}?" if close else "")


def _read_cloud_config(path: str) -> tuple[str | None, list[str]]:
    if not path:
        return None, []
    try:
        with open(path, encoding="utf-8") as stream:
            return stream.read(), []
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        return None, [
            f"--cloud-config: couldn't open cloud provider configuration {path}: {reason}"
        ]
