"""End to end, `kccm` as a real subprocess: upstream's flags on the real apiserver, the allow
paths, JSON logs and the delegation kubeconfigs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from daemon_e2e_support import (
    Cluster,
    _error_lines,
    _initialised,
    _sa_token,
    eventually,
    grant_cluster_role,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import (
    NODES,
)
from kccm.testing.certs import CertificateAuthority, KeyPair
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name


def _client_context(
    *,
    maximum: ssl.TLSVersion | None = None,
    ciphers: str = "",
    cert: tuple[Path, Path] | None = None,
) -> ssl.SSLContext:
    context = ssl._create_unverified_context()
    if maximum is not None:
        context.maximum_version = maximum
    if ciphers:
        context.set_ciphers(ciphers)
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


def _write_pair(tmp: Path, name: str, pair: KeyPair) -> tuple[Path, Path]:
    cert, key = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    return cert, key


def _cluster_client_pair(
    plane: ControlPlane, tmp: Path, user: str, groups: tuple[str, ...] = ()
) -> tuple[Path, Path]:
    """A client certificate the cluster CA issued (taken from a kubeconfig the plane wrote)."""
    config = yaml.safe_load(plane.kubeconfig_for(user, groups).read_text())
    creds = config["users"][0]["user"]
    pair = KeyPair(
        base64.b64decode(creds["client-certificate-data"]),
        base64.b64decode(creds["client-key-data"]),
    )
    return _write_pair(tmp, user, pair)


async def _grant_debug_paths(kube: KubeApiClient, cleanup: KubeCleanup, user: str) -> None:
    rules = [{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}]
    subject = {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
    await grant_cluster_role(kube, cleanup, unique_name("debug-reader"), rules, subject)


async def test_upstream_flags_start_and_work_on_the_real_apiserver(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup, tmp_path: Path
) -> None:
    """An upstream-style command line (flags kccm used to reject as unknown) starts the daemon;
    the TLS flags hold on the socket; /metrics opens anonymously once listed in
    --authorization-always-allow-paths; client-certificate and request-header users are
    judged by the real apiserver's SubjectAccessReview."""
    proxy_ca = CertificateAuthority("front-proxy-ca")
    (tmp_path / "front-proxy-ca.crt").write_bytes(proxy_ca.cert_pem)
    sni_cert, sni_key = _write_pair(tmp_path, "sni", proxy_ca.serving(("ccm.example",)))
    cluster_ca = cluster.plane.root / "pki" / "ca.crt"
    reader = unique_name("reader")
    await _grant_debug_paths(kube, kube_cleanup, reader)
    kubeconfig = cluster.plane.kubeconfig_for(SA_USER, SA_GROUPS)
    daemon = cluster.start(
        cluster.cloud_config([]),
        "--controllers=*,-route",
        "--configure-cloud-routes=false",
        "--profiling=false",
        "--use-service-account-credentials=false",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--tls-min-version=VersionTLS12",
        "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "--tls-curve-preferences=23,29",
        f"--tls-sni-cert-key={sni_cert},{sni_key}:ccm.example",
        f"--client-ca-file={cluster_ca}",
        f"--requestheader-client-ca-file={tmp_path / 'front-proxy-ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--authentication-tolerate-lookup-failure",
        "--authentication-token-webhook-cache-ttl=10s",
        "--authorization-webhook-cache-authorized-ttl=10s",
        "--authorization-webhook-cache-unauthorized-ttl=1s",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--permit-port-sharing",
        "--http2-max-streams-per-connection=1000",
        "--vmodule=service*=4",
        "--log-flush-frequency=5s",
    )
    await eventually(lambda: daemon.logged("serving securely on 127.0.0.1:"))

    status, body = await asyncio.to_thread(daemon.get, "/metrics")
    assert status == 200, "/metrics is listed: open without credentials"
    assert "leader_election_master_status" in body

    tls12 = ssl.TLSVersion.TLSv1_2
    refused = _client_context(maximum=tls12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384")
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(daemon.get, "/healthz", context=refused)
    listed = _client_context(maximum=tls12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
    assert (await asyncio.to_thread(daemon.get, "/healthz", context=listed))[0] == 200
    by_name = ssl.create_default_context(cadata=proxy_ca.cert_pem.decode())
    _, writer = await asyncio.open_connection(
        "127.0.0.1", daemon.port, ssl=by_name, server_hostname="ccm.example"
    )  # verified against the SNI pair's CA and name: the SNI certificate was served
    writer.close()
    await writer.wait_closed()

    anonymous = await asyncio.to_thread(daemon.get, "/debug/flags")
    assert anonymous[0] == 403, anonymous
    admin = _cluster_client_pair(cluster.plane, tmp_path, "e2e-admin", ("system:masters",))
    as_admin = await asyncio.to_thread(
        daemon.get, "/debug/flags", context=_client_context(cert=admin)
    )
    assert as_admin[0] == 404, "authenticated by its client certificate, authorized, not served"
    stranger = _cluster_client_pair(cluster.plane, tmp_path, unique_name("nobody"))
    as_stranger = await asyncio.to_thread(
        daemon.get, "/debug/flags", context=_client_context(cert=stranger)
    )
    assert as_stranger[0] == 403
    proxy = _write_pair(tmp_path, "proxy", proxy_ca.client("front-proxy-client"))
    via_proxy = await asyncio.to_thread(
        daemon.get,
        "/debug/flags",
        context=_client_context(cert=proxy),
        headers={"X-Remote-User": reader, "X-Remote-Group": "e2e"},
    )
    assert via_proxy[0] == 404, "the proxy vouches for a user RBAC lets read /debug/*"
    other = await asyncio.to_thread(
        daemon.get,
        "/debug/flags",
        context=_client_context(cert=proxy),
        headers={"X-Remote-User": unique_name("other")},
    )
    assert other[0] == 403

    logs = daemon.logs()
    assert "--tls-curve-preferences is ignored" in logs
    assert "--http2-max-streams-per-connection is ignored" in logs
    daemon.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(daemon.proc.wait, 60) == 0, daemon.logs()[-3000:]


async def test_default_allow_paths_keep_metrics_closed_and_health_open(cluster: Cluster) -> None:
    daemon = cluster.start(cluster.cloud_config([]), "--controllers=service")
    await eventually(lambda: daemon.logged("serving securely on"))
    assert (await asyncio.to_thread(daemon.get, "/metrics"))[0] == 403
    for path in ("/healthz", "/readyz", "/livez", "/healthz/leaderElection"):
        assert (await asyncio.to_thread(daemon.get, path))[0] == 200, path
    daemon.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(daemon.proc.wait, 60) == 0


async def test_v4_json_logs_carry_no_transport_traces_and_true_messages(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """-v=4 (which lets kccm's debug lines through: tests/unit/app/test_logs.py) shows no
    HTTP-library frames (before the fix: thousands of httpcore2/hpack lines); 'serving on'
    names the real bind address; the route controller disabled by a flag is not blamed on
    the provider."""
    node = kube_cleanup.add(NODES, unique_name("e2e-v4"))
    daemon = cluster.start(
        cluster.cloud_config([node]),
        "--v=4",
        "--logging-format=json",
        "--bind-address=0.0.0.0",
        "--configure-cloud-routes=false",
    )
    await eventually(lambda: daemon.logged("caches synced"))
    await kube.create(NODES, kubelet_node(node, "10.244.51.0/24"))
    await eventually(lambda: _initialised(kube, node))
    daemon.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(daemon.proc.wait, 60) == 0
    entries = [json.loads(line) for line in daemon.logs().splitlines() if line.startswith("{")]
    loggers = {entry["logger"] for entry in entries}
    assert all(name == "root" or name.startswith("kccm") for name in loggers), loggers
    messages = [entry["msg"] for entry in entries]
    assert f"serving securely on 0.0.0.0:{daemon.port}" in messages
    assert not any("localhost" in msg for msg in messages if msg.startswith("serving"))
    assert any("--configure-cloud-routes=false" in msg for msg in messages)
    assert not any("lacks the capability" in msg for msg in messages)


async def test_delegation_kubeconfigs_are_the_identities_that_make_the_reviews(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """--authentication-kubeconfig reads the authentication ConfigMap, --authorization-kubeconfig
    makes the SubjectAccessReviews: given an identity without rights, each one fails where
    the main identity (the shipped ServiceAccount) would have succeeded."""
    powerless = cluster.plane.kubeconfig_for(unique_name("powerless"))
    lookup = cluster.start(
        cluster.cloud_config([]),
        "--controllers=service",
        f"--authentication-kubeconfig={powerless}",
    )
    code = await asyncio.to_thread(lookup.proc.wait, 60)
    errors = _error_lines(lookup.logs())
    assert code == 1, lookup.logs()[-3000:]
    assert "unable to load configmap kube-system/extension-apiserver-authentication" in errors[-1]

    daemon = cluster.start(
        cluster.cloud_config([]), "--controllers=service", f"--authorization-kubeconfig={powerless}"
    )
    await eventually(lambda: daemon.logged("serving securely on"))
    status, body = await asyncio.to_thread(daemon.get, "/metrics")
    assert status == 500, "the SubjectAccessReview itself was refused to the powerless user"
    assert "authorization check failed" in body
    reader = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )
    assert (await asyncio.to_thread(daemon.get, "/metrics", reader))[0] == 500
    daemon.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(daemon.proc.wait, 60) == 0
