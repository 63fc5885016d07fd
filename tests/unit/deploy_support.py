"""Shared by the deploy tests (unit and integration): load deploy/, render the chart with the
helm built by hack/helm/build.sh, parse the RBAC table of docs/deploy.md, and scan src/kccm
for the API calls the daemon makes.

Not a test module; tests/integration/test_manifests.py loads it by path.
"""

from __future__ import annotations

import ast
import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kccm.kube import resources

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = ROOT / "charts" / "kccm"
DOC = ROOT / "docs" / "deploy.md"
SRC = ROOT / "src" / "kccm"

# The plain manifests the chart's default (deployment mode) render must equal.
DEFAULT_SET = ("rbac.yaml", "cloud-config-secret.yaml", "deployment.yaml")

Obj = dict[str, Any]
Key = tuple[str, str | None, str]  # kind, namespace, name
Permission = tuple[str, str, str]  # api group ("" = core), resource[/subresource], verb


def load_docs(paths: Iterable[Path]) -> list[Obj]:
    docs: list[Obj] = []
    for path in paths:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def by_key(docs: Iterable[Obj]) -> dict[Key, Obj]:
    out: dict[Key, Obj] = {}
    for doc in docs:
        meta = doc["metadata"]
        key = (doc["kind"], meta.get("namespace"), meta["name"])
        assert key not in out, f"duplicate object {key}"
        out[key] = doc
    return out


def deploy_docs(*names: str) -> list[Obj]:
    return load_docs(DEPLOY / n for n in (names or sorted(p.name for p in DEPLOY.glob("*.yaml"))))


# -- helm -------------------------------------------------------------------------------------


def helm_binary() -> Path:
    """The helm built by hack/helm/build.sh; skip (or fail under KCCM_REQUIRE_CONTROL_PLANE=1,
    as CI runs) when it has not been built."""
    out = subprocess.run(
        ["bash", str(ROOT / "hack/helm/build.sh"), "--print-dir"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    helm = Path(out) / "helm"
    if not os.access(helm, os.X_OK):
        reason = f"helm is not built ({helm}); run `make helm`"
        if os.environ.get("KCCM_REQUIRE_CONTROL_PLANE", "") not in ("", "0", "false"):
            pytest.fail(reason)
        pytest.skip(reason)
    return helm


def render_chart(*sets: str, expect_failure: bool = False) -> list[Obj] | str:
    """``helm template`` the chart with ``--set`` values: the objects, or the error text."""
    cmd = [str(helm_binary()), "template", "kccm", str(CHART)]
    for value in sets:
        cmd += ["--set", value]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if expect_failure:
        assert proc.returncode != 0, proc.stdout
        return proc.stderr
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


# -- RBAC -------------------------------------------------------------------------------------


def doc_table() -> dict[Permission, str]:
    """docs/deploy.md's RBAC table: (group, resource, verb) -> where it is granted."""
    text = DOC.read_text()
    body = text.split("<!-- rbac-table:start -->")[1].split("<!-- rbac-table:end -->")[0]
    rows = [line for line in body.strip().splitlines() if line.startswith("|")][2:]
    table: dict[Permission, str] = {}
    for row in rows:
        group, resource, verbs, granted = (c.strip() for c in row.strip("|").split("|")[:4])
        for verb in verbs.split(","):
            table[("" if group == "core" else group, resource, verb.strip())] = granted
    return table


def rule_permissions(rules: Iterable[Mapping[str, Any]]) -> Iterator[Permission]:
    for rule in rules:
        for group in rule.get("apiGroups", ()):
            for resource in rule.get("resources", ()):
                for verb in rule.get("verbs", ()):
                    yield group, resource, verb


_VERBS = {
    "get": ("get",),
    "list": ("list",),
    "list_pages": ("list",),
    "watch": ("watch",),
    "create": ("create",),
    "patch": ("patch",),
    "replace": ("update",),
    "delete": ("delete",),
    "informer": ("list", "watch"),  # an informer lists then watches
}
# Not the daemon: the kube client itself, the test kit, `kccm dev up` and `kccm dev demo`.
# providers/vsphere reads its credentials Secret only when configured so; its opt-in grant is
# examples/vsphere/secret-reader-rbac.yaml (docs/providers/vsphere.md), not deploy/rbac.yaml;
# providers/azure reads its config Secret only without --cloud-config, granted by
# examples/azure/config-secret-reader-rbac.yaml (docs/providers/azure.md).
_NOT_DAEMON = (
    "kube/",
    "testing/",
    "devtools/",
    "providers/vsphere/credentials.py",
    "providers/azure/configsecret.py",
    # `kccm explain` runs as the user, with the user's kubeconfig (deploy/explain-reader.yaml)
    "app/explain_cli.py",
)


def scan_calls() -> dict[Permission, list[str]]:
    """Every ``<x>.<method>(<RESOURCE CONSTANT>, ...)`` call in the daemon's code, as RBAC
    permissions with their call sites. A call whose ``subresource`` is not a literal fails."""
    constants = {
        name: value
        for name, value in vars(resources).items()
        if isinstance(value, resources.Resource)
    }
    found: dict[Permission, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(_NOT_DAEMON):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            verbs = _VERBS.get(node.func.attr)
            first = node.args[0] if node.args else None
            if verbs is None or not (isinstance(first, ast.Name) and first.id in constants):
                continue
            res = constants[first.id]
            plural = res.plural
            for kw in node.keywords:
                if kw.arg == "subresource":
                    assert isinstance(kw.value, ast.Constant), f"{rel}:{node.lineno}"
                    if kw.value.value is not None:
                        plural = f"{plural}/{kw.value.value}"
            for verb in verbs:
                found.setdefault((res.group, plural, verb), []).append(f"{rel}:{node.lineno}")
    return found
