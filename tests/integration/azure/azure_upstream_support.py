"""Upstream's Azure cloud-controller-manager and cloud-node-manager as subprocesses of a test.

Both are built from Go modules by ``hack/azure/build.sh`` (``make azure-upstream``) into
``$KCCM_CACHE_DIR/bin/azure-<version>/`` (the version ``hack/azure/go.mod`` requires);
``KCCM_AZURE_BIN_DIR`` overrides the directory. What running an upstream binary takes
whichever cloud it serves (finding it, the skip-or-fail rule, the CCM's command line, the
processes and their logs) is :mod:`kccm.testing.upstream`'s; this module keeps Azure's own.

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

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from kccm.testing import upstream
from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import unavailable as skip_or_fail
from kccm.testing.upstream import (
    CLUSTER_CIDR,
    CLUSTER_NAME,
    UpstreamProcess,
    UpstreamUnavailable,
    running_processes,
)

__all__ = [
    "CCM",
    "CCM_CONTROLLERS",
    "CLUSTER_CIDR",
    "CLUSTER_NAME",
    "CNM",
    "Upstream",
    "UpstreamProcesses",
    "UpstreamUnavailable",
    "azure_version",
    "bin_dir",
    "ccm_argv",
    "cnm_argv",
    "require_upstream",
    "unavailable",
    "upstream_binary",
    "upstream_env",
    "upstream_processes",
]

ROOT = Path(__file__).resolve().parents[3]
GO_MOD = ROOT / "hack" / "azure" / "go.mod"
CCM = "cloud-controller-manager"
CNM = "cloud-node-manager"
CCM_CONTROLLERS = ("cloud-node-lifecycle", "service", "route")
"""What the CCM runs here: Node initialisation is cloud-node-manager's (upstream's CCM with
``cloud-node`` never starts that controller's workers)."""
Upstream = UpstreamProcess


def azure_version() -> str:
    """The release ``hack/azure/go.mod`` requires (``v1.36.5``)."""
    return upstream.required_version(GO_MOD, "sigs.k8s.io/cloud-provider-azure")


def bin_dir() -> Path:
    override = os.environ.get("KCCM_AZURE_BIN_DIR")
    if override:
        return Path(override)
    return upstream.bin_cache() / f"azure-{azure_version()}"


def upstream_binary(name: str) -> Path:
    """``name`` (CCM or CNM) in :func:`bin_dir`, or :class:`UpstreamUnavailable`."""
    how = "build it with `make azure-upstream`, or set KCCM_AZURE_BIN_DIR"
    return upstream.built(bin_dir() / name, how)


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``KCCM_REQUIRE_CONTROL_PLANE=1`` (where ``make test`` built them)."""
    skip_or_fail("upstream's Azure CCM/CNM", reason)


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
    """The CCM's command line (:func:`kccm.testing.upstream.ccm_argv`): routes configured,
    pod CIDRs the test's (no CIDR allocator)."""
    return upstream.ccm_argv(
        upstream_binary(CCM),
        "azure",
        cloud_config=cloud_config,
        kubeconfig=kubeconfig,
        cert_dir=cert_dir,
        port=port,
        controllers=controllers,
        allocate_node_cidrs=False,
        extra=extra,
    )


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
    return upstream.without_proxies(base, **extra)


@dataclass
class UpstreamProcesses(upstream.UpstreamProcesses):
    """The CCMs and CNMs of one test (:class:`kccm.testing.upstream.UpstreamProcesses`)."""

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
        return self.spawn("ccm", argv, env)

    def start_cnm(
        self,
        node: str,
        kubeconfig: Path,
        env: Mapping[str, str],
        *,
        cloud_config: Path | None = None,
    ) -> Upstream:
        argv = cnm_argv(node=node, kubeconfig=kubeconfig, cloud_config=cloud_config)
        return self.spawn(f"cnm-{node}", argv, env)


def upstream_processes(tmp: Path) -> Iterator[UpstreamProcesses]:
    """A fixture body: the upstream processes of one test, stopped at its end."""
    return running_processes(UpstreamProcesses(tmp))
