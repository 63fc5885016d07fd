"""Upstream ``GenericControllerManagerConfigurationOptions`` (options/generic.go)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kccm.app.config import (
    DEFAULT_CONTROLLERS,
    DEFAULT_KUBE_API_BURST,
    DEFAULT_KUBE_API_QPS,
    DEFAULT_SHUTDOWN_GRACE,
    JSON,
    ManagerConfig,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    IGNORED,
    not_negative,
)
from kccm.app.options.controllers import DISABLED_BY_DEFAULT, controller_errors, resolve_controllers
from kccm.controllers.table import BY_NAME, CONTROLLERS

PROTOBUF = "application/vnd.kubernetes.protobuf"
CONTENT_TYPES = (JSON, PROTOBUF)
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
    shutdown_grace_period: float = DEFAULT_SHUTDOWN_GRACE

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("generic")
        known = ", ".join(sorted(BY_NAME))
        aliases = ", ".join(spec.alias for spec in CONTROLLERS)
        off = ", ".join(sorted(DISABLED_BY_DEFAULT))
        s.strings(
            self,
            "controllers",
            "controllers",
            "A list of controllers to enable. '*' enables all on-by-default controllers, "
            "'foo' enables the controller named 'foo', '-foo' disables it; the first "
            f"entry naming a controller wins. Aliases ({aliases}) are accepted. All "
            f"controllers: {known}. Disabled-by-default controllers: {off}.",
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
        errors += not_negative("kube-api-qps", self.kube_api_qps)
        errors += not_negative("kube-api-burst", self.kube_api_burst)
        errors += not_negative("shutdown-grace-period", self.shutdown_grace_period)
        errors += [
            f"--feature-gates: unrecognized feature gate: {name}"
            for name in sorted(self.feature_gates)
            if name not in KNOWN_FEATURE_GATES
        ]
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        config.controllers = resolve_controllers(self.controllers)
        config.kube_api_content_type = JSON
        config.kube_api_qps = self.kube_api_qps
        config.kube_api_burst = self.kube_api_burst
        config.shutdown_grace = self.shutdown_grace_period
        config.feature_gates = dict(self.feature_gates)
        if self.min_resync_period != 12 * 3600.0:
            config.warn(
                "--min-resync-period is ignored: kccm's informers never resync (each "
                "controller has its own periodic loop)"
            )
        if self.controller_start_interval:
            config.warn(
                "--controller-start-interval is ignored: kccm starts its controllers together"
            )
