"""The shipped RBAC grants exactly what the daemon's code calls: the code scan, the table in
docs/deploy.md and the rules in deploy/rbac.yaml are one set. (The integration counterpart,
tests/integration/test_manifests.py, checks the grants on the real apiserver.)"""

from __future__ import annotations

from deploy_support import Key, Obj, by_key, deploy_docs, doc_table, rule_permissions, scan_calls

NS = "kube-system"
SA = {"kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": NS}


def _rbac() -> dict[Key, Obj]:
    return by_key(deploy_docs("rbac.yaml"))


def test_the_doc_table_is_exactly_what_the_code_calls() -> None:
    table = set(doc_table())
    calls = scan_calls()
    assert set(calls) - table == set(), "called but missing from docs/deploy.md"
    assert table - set(calls) == set(), "in docs/deploy.md but never called"


def test_the_scan_sees_the_known_call_sites() -> None:
    """Guards the scanner itself: a few call sites it must recognise."""
    calls = scan_calls()
    assert any(s.startswith("controllers/nodelifecycle.py") for s in calls[("", "nodes", "delete")])
    assert any(
        s.startswith("runtime/leaderelection.py")
        for s in calls[("coordination.k8s.io", "leases", "update")]
    )
    assert any(
        s.startswith("controllers/service_patches.py")
        for s in calls[("", "services/status", "patch")]
    )
    assert ("", "services", "patch") not in calls, "services are patched via status only"


def test_cluster_role_and_lease_role_grant_exactly_the_table() -> None:
    rbac = _rbac()
    table = doc_table()
    cluster = set(
        rule_permissions(rbac[("ClusterRole", None, "system:cloud-controller-manager")]["rules"])
    )
    role = rbac[("Role", NS, "system::leader-locking-cloud-controller-manager")]
    namespaced = set(rule_permissions(role["rules"]))
    assert cluster == {p for p, by in table.items() if by == "ClusterRole"}
    assert namespaced == {p for p, by in table.items() if by.startswith("Role")}
    # get/update only on the lock; create cannot be limited to a name
    for rule in role["rules"]:
        if rule["verbs"] == ["create"]:
            assert "resourceNames" not in rule
        else:
            assert rule["resourceNames"] == ["cloud-controller-manager"]


def test_no_wildcards_and_no_duplicate_grants() -> None:
    for doc in deploy_docs("rbac.yaml"):
        perms = list(rule_permissions(doc.get("rules", ())))
        assert len(perms) == len(set(perms)), doc["metadata"]["name"]
        assert not any("*" in p for perm in perms for p in perm)


def test_bindings_name_the_service_account() -> None:
    rbac = _rbac()
    assert ("ServiceAccount", NS, "cloud-controller-manager") in rbac
    bindings = {k: v for k, v in rbac.items() if k[0].endswith("Binding")}
    refs = {(v["roleRef"]["kind"], v["roleRef"]["name"]) for v in bindings.values()}
    assert refs == {
        ("ClusterRole", "system:cloud-controller-manager"),
        ("Role", "system::leader-locking-cloud-controller-manager"),
        ("Role", "extension-apiserver-authentication-reader"),
    }
    for (kind, namespace, _), binding in bindings.items():
        assert binding["subjects"] == [SA]
        assert namespace == (None if kind == "ClusterRoleBinding" else NS)


EXPLAIN_URLS = ["/debug/kccm/explain", "/debug/kccm/explain/*"]


def test_the_explain_reader_role_grants_only_get_on_the_explain_paths() -> None:
    """Opt-in (its own file, bound by the admin): the only rule is `get` on the non-resource
    explain paths, which the daemon's delegated authorization checks (kccm.app.explain)."""
    from kccm.app.explain import EXPLAIN_PATH

    docs = deploy_docs("explain-reader.yaml")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ClusterRole", "kccm-explain-reader"),
        ("Role", "kccm-explain-proxy"),
    ]
    assert docs[0]["rules"] == [{"nonResourceURLs": EXPLAIN_URLS, "verbs": ["get"]}]
    # the pod-proxy route: the Lease (and the others' Leases: who serves a class) and the proxy
    assert docs[1]["metadata"]["namespace"] == NS
    assert set(rule_permissions(docs[1]["rules"])) == {
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "list"),
        ("", "pods/proxy", "get"),
    }
    assert EXPLAIN_URLS == [EXPLAIN_PATH, EXPLAIN_PATH + "/*"]
    shipped = by_key(deploy_docs("rbac.yaml"))
    assert all(k[2] != "kccm-explain-reader" for k in shipped), "opt-in: not in rbac.yaml"
