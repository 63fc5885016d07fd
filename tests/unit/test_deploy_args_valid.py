"""The shipped manifests start a daemon whose flags pass kccm's own validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kccm.app.cli import run_ccm
from kccm.app.config import ManagerConfig

ROOT = Path(__file__).resolve().parents[2]


def _container_args(path: Path) -> list[str]:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc["kind"] in ("Deployment", "DaemonSet"):
            return list(doc["spec"]["template"]["spec"]["containers"][0]["args"])
    raise AssertionError(f"no workload in {path}")


@pytest.mark.parametrize("manifest", ["deployment.yaml", "daemonset.yaml"])
def test_shipped_args_validate(manifest: str, tmp_path: Path) -> None:
    config_file = tmp_path / "cloud.conf"
    config_file.write_text("[Global]\nzone = z\n")
    args = [
        f"--cloud-config={config_file}" if a.startswith("--cloud-config=") else a
        for a in _container_args(ROOT / "deploy" / manifest)
    ]
    seen: list[ManagerConfig] = []

    def capture(config: ManagerConfig) -> int:
        seen.append(config)
        return 0

    assert run_ccm(args, run_manager=capture) == 0
    assert seen[0].leader_election.enabled
    assert seen[0].controller_options.route.cluster_cidr == "10.244.0.0/16"
