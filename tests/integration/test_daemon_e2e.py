"""End to end: `kccm` as a real subprocess against the real apiserver, authenticated as the
shipped ServiceAccount with only the shipped RBAC, the `fake` provider configured through a
--cloud-config file.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import Conflict, NotFound
from kccm.kube.interface import Obj
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    LEASES,
    NODES,
    SERVICE_ACCOUNTS,
    SERVICES,
)
from kccm.testing.certs import CertificateAuthority, KeyPair
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemon, Daemons, apply_rbac
from kccm.testing.kubelet import UNINITIALIZED_TAINT, kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

ROOT = Path(__file__).resolve().parents[2]
UNINITIALIZED = UNINITIALIZED_TAINT


eventually = functools.partial(shared_eventually, within=60.0, interval=0.2)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@dataclass
class Cluster:
    plane: ControlPlane
    tmp: Path
    kube: KubeApiClient
    daemons: Daemons

    def cloud_config(self, nodes: list[str]) -> Path:
        lines = ["[Global]", "zone = e2e-zone", "region = e2e-region", ""]
        for i, name in enumerate(nodes):
            lines += [
                f'[Instance "{name}"]',
                f"address = InternalIP=10.77.0.{i + 10}",
                f"address = Hostname={name}",
                "instance-type = fake.e2e",
                "",
            ]
        path = self.tmp / f"cloud-{len(self.daemons)}.conf"
        path.write_text("\n".join(lines))
        return path

    def start(self, cloud_config: Path, *extra: str, env: dict[str, str] | None = None) -> Daemon:
        return self.daemons.start(
            "fake",
            cloud_config,
            self.plane.kubeconfig_for(SA_USER, SA_GROUPS),
            "--cluster-cidr=10.244.0.0/16",
            "--leader-elect=true",
            "--leader-elect-lease-duration=8s",
            "--leader-elect-renew-deadline=6s",
            "--leader-elect-retry-period=500ms",
            "--node-monitor-period=1s",
            "--v=2",
            *extra,
            env=env,
        )

    def stop_all(self) -> None:
        self.daemons.stop_all(grace=0)


@pytest.fixture
async def cluster(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> AsyncIterator[Cluster]:
    await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-e2e")
    c = Cluster(control_plane, tmp_path, kube, Daemons(tmp_path))
    try:
        yield c
    finally:
        c.stop_all()


async def _initialised(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    taints = node["spec"].get("taints") or []
    done = node["spec"].get("providerID") and UNINITIALIZED["key"] not in {t["key"] for t in taints}
    return node if done else None


async def _has_internal_ip(kube: KubeApiClient, name: str) -> bool:
    node = await kube.get(NODES, name)
    addresses = node.get("status", {}).get("addresses") or []
    return any(a["type"] == "InternalIP" and a["address"].startswith("10.77.0.") for a in addresses)


async def _route_created(kube: KubeApiClient, name: str) -> Obj | None:
    node = await kube.get(NODES, name)
    for cond in node.get("status", {}).get("conditions") or []:
        if cond["type"] == "NetworkUnavailable" and cond["reason"] == "RouteCreated":
            return cond
    return None


async def _ingress(kube: KubeApiClient, name: str, ns: str) -> list[Any] | None:
    svc = await kube.get(SERVICES, name, namespace=ns)
    return (svc.get("status") or {}).get("loadBalancer", {}).get("ingress")


async def _sa_token(kube: KubeApiClient, cleanup: KubeCleanup, rules: list[Any]) -> str:
    """A bearer token (TokenRequest) for a fresh ServiceAccount granted ``rules``."""
    name = unique_name("metrics-reader")
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": "default"}})
    if rules:
        cleanup.add(CLUSTER_ROLES, name)
        cleanup.add(CLUSTER_ROLE_BINDINGS, name)
        await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
        await kube.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": name,
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
            },
        )
    review = await kube.create(
        SERVICE_ACCOUNTS,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
        namespace="default",
        name=name,
        subresource="token",
    )
    return str(review["status"]["token"])


async def test_daemon_initialises_nodes_serves_lbs_routes_and_guards_metrics(
    cluster: Cluster, kube: KubeApiClient, kube_namespace: str, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-node")) for _ in range(2)]
    daemon = cluster.start(cluster.cloud_config(nodes))
    for i, name in enumerate(nodes):
        await kube.create(NODES, kubelet_node(name, f"10.244.{i + 1}.0/24"))
    for name in nodes:
        node = await eventually(lambda name=name: _initialised(kube, name))
        assert node["spec"]["providerID"] == f"fake://{name}"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "e2e-zone"
        await eventually(lambda name=name: _has_internal_ip(kube, name))
        await eventually(lambda name=name: _route_created(kube, name))

    svc = unique_name("e2e-lb")
    await kube.create(
        SERVICES,
        {
            "metadata": {"name": svc, "namespace": kube_namespace},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
        },
    )
    ingress = await eventually(lambda: _ingress(kube, svc, kube_namespace))
    assert ingress[0]["ip"]

    status, body = await asyncio.to_thread(daemon.get, "/healthz?verbose")
    assert status == 200, body
    for check in (
        "leaderElection",
        "cloud-node-controller",
        "service-lb-controller",
        "node-route-controller",
        "cloud-node-lifecycle-controller",
    ):
        assert f"[+]{check} ok" in body
    anonymous = await asyncio.to_thread(daemon.get, "/metrics")
    assert anonymous[0] == 403
    outsider = await _sa_token(kube, kube_cleanup, [])
    assert (await asyncio.to_thread(daemon.get, "/metrics", outsider))[0] == 403
    reader = await _sa_token(
        kube, kube_cleanup, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    )

    async def read_metrics() -> str | None:
        """The new binding reaches the apiserver's authorizer through an informer: until then
        kccm's delegated check is answered "no" (and kccm may cache that answer a while)."""
        status, text = await asyncio.to_thread(daemon.get, "/metrics", reader)
        return text if status == 200 else None

    metrics = await eventually(read_metrics)
    assert "running_managed_controllers" in metrics
    assert "workqueue_adds_total" in metrics
    # The fake's own cloud requests (issue 16): the balancers it created (other tests' Services
    # in the shared apiserver may add theirs), the routes.
    created = 'kccm_cloud_api_requests_total{mutating="true",operation="create_load_balancer"} '
    assert float(metrics.split(created, 1)[1].split()[0]) >= 1
    assert 'operation="create_route"' in metrics
    assert (await asyncio.to_thread(daemon.get, "/metrics", "not-a-token"))[0] == 401
    final = await kube.get(SERVICES, svc, namespace=kube_namespace)
    assert not [k for k in final["metadata"].get("annotations") or {} if "kccm.io" in k]

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(60) == 0, daemon.logs()[-3000:]


async def _holder(kube: KubeApiClient) -> str:
    try:
        lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    except NotFound:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


async def test_two_replicas_failover_on_sigterm(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    nodes = [kube_cleanup.add(NODES, unique_name("e2e-ha")) for _ in range(2)]
    config = cluster.cloud_config(nodes)
    first = cluster.start(config)
    leader = await eventually(lambda: _holder(kube))
    second = cluster.start(config)
    await kube.create(NODES, kubelet_node(nodes[0], "10.244.31.0/24"))
    await eventually(lambda: _initialised(kube, nodes[0]))
    assert await _holder(kube) == leader, "the first replica keeps leading"

    stopped_at = time.monotonic()
    first.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(first.proc.wait, 60) == 0, first.logs()[-3000:]
    new_leader = await eventually(lambda: _holder_other_than(kube, leader))
    takeover = time.monotonic() - stopped_at
    await kube.create(NODES, kubelet_node(nodes[1], "10.244.32.0/24"))
    await eventually(lambda: _initialised(kube, nodes[1]))
    print(f"\nfailover: SIGTERM to the leader -> new leader {new_leader} in {takeover:.2f} s")
    assert second.proc.poll() is None
    second.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(second.proc.wait, 60) == 0


async def _holder_other_than(kube: KubeApiClient, old: str) -> str | None:
    holder = await _holder(kube)
    return holder if holder and holder != old else None


async def test_losing_the_lease_exits_non_zero(cluster: Cluster, kube: KubeApiClient) -> None:
    daemon = cluster.start(cluster.cloud_config([]), "--controllers=service")
    holder = await eventually(lambda: _holder(kube))

    async def steal() -> Obj | None:
        """Another manager takes the lease (None: kccm renewed it meanwhile, a 409; again)."""
        lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        spec = {"holderIdentity": "usurper", "renewTime": now, "leaseDurationSeconds": 60}
        stolen = {**lease, "spec": {**lease["spec"], **spec}}
        try:
            await kube.replace(LEASES, stolen)
        except Conflict:
            return None
        return stolen

    stolen = await eventually(steal)
    try:
        code = await asyncio.to_thread(daemon.proc.wait, 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kccm kept running after losing its lease:\n{daemon.logs()[-4000:]}")
    assert code == 1, daemon.logs()[-3000:]
    assert "leaderelection lost" in daemon.logs()
    assert holder != "usurper"
    released = {**stolen, "metadata": {**stolen["metadata"], "resourceVersion": None}}
    current = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    released["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    released["spec"] = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
    await kube.replace(LEASES, released)  # hand the lock back for later tests


# -- issue 13: bounded shutdown, connection errors, upstream flags; issue 11: allow paths ---------

HERE = Path(__file__).resolve().parent
HANGING_PROVIDER = "--cloud-provider=hanging_cloud:new_hanging_cloud"
GRACE = 2.0
# grace + kccm.app.shutdown.SHUTDOWN_SLACK, plus room for a loaded 2-core CI machine
EXIT_BUDGET = GRACE + 5.0 + 8.0


def _hanging(cluster: Cluster, method: str, nodes: list[str], *extra: str) -> Daemon:
    return cluster.start(
        cluster.cloud_config(nodes),
        HANGING_PROVIDER,
        f"--shutdown-grace-period={GRACE:g}s",
        *extra,
        env={
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            "KCCM_TEST_HANG": method,
        },
    )


async def _exit_after_sigterm(daemon: Daemon) -> tuple[int, float]:
    began = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.to_thread(daemon.proc.wait, EXIT_BUDGET)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kccm ignored SIGTERM for {EXIT_BUDGET}s:\n{daemon.logs()[-4000:]}")
    return code, time.monotonic() - began


async def test_sigterm_while_initialize_hangs_in_a_thread_exits_after_the_grace_period(
    cluster: Cluster,
) -> None:
    daemon = _hanging(cluster, "initialize", [])
    await eventually(lambda: daemon.logged("HANGING initialize"))
    code, took = await _exit_after_sigterm(daemon)
    print(f"\nSIGTERM with initialize hung in a thread: exit {code} after {took:.2f} s")
    logs = daemon.logs()
    assert code == 0, logs[-3000:]
    assert took >= GRACE - 0.5, "the provider was given the grace period"
    assert "initialize did not return; exiting without it" in logs
    assert "thread(s) are still running a cloud provider call: kccm-provider" in logs
    assert "Traceback" not in logs


async def test_sigterm_while_a_cloud_call_hangs_in_a_thread_exits_after_the_grace_period(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    node = kube_cleanup.add(NODES, unique_name("e2e-hang"))
    daemon = _hanging(cluster, "instance_metadata", [node], "--controllers=cloud-node")
    await eventually(lambda: daemon.logged("caches synced"))
    await kube.create(NODES, kubelet_node(node, "10.244.41.0/24"))
    await eventually(lambda: daemon.logged("HANGING instance_metadata"))
    code, took = await _exit_after_sigterm(daemon)
    print(f"\nSIGTERM with instance_metadata hung in a thread: exit {code} after {took:.2f} s")
    logs = daemon.logs()
    assert code == 0, logs[-3000:]
    assert "thread(s) are still running a cloud provider call" in logs
    assert await _holder(kube) == "", "the lease was released on the way out"


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(("E", "Error:"))]


@pytest.mark.parametrize(
    ("kubeconfig", "message"),
    [
        pytest.param(
            None,
            "neither --kubeconfig nor --master was given and kccm is not running in a cluster",
            id="no-kubeconfig-outside-a-cluster",
        ),
        pytest.param("hostname", "is not a kubeconfig", id="a-plain-text-file"),
        pytest.param("pod.yaml", "is not a kubeconfig", id="a-kubernetes-manifest"),
        pytest.param("broken.yaml", "is not valid YAML (line", id="broken-yaml"),
    ],
)
def test_connection_settings_problems_exit_2_with_one_line(
    tmp_path: Path, kubeconfig: str | None, message: str
) -> None:
    """No apiserver is needed: these fail before kccm contacts one. $KUBECONFIG and
    ~/.kube/config point at a valid file, and kccm must not use them (upstream does not)."""
    files = {
        "hostname": "my-laptop\n",
        "pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        "broken.yaml": "clusters: [\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    valid = tmp_path / "valid.kubeconfig"
    valid.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {}}]\ncurrent-context: c\n"
    )
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(valid.read_text())
    env = {"KUBECONFIG": str(valid), "HOME": str(tmp_path)}
    env_clean = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE")}
    args = ["--cloud-provider=fake", "--controllers=service", "--secure-port=0"]
    if kubeconfig is not None:
        args.append(f"--kubeconfig={tmp_path / kubeconfig}")
    proc = subprocess.run(
        [sys.executable, "-m", "kccm", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env_clean, **env},
    )
    assert proc.returncode == 2, proc.stderr
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1, proc.stderr
    assert message in errors[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("cloud_config", "routes_flags", "code"),
    [
        pytest.param("", [], 2, id="provider-with-routes-needs-a-cidr"),
        pytest.param("[Global]\ndisable = routes\n", [], 0, id="provider-without-routes-does-not"),
        pytest.param("", ["--configure-cloud-routes=false"], 0, id="routes-switched-off"),
    ],
)  # fmt: skip
async def test_cluster_cidr_is_required_only_when_the_provider_has_routes(
    cluster: Cluster, cloud_config: str, routes_flags: list[str], code: int
) -> None:
    """Upstream checks Routes() before --cluster-cidr; kccm does the same, before leader
    election, with one line and exit 2."""
    config = cluster.tmp / f"routes-{len(cluster.daemons)}.conf"
    config.write_text(cloud_config)
    daemon = cluster.start(config, "--cluster-cidr=", "--controllers=*", *routes_flags)
    if code == 2:
        assert await asyncio.to_thread(daemon.proc.wait, 60) == 2
        errors = _error_lines(daemon.logs())
        assert len(errors) == 1, daemon.logs()[-3000:]
        assert "--cluster-cidr:" in errors[0]
        assert "provider supports routes" in errors[0]
        assert "Traceback" not in daemon.logs()
    else:
        await eventually(lambda: daemon.logged("caches synced"))
        assert daemon.proc.poll() is None


async def test_a_busy_secure_port_exits_1_with_one_line(cluster: Cluster) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        daemon = cluster.start(
            cluster.cloud_config([]), f"--secure-port={port}", "--controllers=service"
        )
        code = await asyncio.to_thread(daemon.proc.wait, 60)
    logs = daemon.logs()
    assert code == 1, logs[-3000:]
    errors = _error_lines(logs)
    assert errors, logs
    assert errors[-1].endswith(
        f"--secure-port: cannot listen on 127.0.0.1:{port}: the address is already in use "
        "(another process listens on it)"
    )
    assert "Traceback" not in logs


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
    name = unique_name("debug-reader")
    cleanup.add(CLUSTER_ROLES, name)
    cleanup.add(CLUSTER_ROLE_BINDINGS, name)
    await kube.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": name},
            "rules": [{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}],
        },
    )
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )


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
