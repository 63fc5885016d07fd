"""The completed, validated configuration the manager runs from.

Flags (:mod:`kccm.app.options`) parse and validate into one :class:`ManagerConfig`; the
manager (:mod:`kccm.app.manager`) only ever reads this. Durations are seconds (floats).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "CONTROLLER_ALIASES",
    "CONTROLLER_CLIENT_NAMES",
    "DEFAULT_CONTROLLERS",
    "DISABLED_BY_DEFAULT",
    "ConfigurationError",
    "GateSettings",
    "LeaderElectionSettings",
    "LoggingSettings",
    "ManagerConfig",
    "ServingSettings",
]


class ConfigurationError(Exception):
    """Bad flags, cloud config or provider selection: the process exits with status 2.

    ``problems`` lists every error found (all are reported at once)."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.issues = self.problems  # the same list, under the name kccm.app.options uses
        super().__init__("\n".join(self.problems))


# canonical name -> legacy alias (upstream names.CCMControllerAliases, plus pv-label)
CONTROLLER_ALIASES: dict[str, str] = {
    "cloud-node-controller": "cloud-node",
    "cloud-node-lifecycle-controller": "cloud-node-lifecycle",
    "service-lb-controller": "service",
    "node-route-controller": "route",
    "pv-label-controller": "pv-label",
}
# canonical name -> client name (user-agent suffix / kube-system service account)
CONTROLLER_CLIENT_NAMES: dict[str, str] = {
    "cloud-node-controller": "node-controller",
    "cloud-node-lifecycle-controller": "node-controller",
    "service-lb-controller": "service-controller",
    "node-route-controller": "route-controller",
    "pv-label-controller": "pvl-controller",
}
DISABLED_BY_DEFAULT = frozenset({"pv-label-controller"})
DEFAULT_CONTROLLERS = ("*",)


@dataclass(frozen=True)
class LeaderElectionSettings:
    enabled: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "cloud-controller-manager"
    resource_namespace: str = "kube-system"
    release_on_cancel: bool = True  # kccm: hand over at once on a graceful stop


@dataclass(frozen=True)
class ServingSettings:
    bind_address: str = "0.0.0.0"
    secure_port: int = 10258  # 0 disables serving
    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""
    authentication_skip_lookup: bool = False
    always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    always_allow_groups: tuple[str, ...] = ("system:masters",)
    permit_port_sharing: bool = False
    permit_address_sharing: bool = False
    tls_min_version: str = ""
    tls_cipher_suites: tuple[str, ...] = ()
    tls_sni_cert_key: tuple[str, ...] = ()  # cert,key[:names] entries
    client_ca_file: str = ""
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ("x-remote-user",)
    requestheader_uid_headers: tuple[str, ...] = ()
    requestheader_group_headers: tuple[str, ...] = ("x-remote-group",)
    requestheader_extra_headers_prefix: tuple[str, ...] = ("x-remote-extra-",)
    authentication_tolerate_lookup_failure: bool = False
    token_cache_ttl: float = 10.0
    authorized_cache_ttl: float = 10.0
    unauthorized_cache_ttl: float = 10.0


@dataclass(frozen=True)
class LoggingSettings:
    verbosity: int = 0
    format: str = "text"  # text | json
    vmodule: tuple[tuple[str, int], ...] = ()  # (file pattern, level), first match wins
    split_stream: bool = False  # info to stdout, errors to stderr


@dataclass(frozen=True)
class GateSettings:
    """kccm's cloud-call budget: qps <= 0 means no budget."""

    qps: float = 0.0
    burst: int = 1
    group_qps: dict[str, float] = field(default_factory=dict)
    provider_threads: int = 16


@dataclass(frozen=True)
class ManagerConfig:
    cloud_provider: str
    cloud_config: str = ""
    kubeconfig: str = ""
    master: str = ""
    kube_api_qps: float = 1000.0
    kube_api_burst: int = 2000
    kube_api_content_type: str = "application/json"
    use_service_account_credentials: bool = False
    controllers: frozenset[str] = frozenset()  # resolved canonical names to run
    cluster_name: str = "kubernetes"
    cluster_cidr: str = ""
    allocate_node_cidrs: bool = False
    configure_cloud_routes: bool = True
    allow_untagged_cloud: bool = False
    route_reconciliation_period: float = 10.0
    node_monitor_period: float = 5.0
    node_status_update_frequency: float = 300.0
    node_metadata_refresh_period: float = 0.0
    concurrent_node_syncs: int = 32
    concurrent_node_status_updates: int = 0
    concurrent_service_syncs: int = 10
    shutdown_grace: float = 30.0
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    gate: GateSettings = field(default_factory=GateSettings)
    # --feature-gates as given (known gates only); kccm's behaviour does not depend on them yet
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # accepted upstream flags that change nothing in kccm, each with the reason (logged at start)
    warnings: tuple[str, ...] = ()
