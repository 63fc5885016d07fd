from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kccm.kube.config import KubeConfigError, load_cluster_config


def _kubeconfig(tmp_path: Path, server: str = "https://10.9.9.9:6443") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "secret-token"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def test_kubeconfig_file(tmp_path: Path) -> None:
    config = load_cluster_config(str(_kubeconfig(tmp_path)))
    assert config.server == "https://10.9.9.9:6443"
    assert config.source.startswith("kubeconfig ")


def test_master_overrides_the_kubeconfig_server(tmp_path: Path) -> None:
    config = load_cluster_config(str(_kubeconfig(tmp_path)), master="https://127.0.0.1:1")
    assert config.server == "https://127.0.0.1:1"
    assert config.user_name == "u"


def test_master_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = load_cluster_config(master="http://127.0.0.1:8080")
    assert config.server == "http://127.0.0.1:8080"


def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("tok")
    (tmp_path / "namespace").write_text("kube-system")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_cluster_config(service_account_dir=str(tmp_path))
    assert config.server == "https://10.96.0.1:443"
    assert config.source == "in-cluster service account"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "does not exist", id="missing-file"),
        pytest.param(
            "current-context: nope\ncontexts: []\n", "lacks the key 'clusters'", id="no-clusters"
        ),
        pytest.param("{}", "lacks the key", id="empty-document"),
        pytest.param("just some text\n", "is not a kubeconfig", id="plain-text"),
        pytest.param("hello: [1, 2\n", r"is not valid YAML \(line \d+\)", id="broken-yaml"),
        pytest.param("- a\n- b\n", "is not a kubeconfig", id="yaml-list"),
        pytest.param(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "is not a kubeconfig", id="a-pod"
        ),
        pytest.param("clusters: 7\ncontexts: []\n", "kubeconfig", id="clusters-not-a-list"),
    ],
)
def test_bad_kubeconfig_names_the_file(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "kc"
    if content is not None:
        path.write_text(content)
    with pytest.raises(KubeConfigError, match=message) as info:
        load_cluster_config(str(path))
    assert str(path) in str(info.value)


def test_without_flags_outside_a_cluster_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like client-go: no --kubeconfig and no --master means in-cluster, never $KUBECONFIG or
    ~/.kube/config (both point at a valid file here)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path)))
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(_kubeconfig(tmp_path).read_text())
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeConfigError, match="pass --kubeconfig") as info:
        load_cluster_config(service_account_dir=str(tmp_path / "none"))
    assert "not running in a cluster" in str(info.value)
