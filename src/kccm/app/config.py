"""The completed, validated configuration the manager runs from.

Flags (:mod:`kccm.app.options`) parse and validate into one :class:`ManagerConfig`; the
manager (:mod:`kccm.app.manager`) only ever reads this. Durations are seconds (floats).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.controllers.base import DEFAULT_CLUSTER_NAME
from kccm.controllers.table import ControllerOptions
from kccm.runtime.leaderelection import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_NAMESPACE,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
)

__all__ = [
    "DEFAULT_CONTROLLERS",
    "DEFAULT_KUBE_API_BURST",
    "DEFAULT_KUBE_API_QPS",
    "DEFAULT_SHUTDOWN_GRACE",
    "JSON",
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


DEFAULT_CONTROLLERS = ("*",)
DEFAULT_KUBE_API_QPS = 1000.0
"""kccm's --kube-api-qps (upstream 20, which caps a large cluster's node initialisation near
10 nodes/s; see docs/behaviour.md)."""
DEFAULT_KUBE_API_BURST = 2000
DEFAULT_SHUTDOWN_GRACE = 30.0
JSON = "application/json"


@dataclass
class LeaderElectionSettings:
    """The --leader-elect* flags bind straight to these fields."""

    enabled: bool = True
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    resource_lock: str = "leases"
    resource_name: str = DEFAULT_LEASE_NAME
    resource_namespace: str = DEFAULT_LEASE_NAMESPACE
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


@dataclass
class GateSettings:
    """kccm's cloud-call budget: qps <= 0 means no budget (the --cloud-call-* flags and
    --provider-threads bind straight to these fields)."""

    qps: float = 0.0
    burst: int = 1
    group_qps: dict[str, float] = field(default_factory=dict)
    provider_threads: int = 16


@dataclass
class ManagerConfig:
    """Filled in by the flag groups' ``apply_to`` (upstream ``config.Config``); each controller's
    own settings are nested in ``controller_options``, never copied."""

    cloud_provider: str
    cloud_config: str = ""
    user_agent: tuple[str, ...] = ()
    """``--user-agent``: extra User-Agent components for the provider's cloud client."""
    kubeconfig: str = ""
    master: str = ""
    kube_api_qps: float = DEFAULT_KUBE_API_QPS
    kube_api_burst: int = DEFAULT_KUBE_API_BURST
    kube_api_content_type: str = JSON
    use_service_account_credentials: bool = False
    controllers: frozenset[str] = frozenset()  # resolved canonical names to run
    cluster_name: str = DEFAULT_CLUSTER_NAME
    allocate_node_cidrs: bool = False
    allow_untagged_cloud: bool = False
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    controller_options: ControllerOptions = field(default_factory=ControllerOptions)
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    serving: ServingSettings = field(default_factory=ServingSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    gate: GateSettings = field(default_factory=GateSettings)
    # --feature-gates as given (known gates only); kccm's behaviour does not depend on them yet
    feature_gates: dict[str, bool] = field(default_factory=dict)
    # accepted upstream flags that change nothing in kccm, each with the reason (logged at start)
    warnings: tuple[str, ...] = ()

    def warn(self, warning: str) -> None:
        """Record an accepted flag that changes nothing (logged at start)."""
        self.warnings = (*self.warnings, warning)
