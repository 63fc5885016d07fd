"""Flag groups: upstream manifests' command lines, upstream flags and ignored flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from options_support import (
    BASE,
    UPSTREAM_DEFAULTS,
    _config,
    _parse,
)

from kccm.app.options import KccmOptions

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
