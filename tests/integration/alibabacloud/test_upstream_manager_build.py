"""The upstream binary the alibabacloud tests judge kccm by: built from the pinned source archive,
it is upstream's ``cmd/manager`` at the pinned release and answers with its own flags."""

from __future__ import annotations

import subprocess

from alibabacloud_upstream_support import require_manager, version


def test_the_manager_is_upstreams_release() -> None:
    binary = require_manager()
    info = subprocess.run(["go", "version", "-m", str(binary)], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    assert "k8s.io/cloud-provider-alibaba-cloud/cmd/manager" in info.stdout
    helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    assert f"Cloud Controller Manager Version: {version()}, git commit: " in helped.stderr


def test_the_manager_answers_with_upstreams_flags() -> None:
    binary = require_manager()
    helped = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
    usage = helped.stdout + helped.stderr
    for flag in ("--cloud-config", "--controllers", "--configure-cloud-routes", "--cluster-cidr"):
        assert flag in usage, f"{flag} not in upstream's usage:\n{usage[:2000]}"
