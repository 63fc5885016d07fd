"""Upstream's Azure cloud-controller-manager and cloud-node-manager as subprocesses of a test.

Both are built from Go modules by ``hack/azure/build.sh`` (``make azure-upstream``) into
``$KCCM_CACHE_DIR/bin/azure-<version>/``; ``KCCM_AZURE_BIN_DIR`` overrides the directory. The
version is the one ``hack/azure/go.mod`` requires, read from that file so the two cannot
drift apart. Without the binaries a test is skipped, or fails when
``KCCM_REQUIRE_CONTROL_PLANE=1`` (CI: ``make test`` builds them).

How upstream is pointed at kccm's emulator (the emulator's ``cloud_files`` write both files):
``--cloud-config`` names upstream's ``azure.json`` (``"cloud": "AzureStackCloud"``,
``"tenantId": "adfs"``, ``"disableAzureStackCloud": true``); ``AZURE_ENVIRONMENT_FILEPATH``
names the environment file whose ``resourceManagerEndpoint`` and ``activeDirectoryEndpoint``
are the emulator (``pkg/azclient/cloud.go``); ``SSL_CERT_FILE`` is the emulator's CA. The
instance metadata service's address is fixed (``http://169.254.169.254``,
``pkg/consts/consts.go``) and its client is Go's default transport, which honours
``HTTP_PROXY``: cloud-node-manager reaches the emulator's IMDS port as its proxy, and
``NODE_NAME`` tells it which Node is its own (``isCurrentInstance``,
``pkg/provider/azure_instances_v1.go``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import REQUIRE_ENV, require_control_plane

ROOT = Path(__file__).resolve().parents[3]
GO_MOD = ROOT / "hack" / "azure" / "go.mod"
CCM = "cloud-controller-manager"
CNM = "cloud-node-manager"
CLUSTER_NAME = "kubernetes"
CLUSTER_CIDR = "10.244.0.0/16"
CCM_CONTROLLERS = ("cloud-node-lifecycle", "service", "route")
"""What the CCM runs here: Node initialisation is cloud-node-manager's (upstream's CCM with
``cloud-node`` never starts that controller's workers)."""
KILL_WAIT = 10.0
_PR_SET_PDEATHSIG = 1
_PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


def azure_version() -> str:
    """The release ``hack/azure/go.mod`` requires (``v1.36.5``)."""
    text = GO_MOD.read_text()
    found = re.search(r"^require sigs\.k8s\.io/cloud-provider-azure (v\S+)$", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{GO_MOD}: no require of sigs.k8s.io/cloud-provider-azure")
    return found.group(1)


class UpstreamUnavailable(RuntimeError):
    """The binaries were not built."""


def bin_dir() -> Path:
    override = os.environ.get("KCCM_AZURE_BIN_DIR")
    if override:
        return Path(override)
    root = os.environ.get("KCCM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kccm"
    )
    return Path(root) / "bin" / f"azure-{azure_version()}"


def upstream_binary(name: str) -> Path:
    """``name`` (CCM or CNM) in :func:`bin_dir`, or :class:`UpstreamUnavailable`."""
    path = bin_dir() / name
    if not os.access(path, os.X_OK):
        raise UpstreamUnavailable(
            f"{name} not found at {path} (build it with `make azure-upstream`, "
            "or set KCCM_AZURE_BIN_DIR)"
        )
    return path


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``KCCM_REQUIRE_CONTROL_PLANE=1`` (where ``make test`` built them)."""
    if require_control_plane():
        pytest.fail(f"{REQUIRE_ENV}=1 but upstream's Azure binaries are unavailable: {reason}")
    pytest.skip(f"upstream's Azure binaries unavailable: {reason}")


def require_upstream() -> None:
    """Skip (or fail) before anything starts when either binary is missing."""
    try:
        upstream_binary(CCM)
        upstream_binary(CNM)
    except UpstreamUnavailable as exc:
        unavailable(str(exc))


def ccm_argv(
    *,
    cloud_config: Path,
    kubeconfig: Path,
    cert_dir: Path,
    port: int,
    controllers: Sequence[str] = CCM_CONTROLLERS,
    extra: Sequence[str] = (),
) -> list[str]:
    """The CCM's command line: the azure.json, the test's kubeconfig for the API and for
    delegated authentication/authorization, a free loopback secure port, no leader
    election; routes configured (pod CIDRs are the test's, no CIDR allocator)."""
    argv = [
        str(upstream_binary(CCM)),
        "--cloud-provider=azure",
        f"--cloud-config={cloud_config}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--authentication-skip-lookup=true",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        f"--cluster-name={CLUSTER_NAME}",
        f"--controllers={','.join(controllers)}",
        "--v=4",
    ]
    if "route" in controllers:
        argv += [
            "--configure-cloud-routes=true",
            "--allocate-node-cidrs=false",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--route-reconciliation-period=2s",
        ]
    return [*argv, *extra]


def cnm_argv(
    *, node: str, kubeconfig: Path, cloud_config: Path | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """cloud-node-manager for ``node``: from IMDS (the DaemonSet's default) or, given
    ``cloud_config``, from ARM (``--use-instance-metadata=false``)."""
    argv = [
        str(upstream_binary(CNM)),
        f"--node-name={node}",
        f"--kubeconfig={kubeconfig}",
        "--wait-routes=false",
        "--node-status-update-frequency=2s",
        "--v=4",
    ]
    if cloud_config is not None:
        argv += ["--use-instance-metadata=false", f"--cloud-config={cloud_config}"]
    return [*argv, *extra]


def upstream_env(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    """This process's environment without proxy settings, plus ``base`` (the emulator's
    ``cloud_files(...).env``) and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARS}
    return env | dict(base) | extra


def _die_with_parent() -> None:  # in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Upstream:
    """A running upstream binary: its process and log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        """Raise with the log's tail if the process has ended."""
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.name} exited ({self.proc.returncode}):\n{self.logs()[-4000:]}"
            )

    async def logged(self, text: str) -> bool:
        """Whether the log holds ``text`` (a probe for ``eventually``)."""
        self.alive()
        return text in await asyncio.to_thread(self.logs)

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM, SIGKILL after ``grace`` seconds; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(KILL_WAIT)

    def digest(self, tail: int = 60) -> str:
        """klog errors and warnings, then the last ``tail`` lines (for a failing test)."""
        lines = self.logs().splitlines()
        notable = [line for line in lines[:-tail] if line.startswith(("E", "W"))]
        return "\n".join([*notable[-40:], "...", *lines[-tail:]])


@dataclass
class UpstreamProcesses:
    """The upstream processes of one test; :meth:`stop_all` stops them and prints each
    log's digest (pytest shows it when the test failed)."""

    tmp: Path
    started: list[Upstream] = field(default_factory=list)

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Upstream:
        log = self.tmp / f"{name}-{len(self.started)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                list(argv),
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=dict(env),
                preexec_fn=_die_with_parent,
            )
        running = Upstream(name, proc, log)
        self.started.append(running)
        return running

    def start_ccm(
        self,
        cloud_config: Path,
        kubeconfig: Path,
        env: Mapping[str, str],
        *,
        controllers: Sequence[str] = CCM_CONTROLLERS,
        extra: Sequence[str] = (),
    ) -> Upstream:
        cert_dir = self.tmp / f"ccm-certs-{len(self.started)}"
        cert_dir.mkdir(exist_ok=True)
        argv = ccm_argv(
            cloud_config=cloud_config,
            kubeconfig=kubeconfig,
            cert_dir=cert_dir,
            port=free_port(),
            controllers=controllers,
            extra=extra,
        )
        return self.start("ccm", argv, env)

    def start_cnm(
        self,
        node: str,
        kubeconfig: Path,
        env: Mapping[str, str],
        *,
        cloud_config: Path | None = None,
    ) -> Upstream:
        argv = cnm_argv(node=node, kubeconfig=kubeconfig, cloud_config=cloud_config)
        return self.start(f"cnm-{node}", argv, env)

    def stop_all(self) -> None:
        for running in self.started:
            running.stop()
        for running in self.started:
            code = running.proc.returncode
            print(f"\n--- {running.log.name} (exit {code}) ---\n{running.digest()}")


def upstream_processes(tmp: Path) -> Iterator[UpstreamProcesses]:
    """A fixture body: the upstream processes of one test, stopped at its end."""
    processes = UpstreamProcesses(tmp)
    try:
        yield processes
    finally:
        processes.stop_all()
