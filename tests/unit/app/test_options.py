"""Flag groups: upstream defaults, --controllers semantics, validation and the built config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest

from kccm.app.config import ConfigurationError, ManagerConfig
from kccm.app.options import KccmOptions, is_controller_enabled, resolve_controllers
from kccm.cloudprovider.config import setting
from kccm.cloudprovider.registry import CloudProviderRegistry
from kccm.controllers.route import RouteControllerOptions
from kccm.controllers.table import ControllerOptions
from kccm.providers.fake import FakeCloud

CIDR = "10.0.0.0/16"
BASE = ["--cloud-provider=fake", f"--cluster-cidr={CIDR}"]


def _parse(args: list[str]) -> tuple[KccmOptions, list[str]]:
    options = KccmOptions()
    errors = options.flag_set().parse(args)
    return options, errors


def _config(args: list[str], registry: CloudProviderRegistry | None = None) -> ManagerConfig:
    options, errors = _parse(args)
    assert errors == []
    return options.config(registry) if registry else options.config()


def _errors(args: list[str], registry: CloudProviderRegistry | None = None) -> list[str]:
    options, errors = _parse(args)
    return errors + (options.validate(registry) if registry else options.validate())


# -- defaults ------------------------------------------------------------------------------------

H = 3600.0
# upstream options_test.go TestDefaultFlags / AddFlags (section 6.2 of the spec)
UPSTREAM_DEFAULTS: dict[str, Any] = {
    "cloud-provider": "",
    "cloud-config": "",
    "external-cloud-volume-plugin": "",
    "use-service-account-credentials": False,
    "allow-untagged-cloud": False,
    "route-reconciliation-period": 10.0,
    "node-monitor-period": 5.0,
    "cluster-name": "kubernetes",
    "cluster-cidr": "",
    "allocate-node-cidrs": False,
    "cidr-allocator-type": "RangeAllocator",
    "configure-cloud-routes": True,
    "node-sync-period": 0.0,
    "min-resync-period": 12 * H,
    "kube-api-content-type": "application/vnd.kubernetes.protobuf",
    "kube-api-qps": 20.0,
    "kube-api-burst": 30,
    "controller-start-interval": 0.0,
    "controllers": ["*"],
    "leader-elect": True,
    "leader-elect-lease-duration": 15.0,
    "leader-elect-renew-deadline": 10.0,
    "leader-elect-retry-period": 2.0,
    "leader-elect-resource-lock": "leases",
    "leader-elect-resource-name": "cloud-controller-manager",
    "leader-elect-resource-namespace": "kube-system",
    "feature-gates": {},
    "concurrent-node-syncs": 1,
    "concurrent-node-status-updates": 0,
    "concurrent-service-syncs": 1,
    "profiling": True,
    "contention-profiling": False,
    "enable-leader-migration": False,
    "leader-migration-config": "",
    "bind-address": "0.0.0.0",
    "secure-port": 10258,
    "cert-dir": "",
    "tls-cert-file": "",
    "tls-private-key-file": "",
    "authentication-kubeconfig": "",
    "authentication-skip-lookup": False,
    "authorization-kubeconfig": "",
    "authorization-always-allow-paths": ["/healthz", "/readyz", "/livez"],
    "webhooks": [],
    "webhook-bind-address": "0.0.0.0",
    "webhook-secure-port": 10260,
    "master": "",
    "kubeconfig": "",
    "node-status-update-frequency": 300.0,
    "v": 0,
    "logging-format": "text",
    "log-flush-frequency": 5.0,
    "version": False,
    "help": False,
    # k8s.io/apiserver v0.36.3 SecureServingOptions / DelegatingAuthenticationOptions /
    # DelegatingAuthorizationOptions, cloud-provider v0.36 WebhookServingOptions and
    # component-base v0.36.3 logs/api/v1 flags
    "tls-min-version": "",
    "tls-cipher-suites": [],
    "tls-curve-preferences": [],
    "tls-sni-cert-key": [],
    "http2-max-streams-per-connection": 0,
    "disable-http2-serving": False,
    "permit-port-sharing": False,
    "permit-address-sharing": False,
    "authentication-token-webhook-cache-ttl": 10.0,
    "authentication-tolerate-lookup-failure": False,
    "client-ca-file": "",
    "requestheader-client-ca-file": "",
    "requestheader-allowed-names": [],
    "requestheader-username-headers": ["x-remote-user"],
    "requestheader-uid-headers": [],
    "requestheader-group-headers": ["x-remote-group"],
    "requestheader-extra-headers-prefix": ["x-remote-extra-"],
    "authorization-webhook-cache-authorized-ttl": 10.0,
    "authorization-webhook-cache-unauthorized-ttl": 10.0,
    "webhook-cert-dir": "",
    "webhook-tls-cert-file": "",
    "webhook-tls-private-key-file": "",
    "webhook-tls-min-version": "",
    "webhook-tls-cipher-suites": [],
    "webhook-tls-curve-preferences": [],
    "webhook-tls-sni-cert-key": [],
    "webhook-disable-http2-serving": False,
    "vmodule": "",
    "log-text-split-stream": False,
    "log-text-info-buffer-size": "0",
    "log-json-split-stream": False,
    "log-json-info-buffer-size": "0",
}
# documented in docs/flags.md ("Differences from upstream")
KCCM_DIFFERENCES: dict[str, Any] = {
    "kube-api-qps": 1000.0,
    "kube-api-burst": 2000,
    "concurrent-node-syncs": 32,
    "concurrent-service-syncs": 10,
    "kube-api-content-type": "application/json",
}
KCCM_OWN: dict[str, Any] = {
    "shutdown-grace-period": 30.0,
    "cloud-call-qps": 0.0,
    "cloud-call-burst": 1,
    "cloud-call-group-qps": {},
    "provider-threads": 16,
    "node-metadata-refresh-period": 0.0,
    "reuse-unchanged-load-balancers": True,
}


def test_defaults_are_upstreams_except_documented_differences() -> None:
    fs = KccmOptions().flag_set()
    assert fs.parse([]) == []
    expected = {**UPSTREAM_DEFAULTS, **KCCM_DIFFERENCES, **KCCM_OWN}
    actual = {name: flag.value for name, flag in fs.flags.items()}
    assert actual == expected


def test_differences_are_documented_in_help() -> None:
    fs = KccmOptions().flag_set()
    assert "upstream 1" in fs.flags["concurrent-service-syncs"].usage
    assert "upstream 1" in fs.flags["concurrent-node-syncs"].usage
    assert "always speaks JSON" in fs.flags["kube-api-content-type"].usage
    assert "upstream 20" in fs.flags["kube-api-qps"].usage
    assert "upstream 30" in fs.flags["kube-api-burst"].usage


def test_default_config_equals_the_contracts_defaults() -> None:
    config = _config(BASE)
    expected = ManagerConfig(
        cloud_provider="fake",
        controller_options=ControllerOptions(route=RouteControllerOptions(cluster_cidr=CIDR)),
        controllers=frozenset(
            {
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller",
            }
        ),
    )
    assert config == expected


# -- --controllers -------------------------------------------------------------------------------

ALL_ON = {"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller"}
ROUTE = "node-route-controller"
PVL = "pv-label-controller"
CONTROLLERS = [
    ("star", ["*"], ALL_ON | {ROUTE}),
    ("star-minus-route", ["*", "-route"], ALL_ON),
    ("minus-route-then-star", ["-route", "*"], ALL_ON),
    ("canonical-minus", ["*", "-node-route-controller"], ALL_ON),
    ("only-foo", ["service"], {"service-lb-controller"}),
    ("only-canonical", ["service-lb-controller", "route"], {"service-lb-controller", ROUTE}),
    ("alias-cloud-node", ["cloud-node"], {"cloud-node-controller"}),
    ("alias-lifecycle", ["cloud-node-lifecycle"], {"cloud-node-lifecycle-controller"}),
    ("pv-label-off-by-default", ["*"], ALL_ON | {ROUTE}),
    ("pv-label-explicit", ["*", "pv-label"], ALL_ON | {ROUTE, PVL}),
    ("first-hit-wins", ["route", "-route"], {ROUTE}),
    ("first-hit-wins-negative", ["-route", "route", "*"], ALL_ON),
    ("empty", [], set()),
    ("only-negations", ["-route"], set()),
]


@pytest.mark.parametrize(
    ("entries", "enabled"), [c[1:] for c in CONTROLLERS], ids=[c[0] for c in CONTROLLERS]
)
def test_controllers_evaluation(entries: list[str], enabled: set[str]) -> None:
    assert resolve_controllers(entries) == frozenset(enabled)


def test_is_controller_enabled_is_upstreams_function() -> None:
    off = frozenset({"b"})
    assert is_controller_enabled("a", off, ["*"])
    assert not is_controller_enabled("b", off, ["*"])
    assert is_controller_enabled("b", off, ["*", "b"])
    assert not is_controller_enabled("a", off, ["-a", "*"])
    assert not is_controller_enabled("a", off, ["c"])


def test_controllers_flag_repeats_append() -> None:
    config = _config([*BASE, "--controllers=service", "--controllers", "route"])
    assert config.controllers == {"service-lb-controller", ROUTE}


# -- validation, one table over every group ------------------------------------------------------

INVALID = [
    ("provider-missing", ["--cloud-provider="], "--cloud-provider cannot be empty"),
    ("provider-unknown", ["--cloud-provider=nope"], "--cloud-provider: unknown cloud provider"),
    ("provider-external", ["--cloud-provider=external"], '--cloud-provider: "external"'),
    ("provider-bad-reference", ["--cloud-provider=no.such.module:f"], "--cloud-provider: could"),
    ("controller-unknown", ["--controllers=foo"], '--controllers: "foo" is not in the list'),
    ("controller-unknown-negated", ["--controllers=*,-foo"], '"foo" is not in the list'),
    ("cidr-bad", ["--cluster-cidr=10.0.0.0"], "--cluster-cidr: invalid --cluster-cidr"),
    ("cidr-not-dual-stack", ["--cluster-cidr=10.0.0.0/16,10.1.0.0/16"], "dual stack"),
    ("period-zero", ["--node-monitor-period=0"], "--node-monitor-period: must be greater"),
    ("period-negative", ["--route-reconciliation-period=-1s"], "--route-reconciliation-period"),
    ("status-frequency", ["--node-status-update-frequency=0s"], "--node-status-update-freq"),
    ("cluster-name-empty", ["--cluster-name="], "--cluster-name cannot be empty"),
    ("content-type", ["--kube-api-content-type=text/xml"], "--kube-api-content-type"),
    ("qps-negative", ["--kube-api-qps=-1"], "--kube-api-qps: must not be negative"),
    ("burst-negative", ["--kube-api-burst=-1"], "--kube-api-burst: must not be negative"),
    ("feature-gate-unknown", ["--feature-gates=Nope=true"], "unrecognized feature gate: Nope"),
    ("grace-negative", ["--shutdown-grace-period=-1s"], "--shutdown-grace-period"),
    ("lock-not-leases", ["--leader-elect-resource-lock=endpoints"], 'must be "leases"'),
    ("lease-not-above-renew", ["--leader-elect-lease-duration=10s"], "greater than --leader-el"),
    ("renew-not-above-retry", ["--leader-elect-retry-period=9s"], "1.2 x --leader-elect-retry"),
    ("retry-zero", ["--leader-elect-retry-period=0s"], "--leader-elect-retry-period: must be"),
    ("lease-name-empty", ["--leader-elect-resource-name="], "--leader-elect-resource-name"),
    ("node-syncs-zero", ["--concurrent-node-syncs=0"], "--concurrent-node-syncs: must be"),
    ("status-updates-negative", ["--concurrent-node-status-updates=-1"], "--concurrent-node-s"),
    ("service-syncs-negative", ["--concurrent-service-syncs=-1"], "--concurrent-service-syncs"),
    ("leader-migration", ["--enable-leader-migration"], "--enable-leader-migration: kccm does"),
    ("port-high", ["--secure-port=65536"], "--secure-port: 65536 must be between 0 and 65535"),
    ("port-negative", ["--secure-port=-1"], "--secure-port: -1 must be between"),
    ("bind-address", ["--bind-address=localhost"], '--bind-address: "localhost" is not'),
    ("cert-without-key", ["--tls-cert-file=/dev/null"], "must be given together"),
    ("key-without-cert", ["--tls-private-key-file=/dev/null"], "must be given together"),
    ("cert-unreadable", ["--tls-cert-file=/nope", "--tls-private-key-file=/dev/null"], "/nope"),
    ("authn-kubeconfig", ["--authentication-kubeconfig=/nope"], "--authentication-kubeconfig"),
    ("authz-kubeconfig", ["--authorization-kubeconfig=/nope"], "--authorization-kubeconfig"),
    ("allow-path", ["--authorization-always-allow-paths=healthz"], "must start with '/'"),
    ("webhook-named", ["--webhooks=foo"], '--webhooks: "foo" is not in the list of known'),
    ("webhook-port", ["--webhook-secure-port=70000"], "--webhook-secure-port: 70000"),
    ("webhook-port-same", ["--webhook-secure-port=10258"], "must differ from --secure-port"),
    ("kubeconfig-unreadable", ["--kubeconfig=/nope"], "--kubeconfig: cannot read /nope"),
    ("verbosity-negative", ["-v=-1"], "--v: must not be negative"),
    ("logging-format", ["--logging-format=xml"], '--logging-format: format "xml" is not'),
    ("gate-qps-negative", ["--cloud-call-qps=-1"], "--cloud-call-qps: must not be negative"),
    ("gate-burst-zero", ["--cloud-call-qps=5", "--cloud-call-burst=0"], "--cloud-call-burst"),
    ("gate-group-unknown", ["--cloud-call-group-qps=disks=1"], 'unknown method group "disks"'),
    ("gate-group-negative", ["--cloud-call-group-qps=routes=-1"], "group-qps routes: must not"),
    ("provider-threads", ["--provider-threads=0"], "--provider-threads: must be greater"),
    ("cloud-config-missing", ["--cloud-config=/nope"], "--cloud-config: couldn't open"),
    ("allow-path-inner-star", ["--authorization-always-allow-paths=/a*/b"], "only a trailing"),
    ("tls-version", ["--tls-min-version=TLS12"], "--tls-min-version: unknown TLS version"),
    ("tls-cipher", ["--tls-cipher-suites=TLS_NOPE"], "cipher suite TLS_NOPE not supported"),
    ("tls-curve", ["--tls-curve-preferences=23,99"], "--tls-curve-preferences: unsupported"),
    ("tls-curve-syntax", ["--tls-curve-preferences=P256"], "--tls-curve-preferences"),
    ("tls-sni-syntax", ["--tls-sni-cert-key=only-one-file"], "--tls-sni-cert-key: "),
    ("tls-sni-unreadable", ["--tls-sni-cert-key=/nope.crt,/nope.key"], "cannot read /nope.crt"),
    ("http2-streams", ["--http2-max-streams-per-connection=-1"], "--http2-max-streams-per"),
    ("client-ca-missing", ["--client-ca-file=/nope"], "--client-ca-file: cannot read /nope"),
    ("client-ca-not-pem", ["--client-ca-file=/dev/null"], "is not a PEM certificate bundle"),
    ("rh-ca-not-pem", ["--requestheader-client-ca-file=/dev/null"], "--requestheader-client-"),
    ("rh-blank-header", ["--requestheader-username-headers=a,,b"], "empty value"),
    ("rh-uid-nonstandard", ["--requestheader-uid-headers=X-Id"], "X-Remote-Uid header"),
    ("token-ttl", ["--authentication-token-webhook-cache-ttl=-1s"], "-token-webhook-cache-ttl"),
    ("authz-ttl", ["--authorization-webhook-cache-unauthorized-ttl=-1s"], "-unauthorized-ttl"),
    ("webhook-tls-version", ["--webhook-tls-min-version=1.2"], "--webhook-tls-min-version"),
    ("webhook-tls-cipher", ["--webhook-tls-cipher-suites=X"], "--webhook-tls-cipher-suites"),
    ("webhook-cert-alone", ["--webhook-tls-cert-file=/dev/null"], "must be given together"),
    ("vmodule-syntax", ["--vmodule=manager"], '--vmodule: "manager" is not of the form'),
    ("split-stream-gated", ["--log-text-split-stream"], "Feature LoggingAlphaOptions is disabled"),
    ("buffer-size-syntax", ["--log-json-info-buffer-size=lots"], "is not a quantity"),
    ("buffer-size-gated", ["--log-text-info-buffer-size=1Ki"], "LoggingAlphaOptions"),
]


@pytest.mark.parametrize(("args", "needle"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_values_name_their_flag(args: list[str], needle: str) -> None:
    errors = _errors([*BASE, *args])
    assert any(needle in error for error in errors), errors


VALID = [
    (
        "leader-elect-off-ignores-timings",
        ["--leader-elect=false", "--leader-elect-lease-duration=1s"],
    ),
    ("leader-elect-off-ignores-lock", ["--leader-elect=false", "--leader-elect-resource-lock=x"]),
    ("no-routes-no-cidr", ["--cluster-cidr=", "--configure-cloud-routes=false"]),
    ("route-disabled-no-cidr", ["--cluster-cidr=", "--controllers=*,-route"]),
    ("dual-stack", ["--cluster-cidr=10.0.0.0/16,fd00::/64"]),
    ("protobuf-accepted", ["--kube-api-content-type=application/vnd.kubernetes.protobuf"]),
    ("secure-port-off", ["--secure-port=0"]),
    ("webhooks-star", ["--webhooks=*"]),
    ("ignored-flags", ["--profiling=false", "--allow-untagged-cloud", "--node-sync-period=1m"]),
    ("gates", ["--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true"]),
    ("leader-migration-config-alone", ["--leader-migration-config=/nope"]),
    ("module-factory", ["--cloud-provider=kccm.providers.fake:new_fake_cloud"]),
    ("tls13-suite-accepted", ["--tls-cipher-suites=TLS_AES_128_GCM_SHA256"]),
    ("insecure-suite-accepted", ["--tls-cipher-suites=TLS_RSA_WITH_AES_128_GCM_SHA256"]),
    ("allow-path-prefix", ["--authorization-always-allow-paths=/healthz,/metrics*"]),
    (
        "split-stream-with-gate",
        ["--log-json-split-stream", "--feature-gates=LoggingAlphaOptions=true"],
    ),
    ("vmodule", ["--vmodule=manager=4,service*=5"]),
]


@pytest.mark.parametrize("args", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_combinations(args: list[str]) -> None:
    assert _errors([*BASE, *args]) == []


def test_every_error_is_reported_at_once() -> None:
    errors = _errors(["--controllers=foo", "--secure-port=-1", "--logging-format=xml"])
    assert len(errors) == 4  # + the missing provider
    with pytest.raises(ConfigurationError) as caught:
        _parse(["--secure-port=-1"])[0].config()
    # provider, port (an empty --cluster-cidr is checked once the provider's routes are known)
    assert len(caught.value.issues) == 2


# -- apply_to: one table over every group --------------------------------------------------------

APPLIED: list[tuple[str, list[str], str, Any]] = [
    ("cloud-config", ["--cloud-config=/dev/null"], "cloud_config", "/dev/null"),
    ("master", ["--master=https://x"], "master", "https://x"),
    (
        "sa-credentials",
        ["--use-service-account-credentials"],
        "use_service_account_credentials",
        True,
    ),
    ("qps", ["--kube-api-qps=5.5"], "kube_api_qps", 5.5),
    ("burst", ["--kube-api-burst=7"], "kube_api_burst", 7),
    (
        "metadata-refresh",
        ["--node-metadata-refresh-period=0"],
        "controller_options.node.node_metadata_refresh_period",
        0,
    ),
    (
        "protobuf-means-json",
        ["--kube-api-content-type=application/vnd.kubernetes.protobuf"],
        "kube_api_content_type",
        "application/json",
    ),
    ("cluster-name", ["--cluster-name=c1"], "cluster_name", "c1"),
    ("allocate", ["--allocate-node-cidrs"], "allocate_node_cidrs", True),
    (
        "routes-off",
        ["--configure-cloud-routes=false"],
        "controller_options.route.configure_cloud_routes",
        False,
    ),
    (
        "route-period",
        ["--route-reconciliation-period=1m"],
        "controller_options.route.route_reconciliation_period",
        60.0,
    ),
    (
        "monitor",
        ["--node-monitor-period=1s"],
        "controller_options.node_lifecycle.node_monitor_period",
        1.0,
    ),
    (
        "status",
        ["--node-status-update-frequency=1m"],
        "controller_options.node.node_status_update_frequency",
        60.0,
    ),
    (
        "node-syncs",
        ["--concurrent-node-syncs=3"],
        "controller_options.node.concurrent_node_syncs",
        3,
    ),
    (
        "status-updates",
        ["--concurrent-node-status-updates=2"],
        "controller_options.node.concurrent_node_status_updates",
        2,
    ),
    (
        "service-syncs",
        ["--concurrent-service-syncs=4"],
        "controller_options.service.concurrent_service_syncs",
        4,
    ),
    ("grace", ["--shutdown-grace-period=5s"], "shutdown_grace", 5.0),
    ("gates", ["--feature-gates=AllAlpha=true"], "feature_gates", {"AllAlpha": True}),
    ("le-off", ["--leader-elect=false"], "leader_election.enabled", False),
    ("le-lease", ["--leader-elect-lease-duration=30s"], "leader_election.lease_duration", 30.0),
    ("le-renew", ["--leader-elect-renew-deadline=5s"], "leader_election.renew_deadline", 5.0),
    ("le-retry", ["--leader-elect-retry-period=1s"], "leader_election.retry_period", 1.0),
    ("le-name", ["--leader-elect-resource-name=x"], "leader_election.resource_name", "x"),
    ("le-ns", ["--leader-elect-resource-namespace=y"], "leader_election.resource_namespace", "y"),
    ("bind", ["--bind-address=127.0.0.1"], "serving.bind_address", "127.0.0.1"),
    ("port", ["--secure-port=0"], "serving.secure_port", 0),
    ("cert-dir", ["--cert-dir=/tmp"], "serving.cert_dir", "/tmp"),
    (
        "cert",
        ["--tls-cert-file=/dev/null", "--tls-private-key-file=/dev/null"],
        "serving.tls_cert_file",
        "/dev/null",
    ),
    (
        "authn",
        ["--authentication-kubeconfig=/dev/null"],
        "serving.authentication_kubeconfig",
        "/dev/null",
    ),
    ("skip-lookup", ["--authentication-skip-lookup"], "serving.authentication_skip_lookup", True),
    (
        "authz",
        ["--authorization-kubeconfig=/dev/null"],
        "serving.authorization_kubeconfig",
        "/dev/null",
    ),
    (
        "allow-paths",
        ["--authorization-always-allow-paths=/a,/b"],
        "serving.always_allow_paths",
        ("/a", "/b"),
    ),
    ("verbosity", ["-v=3"], "logging.verbosity", 3),
    ("json", ["--logging-format=json"], "logging.format", "json"),
    ("gate-qps", ["--cloud-call-qps=2.5"], "gate.qps", 2.5),
    ("gate-burst", ["--cloud-call-burst=4"], "gate.burst", 4),
    (
        "gate-groups",
        ["--cloud-call-group-qps=load_balancer=5,instances=20"],
        "gate.group_qps",
        {"load_balancer": 5.0, "instances": 20.0},
    ),
    ("threads", ["--provider-threads=4"], "gate.provider_threads", 4),
]


@pytest.mark.parametrize(
    ("args", "path", "value"), [c[1:] for c in APPLIED], ids=[c[0] for c in APPLIED]
)
def test_flags_reach_the_config(args: list[str], path: str, value: Any) -> None:
    target: Any = _config([*BASE, *args])
    for part in path.split("."):
        target = getattr(target, part)
    assert target == value


# -- early cloud-config validation through a declared schema -------------------------------------


@dataclass(frozen=True)
class _Global:
    zone: str = setting(required=True)
    retries: int = 3


@dataclass(frozen=True)
class _Schema:
    global_: _Global = setting(default_factory=_Global)  # noqa: RUF009


def _factory(config: TextIO | None) -> FakeCloud:
    return FakeCloud()


_factory.config_schema = _Schema  # type: ignore[attr-defined]


def _registry() -> CloudProviderRegistry:
    registry = CloudProviderRegistry(entry_point_source=lambda group: [])
    registry.register("schemed", _factory)
    return registry


def test_cloud_config_is_validated_early_when_the_factory_declares_a_schema(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "cloud.conf"
    bad.write_text("[Global]\nretries = many\nbogus = 1\n")
    errors = _errors(
        [f"--cluster-cidr={CIDR}", "--cloud-provider=schemed", f"--cloud-config={bad}"],
        _registry(),
    )
    assert len(errors) == 3, errors  # retries, bogus, missing zone
    assert all(error.startswith("--cloud-config: ") for error in errors)
    assert any('key "retries"' in error for error in errors)
    good = tmp_path / "good.conf"
    good.write_text("[Global]\nzone = z1\n")
    args = [f"--cluster-cidr={CIDR}", "--cloud-provider=schemed", f"--cloud-config={good}"]
    assert _errors(args, _registry()) == []


def test_unknown_provider_suggests_the_closest_name() -> None:
    errors = _errors([f"--cluster-cidr={CIDR}", "--cloud-provider=schemd"], _registry())
    assert errors == [
        '--cloud-provider: unknown cloud provider "schemd" (known providers: schemed); '
        'did you mean "schemed"?'
    ]


# -- upstream manifests --------------------------------------------------------------------------


def upstream_style_args(pki: Path) -> list[str]:
    """A command line as upstream's manifests write it (kubeadm-style paths replaced by
    readable files): every flag kccm used to reject as unknown, plus the usual ones."""
    ca, kubeconfig = pki / "ca.crt", pki / "ccm.conf"
    return [
        "--cloud-provider=fake",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--secure-port=10258",
        "--leader-elect=true",
        "--use-service-account-credentials=true",
        "--controllers=*,-route",
        "--configure-cloud-routes=false",
        "--allocate-node-cidrs=false",
        "--profiling=false",
        "--v=2",
        "--vmodule=service*=4",
        "--tls-min-version=VersionTLS12",
        "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,"
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,"
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "--tls-curve-preferences=23,29",
        f"--client-ca-file={ca}",
        f"--requestheader-client-ca-file={ca}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--requestheader-uid-headers=X-Remote-Uid",
        "--authentication-tolerate-lookup-failure",
        "--authentication-token-webhook-cache-ttl=30s",
        "--authorization-webhook-cache-authorized-ttl=20s",
        "--authorization-webhook-cache-unauthorized-ttl=5s",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--permit-port-sharing",
        "--permit-address-sharing",
        "--http2-max-streams-per-connection=1000",
        "--disable-http2-serving",
        "--webhook-cert-dir=/var/run/ccm-webhook",
        "--webhook-disable-http2-serving",
        "--node-status-update-frequency=1m",
        "--concurrent-service-syncs=1",
        "--log-flush-frequency=10s",
    ]


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    from kccm.testing.certs import CertificateAuthority

    (tmp_path / "ca.crt").write_bytes(CertificateAuthority().cert_pem)
    (tmp_path / "ccm.conf").write_text("apiVersion: v1\nkind: Config\n")
    return tmp_path


def test_an_upstream_style_command_line_validates(pki: Path) -> None:
    options, errors = _parse(upstream_style_args(pki))
    assert errors == []
    config = options.config()
    assert config.serving.tls_min_version == "VersionTLS12"
    assert config.serving.client_ca_file == str(pki / "ca.crt")
    assert config.serving.requestheader_allowed_names == ("front-proxy-client",)
    assert config.serving.always_allow_paths[-1] == "/metrics"
    assert config.serving.permit_port_sharing
    assert config.serving.token_cache_ttl == 30.0
    assert config.logging.vmodule == (("service*", 4),)
    warned = " ".join(config.warnings)
    for flag in (
        "--tls-curve-preferences",
        "--http2-max-streams-per-connection",
        "--log-flush-frequency",
    ):
        assert flag in warned


def test_every_upstream_flag_is_accepted() -> None:
    fs = KccmOptions().flag_set()
    assert set(UPSTREAM_DEFAULTS) <= set(fs.flags)


@pytest.mark.parametrize(
    ("args", "warning"),
    [
        pytest.param(["--contention-profiling"], "--contention-profiling", id="contention"),
        pytest.param(
            ["--use-service-account-credentials"], "--use-service-account-cred", id="sa-creds"
        ),
        pytest.param(["--external-cloud-volume-plugin=x"], "--external-cloud-volume", id="volume"),
        pytest.param(["--cidr-allocator-type=CloudAllocator"], "--cidr-allocator-type", id="cidr"),
        pytest.param(["--node-sync-period=1m"], "--node-sync-period", id="node-sync"),
        pytest.param(["--min-resync-period=1h"], "--min-resync-period", id="resync"),
        pytest.param(["--controller-start-interval=5s"], "--controller-start-int", id="interval"),
        pytest.param(["--leader-migration-config=/x"], "--leader-migration-config", id="lm"),
        pytest.param(
            ["--reuse-unchanged-load-balancers=false"],
            "--reuse-unchanged-load-balancers is deprecated",
            id="lb-reuse-off-deprecated",
        ),
        pytest.param(
            ["--reuse-unchanged-load-balancers=true"],
            "--reuse-unchanged-load-balancers is deprecated",
            id="lb-reuse-on-deprecated-too",
        ),
    ],
)
def test_ignored_flags_set_to_a_value_warn_with_a_reason(args: list[str], warning: str) -> None:
    config = _config([*BASE, *args])
    assert [w for w in config.warnings if w.startswith(warning)], config.warnings
    assert all(" ignored" in w for w in config.warnings)


def test_defaults_warn_about_nothing() -> None:
    assert _config(BASE).warnings == ()
