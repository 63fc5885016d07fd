"""deploy/ workloads carry what issue 6 asks for; the Dockerfile is multi-stage and non-root."""

from __future__ import annotations

import copy
import io
import json
import re
from typing import Any

from deploy_support import DEPLOY, ROOT, Obj, by_key, deploy_docs

from kccm.providers.fake import new_fake_cloud

NS = "kube-system"
ARGS = [
    "--cloud-provider=fake",
    "--cloud-config=/etc/kubernetes/cloud-config/cloud.conf",
    "--cluster-cidr=10.244.0.0/16",
    "--leader-elect=true",
    "--use-service-account-credentials=false",
    "--secure-port=10258",
    "--bind-address=0.0.0.0",
    "--v=2",
]
LABELS = {
    "app.kubernetes.io/name": "kccm",
    "app.kubernetes.io/component": "cloud-controller-manager",
}


def _one(name: str, kind: str) -> Obj:
    return by_key(deploy_docs(name))[(kind, NS, "cloud-controller-manager")]


def _pod(kind: str = "Deployment") -> Any:
    return _one(f"{kind.lower()}.yaml", kind)["spec"]["template"]["spec"]


def test_every_object_lives_in_kube_system_and_is_labelled() -> None:
    for doc in deploy_docs():
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == NS, doc["metadata"]["name"]
        assert doc["metadata"]["labels"] == LABELS


def test_deployment_replicas_selector_and_pdb() -> None:
    deployment = _one("deployment.yaml", "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"]["matchLabels"] == LABELS
    assert deployment["spec"]["template"]["metadata"]["labels"] == LABELS
    pdb = by_key(deploy_docs("deployment.yaml"))[
        ("PodDisruptionBudget", NS, "cloud-controller-manager")
    ]
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": LABELS}}


def test_pod_spec() -> None:
    pod = _pod()
    assert pod["serviceAccountName"] == "cloud-controller-manager"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["hostNetwork"] is True
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [
        {"labelSelector": {"matchLabels": LABELS}, "topologyKey": "kubernetes.io/hostname"}
    ]
    taints = {(t["key"], t["effect"]) for t in pod["tolerations"]}
    assert taints == {
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("node-role.kubernetes.io/control-plane", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
    }
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_container() -> None:
    (container,) = _pod()["containers"]
    assert container["image"] == "ghcr.io/kccm/kccm:0.1.0"
    assert container["args"] == ARGS
    assert "command" not in container, "the image's ENTRYPOINT is kccm"
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get == {"path": "/healthz", "port": 10258, "scheme": "HTTPS"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}


def test_cloud_config_secret_is_mounted_where_the_args_point() -> None:
    pod = _pod()
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["cloud-config"] == {
        "name": "cloud-config",
        "mountPath": "/etc/kubernetes/cloud-config",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret = volumes["cloud-config"]["secret"]
    assert secret["defaultMode"] == 0o440
    shipped = by_key(deploy_docs("cloud-config-secret.yaml"))[("Secret", NS, secret["secretName"])]
    assert "cloud.conf" in shipped["stringData"]
    assert volumes["tmp"] == {"name": "tmp", "emptyDir": {}}, "writable /tmp under a read-only root"
    assert mounts["tmp"]["mountPath"] == "/tmp"


def test_daemonset_is_the_same_pod_on_control_plane_nodes() -> None:
    daemonset = _one("daemonset.yaml", "DaemonSet")
    assert daemonset["spec"]["selector"]["matchLabels"] == LABELS
    pod = copy.deepcopy(_pod("DaemonSet"))
    assert pod.pop("nodeSelector") == {"node-role.kubernetes.io/control-plane": ""}
    expected = copy.deepcopy(_pod())
    del expected["affinity"]
    assert pod == expected


# -- Dockerfile -------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_slim_and_non_root() -> None:
    steps = _instructions()
    stages = [rest for word, rest in steps if word == "FROM"]
    assert len(stages) >= 2, "multi-stage"
    assert [s.split()[-1] for s in stages] == ["builder", "runtime"]
    assert ("ARG", "PYTHON_IMAGE=python:3.11-slim") in steps
    runtime = steps[[i for i, s in enumerate(steps) if s[0] == "FROM"][-1] :]
    assert ("COPY", "--from=builder /opt/kccm /opt/kccm") in runtime
    users = [rest for word, rest in runtime if word == "USER"]
    assert users == ["65532:65532"], "the final stage runs as uid 65532"
    entry = [rest for word, rest in runtime if word == "ENTRYPOINT"]
    assert [json.loads(e) for e in entry] == [["kccm"]]
    builder = steps[: [i for i, s in enumerate(steps) if s[0] == "FROM"][-1]]
    assert any(w == "RUN" and "pip wheel" in r and "venv" in r for w, r in builder)


def test_dockerignore_keeps_the_context_to_the_package() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[lines.index("*") :][:4] == ["*", "!pyproject.toml", "!README.md", "!src/"]


def test_deploy_holds_only_the_documented_files() -> None:
    assert sorted(p.name for p in DEPLOY.iterdir()) == [
        "cloud-config-secret.yaml",
        "daemonset.yaml",
        "deployment.yaml",
        "explain-reader.yaml",
        "rbac.yaml",
    ]


def test_the_example_cloud_config_is_valid_for_the_fake_provider() -> None:
    (secret,) = deploy_docs("cloud-config-secret.yaml")
    cloud = new_fake_cloud(io.StringIO(secret["stringData"]["cloud.conf"]))
    assert cloud.zone.failure_domain == "fake-zone-a"
    assert cloud.zone.region == "fake-region"
