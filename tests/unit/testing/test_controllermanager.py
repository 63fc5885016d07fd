"""kube-controller-manager's command line and how a missing binary is reported (no binaries)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kccm.testing import controlplane
from kccm.testing.controllermanager import (
    CONTROLLERS,
    ControllerManagerSettings,
    controller_manager_argv,
)


def _argv(settings: ControllerManagerSettings | None = None) -> list[str]:
    return controller_manager_argv(
        Path("/bin/kube-controller-manager"),
        kubeconfig=Path("/k/kcm.kubeconfig"),
        pki=Path("/k/pki"),
        cert_dir=Path("/k/kcm"),
        port=12345,
        settings=settings or ControllerManagerSettings(),
    )


def _flag(argv: list[str], name: str) -> str:
    values = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    assert len(values) == 1, f"--{name} given {len(values)} times in {argv}"
    return values[0]


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        pytest.param("cloud-provider", "external", id="cloud-loops-belong-to-kccm"),
        pytest.param("use-service-account-credentials", "true", id="a-token-per-controller"),
        pytest.param("service-account-private-key-file", "/k/pki/sa.key", id="signs-tokens"),
        pytest.param("root-ca-file", "/k/pki/ca.crt", id="publishes-the-ca"),
        pytest.param("kubeconfig", "/k/kcm.kubeconfig", id="kubeconfig"),
        pytest.param("secure-port", "12345", id="healthz-port"),
        pytest.param("bind-address", "127.0.0.1", id="loopback-only"),
        pytest.param("leader-elect", "false", id="single-instance"),
        pytest.param("node-monitor-period", "1000ms", id="monitor-period"),
        pytest.param("node-monitor-grace-period", "5000ms", id="grace-period"),
        pytest.param("node-startup-grace-period", "10000ms", id="startup-grace"),
    ],
)
def test_command_line(flag: str, expected: str) -> None:
    assert _flag(_argv(), flag) == expected


@pytest.mark.parametrize(
    "controller",
    [
        "namespace-controller",
        "garbage-collector-controller",
        "node-lifecycle-controller",
        "serviceaccount-controller",
        "serviceaccount-token-controller",
    ],
)
def test_runs_what_a_ccm_needs_beside_it(controller: str) -> None:
    assert controller in _flag(_argv(), "controllers").split(",")


@pytest.mark.parametrize(
    "controller",
    ["cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller"],
)
def test_never_runs_the_cloud_controllers(controller: str) -> None:
    assert controller not in _flag(_argv(), "controllers").split(",")


def test_grace_periods_follow_the_settings() -> None:
    argv = _argv(ControllerManagerSettings(node_monitor_grace_period=2.5))
    assert _flag(argv, "node-monitor-grace-period") == "2500ms"


def test_default_controllers_are_the_documented_list() -> None:
    assert ControllerManagerSettings().controllers == CONTROLLERS


def _fake_binaries(directory: Path, names: list[str]) -> None:
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\n")
        os.chmod(path, 0o755)


def test_a_missing_controller_manager_is_named_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_binaries(tmp_path, ["etcd", "kube-apiserver"])
    monkeypatch.setenv("KCCM_CONTROL_PLANE_BIN", str(tmp_path))
    found = controlplane.find_binaries()
    assert (found.kube_controller_manager, found.kubectl) == (None, None)
    with pytest.raises(
        controlplane.ControlPlaneError, match=r"kube-controller-manager.*make controlplane"
    ):
        controlplane.find_binaries(controller_manager=True)


def test_controller_manager_and_kubectl_are_found_beside_the_apiserver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_binaries(tmp_path, ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"])
    monkeypatch.setenv("KCCM_CONTROL_PLANE_BIN", str(tmp_path))
    found = controlplane.find_binaries(controller_manager=True)
    assert found.kube_controller_manager == tmp_path / "kube-controller-manager"
    assert found.kubectl == tmp_path / "kubectl"
