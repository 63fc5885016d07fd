"""End to end, `kccm` as a real subprocess: bounded shutdown, connection errors, the cluster CIDR
requirement and a busy secure port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_e2e_support import (
    Cluster,
    _error_lines,
    _holder,
    eventually,
)

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import Conflict
from kccm.kube.interface import Obj
from kccm.kube.resources import (
    LEASES,
    NODES,
)
from kccm.testing.daemon import Daemon
from kccm.testing.kubelet import kubelet_node
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

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
    lease_lines = [line for line in logs.splitlines() if "lease" in line]
    assert await _holder(kube) == "", f"the lease was not released: {lease_lines[-5:]}"


async def test_losing_the_lease_while_a_cloud_call_hangs_exits_at_once(
    cluster: Cluster, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    """Issue 28: upstream's OnStoppedLeading logs "leaderelection lost" and exits there
    (klog.FlushAndExit), whatever its goroutines do. kccm used to wind down first (controllers,
    event flush) and then wait for the provider thread until the exit guard fired, acting on
    the cloud meanwhile while a successor could already lead; now nothing runs after the
    lost lease: the exit guard never has a thread to report."""
    node = kube_cleanup.add(NODES, unique_name("e2e-lost"))
    daemon = _hanging(cluster, "instance_metadata", [node], "--controllers=cloud-node")
    await eventually(lambda: daemon.logged("caches synced"))
    await kube.create(NODES, kubelet_node(node, "10.244.42.0/24"))
    await eventually(lambda: daemon.logged("HANGING instance_metadata"))
    await eventually(lambda: _steal(kube))
    try:
        try:
            code = await asyncio.to_thread(daemon.proc.wait, 60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"kccm kept running after losing its lease:\n{daemon.logs()[-4000:]}")
        logs = daemon.logs()
        assert code == 1, logs[-3000:]
        assert "leaderelection lost" in logs
        assert "thread(s) are still running a cloud provider call" not in logs, logs[-3000:]
    finally:
        await _hand_back(kube)


async def _steal(kube: KubeApiClient) -> Obj | None:
    """Another manager takes the lease (None: kccm renewed it meanwhile, a 409; again)."""
    lease = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    spec = {"holderIdentity": "usurper", "renewTime": now, "leaseDurationSeconds": 60}
    try:
        await kube.replace(LEASES, {**lease, "spec": {**lease["spec"], **spec}})
    except Conflict:
        return None
    return lease


async def _hand_back(kube: KubeApiClient) -> None:
    """Release the lease for later tests on this apiserver."""
    current = await kube.get(LEASES, "cloud-controller-manager", namespace="kube-system")
    spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
    await kube.replace(LEASES, {**current, "spec": spec})


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
