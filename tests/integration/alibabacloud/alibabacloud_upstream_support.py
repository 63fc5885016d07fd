"""Upstream's Alibaba Cloud CCM (kubernetes/cloud-provider-alibaba-cloud, ``cmd/manager``) for
the tests that run it: where ``hack/alibabacloud/build.sh`` puts it, and what a test does when
it is missing.

The binary is built from a source archive that a clone may not have (see the script): without
the archive the tests that need the binary skip, naming it, even under
``KCCM_REQUIRE_CONTROL_PLANE=1``; with the archive and no binary they skip, or fail under
``KCCM_REQUIRE_CONTROL_PLANE=1`` (``make test`` builds it).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pytest

from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.testing import upstream
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import unavailable as skip_or_fail
from kccm.testing.upstream import UpstreamProcess, UpstreamProcesses

__all__ = [
    "BUILD",
    "CLUSTER",
    "GLOBAL",
    "VPC",
    "VSWITCH",
    "archive",
    "manager_binary",
    "require_manager",
    "start_manager",
    "version",
]

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "alibabacloud" / "build.sh"
VERSIONS = ROOT / "hack" / "alibabacloud" / "versions.env"


def version() -> str:
    """The release ``hack/alibabacloud/versions.env`` pins (``v2.14.0``)."""
    for line in VERSIONS.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "ALIBABACLOUD_VERSION":
            return value
    raise RuntimeError(f"{VERSIONS}: no ALIBABACLOUD_VERSION")


def archive() -> Path:
    """Where the build script looks for upstream's source archive."""
    found = subprocess.run(
        ["bash", str(BUILD), "--print-archive"], capture_output=True, text=True, check=True
    )
    return Path(found.stdout.strip())


def manager_binary() -> Path:
    """The manager binary, or :class:`~kccm.testing.upstream.UpstreamUnavailable` saying how to
    build it (``KCCM_ALIBABACLOUD_BIN`` names another one)."""
    override = os.environ.get("KCCM_ALIBABACLOUD_BIN")
    path = (
        Path(override)
        if override
        else upstream.bin_cache() / f"alibabacloud-{version()}" / "manager"
    )
    return upstream.built(
        path, "build it with `make alibabacloud-upstream`, or set KCCM_ALIBABACLOUD_BIN"
    )


def _unavailable(reason: str) -> NoReturn:
    if not os.environ.get("KCCM_ALIBABACLOUD_BIN") and not archive().is_file():
        pytest.skip(f"upstream's source archive is not here: {archive()} (KCCM_UPSTREAM_ARCHIVES)")
    skip_or_fail("upstream's Alibaba Cloud CCM", reason)


def require_manager() -> Path:
    """The manager binary, or the test skipped (see the module's docstring)."""
    try:
        return manager_binary()
    except upstream.UpstreamUnavailable as exc:
        _unavailable(str(exc))


VPC, VSWITCH, CLUSTER = "vpc-kccm", "vsw-kccm", "c-up"
GLOBAL = {
    "accessKeyID": base64.b64encode(b"kccm-ak").decode(),
    "accessKeySecret": base64.b64encode(b"kccm-secret").decode(),
    "region": "cn-hangzhou",
    "vpcid": VPC,
    "vswitchid": f"cn-hangzhou-h:{VSWITCH}",
    "zoneid": "cn-hangzhou-h",
    "clusterID": CLUSTER,
}
"""Upstream's cloud config (``Global``) for the emulator's default key; kccm reads it too."""


def start_manager(
    processes: UpstreamProcesses,
    emu: AlibabaEmulator,
    plane: ControlPlane,
    controllers: str,
    extra: Sequence[str] = (),
) -> UpstreamProcess:
    """Upstream's manager running ``controllers`` against ``emu`` (``*_ENDPOINT`` and
    ``ALICLOUD_CLIENT_SCHEME=HTTP``, ``pkg/provider/alibaba/base/clientMgr.go``) and the
    apiserver of ``plane``; no leader election, no metrics, health or pprof port (pprof
    would bind :6060)."""
    config = processes.tmp / "cloud-config.json"
    config.write_text(json.dumps({"Global": GLOBAL}))
    argv = [
        str(require_manager()),
        f"--kubeconfig={plane.admin_kubeconfig}",
        f"--cloud-config={config}",
        f"--controllers={controllers}",
        "--leader-elect=false",
        "--metrics-bind-addr=0",
        "--health-probe-bind-addr=0",
        "--pprof-bind-addr=0",
        "--v=5",
        *extra,
    ]
    return processes.spawn("manager", argv, env=emu.endpoint_env())
