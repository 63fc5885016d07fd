"""Flag groups: validation, one table over every group, and early cloud-config validation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import pytest
from options_support import (
    BASE,
    CIDR,
    _errors,
    _parse,
)

from kccm.app.config import ConfigurationError
from kccm.cloudprovider.config import setting
from kccm.cloudprovider.registry import CloudProviderRegistry
from kccm.providers.fake import FakeCloud

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
    ("lb-class-only-alone", ["--load-balancer-class-only"], "requires at least one --load-b"),
    ("lb-class-bad", ["--load-balancer-class=a b"], "--load-balancer-class: 'a b' is not"),
    ("lb-class-bad-prefix", ["--load-balancer-class=A_B/lb"], "is not a valid class"),
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
