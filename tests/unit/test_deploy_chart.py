"""charts/kccm renders deploy/ by default and follows its values (helm from hack/helm)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from deploy_support import CHART, DEFAULT_SET, Obj, by_key, deploy_docs, helm_binary, render_chart

pytestmark = pytest.mark.helm  # make test runs these once the Go builds are done


def _render(*sets: str) -> list[Obj]:
    docs = render_chart(*sets)
    assert isinstance(docs, list)
    return docs


def _workload(docs: list[Obj], kind: str = "Deployment") -> Obj:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _container(docs: list[Obj], kind: str = "Deployment") -> Any:
    return _workload(docs, kind)["spec"]["template"]["spec"]["containers"][0]


def test_default_render_equals_deploy_object_by_object() -> None:
    rendered, shipped = by_key(_render()), by_key(deploy_docs(*DEFAULT_SET))
    assert sorted(rendered, key=str) == sorted(shipped, key=str)
    for key, obj in shipped.items():
        assert rendered[key] == obj, key


def test_daemonset_mode_renders_deploy_daemonset() -> None:
    rendered = by_key(_render("mode=daemonset"))
    shipped = by_key(deploy_docs("rbac.yaml", "cloud-config-secret.yaml", "daemonset.yaml"))
    assert rendered == shipped  # and no Deployment or PodDisruptionBudget


def test_values_image_provider_replicas_extra_args() -> None:
    docs = _render(
        "image.repository=example.org/ccm",
        "image.tag=1.2",
        "cloudProvider=acme",
        "replicas=3",
        "verbosity=4",
        "extraArgs={--controllers=*\\,-route,--cluster-cidr=10.244.0.0/16}",
    )
    container = _container(docs)
    assert container["image"] == "example.org/ccm:1.2"
    assert _workload(docs)["spec"]["replicas"] == 3
    assert container["args"][0] == "--cloud-provider=acme"
    assert "--v=4" in container["args"]
    assert container["args"][-2:] == ["--controllers=*,-route", "--cluster-cidr=10.244.0.0/16"]


def test_existing_secret_replaces_the_generated_one() -> None:
    docs = _render("cloudConfig.existingSecret=my-cloud")
    assert not [d for d in docs if d["kind"] == "Secret"]
    volumes = _workload(docs)["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["secret"]["secretName"] == "my-cloud"


def test_cloud_config_content_goes_into_the_secret() -> None:
    docs = _render("cloudConfig.content=[Global]\nzone = a\n")
    (secret,) = [d for d in docs if d["kind"] == "Secret"]
    assert secret["stringData"]["cloud.conf"] == "[Global]\nzone = a\n"


def test_scheduling_values() -> None:
    docs = _render(
        "nodeSelector.pool=system",
        "tolerations=null",
        "podDisruptionBudget.enabled=false",
        "resources.limits.memory=512Mi",
    )
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    pod = _workload(docs)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "system"}
    assert "tolerations" not in pod
    assert pod["containers"][0]["resources"]["limits"] == {"memory": "512Mi"}
    ds = _workload(_render("mode=daemonset", "nodeSelector.pool=system"), "DaemonSet")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}


def test_leader_election_values_reach_args_and_the_lease_role() -> None:
    docs = _render("leaderElection.resourceName=acme-ccm")
    assert "--leader-elect-resource-name=acme-ccm" in _container(docs)["args"]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["rules"][1]["resourceNames"] == ["acme-ccm"]
    off = _render("leaderElection.enabled=false")
    assert "--leader-elect=false" in _container(off)["args"]
    assert not [d for d in off if d["kind"] == "Role"]


def test_unknown_mode_is_refused() -> None:
    error = render_chart("mode=statefulset", expect_failure=True)
    assert "mode must be deployment or daemonset" in str(error)


def test_another_namespace_moves_everything_but_the_authentication_reader_binding() -> None:
    docs = _render("namespace=ccm")
    assert "--leader-elect-resource-namespace=ccm" in _container(docs)["args"]
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        if doc["metadata"]["name"].endswith(":apiserver-authentication-reader"):
            assert namespace == "kube-system", "the ConfigMap it reads lives there"
        elif doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert namespace == "ccm", doc["metadata"]["name"]
        for subject in doc.get("subjects", ()):
            assert subject["namespace"] == "ccm"


def test_helm_lint_strict_passes() -> None:
    proc = subprocess.run(
        [str(helm_binary()), "lint", "--strict", str(CHART)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_env_value() -> None:
    assert "env" not in _container(_render())
    docs = _render("env[0].name=KUBERNETES_SERVICE_HOST", "env[0].value=10.0.0.10")
    assert _container(docs)["env"] == [{"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.10"}]


def test_node_metadata_refresh_period_is_an_opt_in_flag() -> None:
    def refresh_args(*values: str) -> list[str]:
        args = _container(_render(*values))["args"]
        return [a for a in args if a.startswith("--node-metadata-refresh-period")]

    assert refresh_args() == [], "default: upstream's cadence, no flag"
    assert refresh_args("nodeMetadataRefreshPeriod=1h") == ["--node-metadata-refresh-period=1h"]


def test_explain_reader_is_opt_in_and_renders_deploy_explain_reader() -> None:
    assert not [d for d in _render() if d["metadata"]["name"] == "kccm-explain-reader"]
    docs = by_key(_render("explainReader.enabled=true"))
    role, proxy = deploy_docs("explain-reader.yaml")
    assert docs[("ClusterRole", None, "kccm-explain-reader")] == role
    assert docs[("Role", "kube-system", "kccm-explain-proxy")] == proxy
    assert not [k for k in docs if k[0].endswith("Binding") and k[2].startswith("kccm-explain")]
    bound = by_key(
        _render(
            "explainReader.enabled=true",
            "explainReader.subjects[0].kind=Group",
            "explainReader.subjects[0].name=sre",
            "explainReader.subjects[0].apiGroup=rbac.authorization.k8s.io",
        )
    )
    sre = [{"kind": "Group", "name": "sre", "apiGroup": "rbac.authorization.k8s.io"}]
    binding = bound[("ClusterRoleBinding", None, "kccm-explain-reader")]
    assert (binding["roleRef"]["name"], binding["subjects"]) == ("kccm-explain-reader", sre)
    local = bound[("RoleBinding", "kube-system", "kccm-explain-proxy")]
    assert (local["roleRef"]["name"], local["subjects"]) == ("kccm-explain-proxy", sre)
