"""deploy/ and the rendered chart on the real apiserver: every object passes a server-side
dry-run apply, and the shipped RBAC, applied for real under unique names, lets the
ServiceAccount make each call of docs/deploy.md's table and refuses its neighbours."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import Forbidden, Invalid, NotFound
from kccm.kube.interface import PatchType
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIG_MAPS,
    DAEMON_SETS,
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    NODES,
    PERSISTENT_VOLUMES,
    POD_DISRUPTION_BUDGETS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    Resource,
)
from kccm.testing.controllers import eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.modules import load_module
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

support = load_module(
    "deploy_support", Path(__file__).resolve().parents[1] / "unit" / "deploy_support.py"
)
NS = "kube-system"
MANAGER = "kccm-manifest-test"
BY_KIND: dict[str, Resource] = {
    r.kind: r
    for r in (
        SERVICE_ACCOUNTS,
        CLUSTER_ROLES,
        CLUSTER_ROLE_BINDINGS,
        ROLES,
        ROLE_BINDINGS,
        SECRETS,
        DEPLOYMENTS,
        DAEMON_SETS,
        POD_DISRUPTION_BUDGETS,
    )
}


async def _apply(kube: KubeApiClient, doc: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    meta = doc["metadata"]
    return await kube.patch(
        BY_KIND[doc["kind"]],
        meta["name"],
        doc,
        patch_type=PatchType.APPLY,
        namespace=meta.get("namespace"),
        field_manager=MANAGER,
        force=True,
        dry_run=dry_run,
    )


# -- dry_run in the client ------------------------------------------------------------------


async def test_dry_run_create_and_patch_store_nothing(
    kube: KubeApiClient, kube_namespace: str
) -> None:
    body = {"metadata": {"name": "cm", "namespace": kube_namespace}, "data": {"a": "1"}}
    answered = await kube.create(CONFIG_MAPS, body, dry_run=True)
    assert answered["data"] == {"a": "1"}
    assert answered["metadata"]["uid"]
    with pytest.raises(NotFound):
        await kube.get(CONFIG_MAPS, "cm", namespace=kube_namespace)
    stored = await kube.create(CONFIG_MAPS, body)
    patched = await kube.patch(
        CONFIG_MAPS,
        "cm",
        {"data": {"a": "2"}},
        namespace=kube_namespace,
        patch_type=PatchType.MERGE,
        dry_run=True,
    )
    assert patched["data"] == {"a": "2"}
    assert await kube.get(CONFIG_MAPS, "cm", namespace=kube_namespace) == stored


# -- server-side dry-run apply ----------------------------------------------------------------


def _chart(*sets: str) -> list[dict[str, Any]]:
    docs = support.render_chart(*sets)
    assert isinstance(docs, list)
    return docs


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("deploy", id="deploy"),
        pytest.param("chart", id="chart-default"),
        pytest.param("chart-daemonset", id="chart-daemonset"),
    ],
)
async def test_every_object_passes_a_server_side_dry_run_apply(
    kube: KubeApiClient, source: str
) -> None:
    if source == "deploy":
        docs = support.deploy_docs()
    else:
        docs = _chart(*(["mode=daemonset"] if source == "chart-daemonset" else []))
    kinds = set()
    for doc in docs:
        answered = await _apply(kube, doc, dry_run=True)
        assert answered["kind"] == doc["kind"]
        assert answered["metadata"]["name"] == doc["metadata"]["name"]
        kinds.add(doc["kind"])
        if doc["kind"] in ("Deployment", "DaemonSet"):
            pod = answered["spec"]["template"]["spec"]
            assert (
                pod["containers"][0]["args"]
                == (doc["spec"]["template"]["spec"]["containers"][0]["args"])
            )
            assert pod["priorityClassName"] == "system-cluster-critical"
            assert pod["dnsPolicy"] == "ClusterFirst", "the apiserver defaulted the pod spec"
    expected = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert expected | {"Secret"} <= kinds
    # a dry run stores nothing
    for resource, name in (
        (DEPLOYMENTS, "cloud-controller-manager"),
        (DAEMON_SETS, "cloud-controller-manager"),
    ):
        with pytest.raises(NotFound):
            await kube.get(resource, name, namespace=NS)


async def test_the_dry_run_really_validates(kube: KubeApiClient) -> None:
    """A broken variant of the shipped Deployment is refused, so acceptance means something."""
    (deployment,) = [d for d in support.deploy_docs("deployment.yaml") if d["kind"] == "Deployment"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["tolerations"][0]["effect"] = "Sometimes"
    with pytest.raises(Invalid, match="effect"):
        await _apply(kube, broken, dry_run=True)


# -- the RBAC, applied for real under unique names ----------------------------------------------


def _renamed_rbac(unique: str) -> list[dict[str, Any]]:
    """deploy/rbac.yaml with every `cloud-controller-manager` (the ServiceAccount, roles,
    bindings and the lease name) replaced by ``unique``: the control plane is shared and never
    garbage-collects, and other tests may apply the real names."""
    text = json.dumps(support.deploy_docs("rbac.yaml"))
    return list(json.loads(text.replace("cloud-controller-manager", unique)))


@pytest.fixture
async def ccm_identity(
    kube: KubeApiClient, kube_cleanup: KubeCleanup, control_plane: ControlPlane
) -> AsyncIterator[tuple[str, list[str], KubeApiClient]]:
    """The shipped RBAC for a fresh ServiceAccount, and a client authenticated as it."""
    unique = unique_name("ccm")
    for doc in _renamed_rbac(unique):
        meta = doc["metadata"]
        kube_cleanup.add(BY_KIND[doc["kind"]], meta["name"], meta.get("namespace"))
        await _apply(kube, doc, dry_run=False)
    user = f"system:serviceaccount:{NS}:{unique}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    config = load_cluster_config(str(control_plane.kubeconfig_for(user, groups)))
    client = KubeApiClient(config, qps=0, burst=0)
    try:
        yield unique, groups, client
    finally:
        await client.close()


async def _allowed(
    kube: KubeApiClient, user: str, groups: list[str], attributes: dict[str, str]
) -> bool:
    review = await kube.create(
        SUBJECT_ACCESS_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
        },
    )
    return bool(review["status"].get("allowed"))


def _attributes(group: str, resource: str, verb: str, **extra: str) -> dict[str, str]:
    plural, _, sub = resource.partition("/")
    attrs = {"group": group, "resource": plural, "verb": verb, **extra}
    if sub:
        attrs["subresource"] = sub
    return attrs


def _granted(unique: str) -> list[dict[str, str]]:
    """The access review attributes of every row of the documented table."""
    rows = []
    for (group, resource, verb), granted in sorted(support.doc_table().items()):
        extra = {"namespace": NS, "name": unique} if granted.startswith("Role") else {}
        if granted.startswith("built-in Role `extension-apiserver-authentication-reader`"):
            extra = {"namespace": NS, "name": "extension-apiserver-authentication"}
        if resource == "events":
            extra = {"namespace": "default"}
        if verb == "create":
            extra.pop("name", None)
        rows.append(_attributes(group, resource, verb, **extra))
    return rows


async def _denied(kube: KubeApiClient, user: str, groups: list[str], unique: str) -> list[Any]:
    return [a for a in _granted(unique) if not await _allowed(kube, user, groups, a)]


async def _wait_for_the_grants(
    kube: KubeApiClient, user: str, groups: list[str], unique: str
) -> list[Any]:
    """RBAC objects reach the apiserver's authorizer through one informer per kind (Roles,
    RoleBindings, ClusterRoles, ClusterRoleBindings): wait until every documented grant is
    in force; the rows still denied then (none, unless RBAC is wrong)."""

    async def in_force() -> bool:
        return not await _denied(kube, user, groups, unique)

    with contextlib.suppress(TimeoutError):
        await eventually(in_force, 60, interval=0.2)
    return await _denied(kube, user, groups, unique)


async def test_service_account_may_do_exactly_the_table(
    kube: KubeApiClient, ccm_identity: tuple[str, list[str], KubeApiClient]
) -> None:
    unique, groups, _ = ccm_identity
    user = f"system:serviceaccount:{NS}:{unique}"
    assert await _wait_for_the_grants(kube, user, groups, unique) == []
    refused = [
        _attributes("", "services", "delete", namespace="default"),
        _attributes("", "services", "patch", namespace="default"),
        _attributes("", "secrets", "list", namespace=NS),
        _attributes("", "secrets", "get", namespace=NS),
        _attributes("", "nodes", "update"),
        _attributes("", "nodes", "create"),
        _attributes("", "persistentvolumes", "delete"),
        _attributes("", "pods", "list"),
        _attributes("", "configmaps", "list", namespace=NS),
        _attributes("", "events", "delete", namespace="default"),
        _attributes("coordination.k8s.io", "leases", "get", namespace="default", name=unique),
        _attributes("coordination.k8s.io", "leases", "update", namespace=NS, name="other"),
        _attributes("coordination.k8s.io", "leases", "delete", namespace=NS, name=unique),
        _attributes("rbac.authorization.k8s.io", "clusterroles", "create"),
    ]
    for attrs in refused:
        assert not await _allowed(kube, user, groups, attrs), attrs
    # kccm explain reads the one Service it is asked about (app/explain.py)
    assert await _allowed(
        kube, user, groups, _attributes("", "services", "get", namespace="default")
    )
    # the upstream-parity binding: read the authentication ConfigMap, nothing else there
    reader = _attributes("", "configmaps", "get", namespace=NS)
    assert await _allowed(
        kube, user, groups, {**reader, "name": "extension-apiserver-authentication"}
    )
    assert not await _allowed(kube, user, groups, {**reader, "name": "kube-root-ca.crt"})


async def test_service_account_performs_the_calls(
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    kube_namespace: str,
    ccm_identity: tuple[str, list[str], KubeApiClient],
) -> None:
    unique, groups, ccm = ccm_identity
    user = f"system:serviceaccount:{NS}:{unique}"
    assert await _wait_for_the_grants(kube, user, groups, unique) == []
    # nodes: list, watch, get, patch, status patch, delete
    node = kube_cleanup.add(NODES, unique_name("node"))
    await kube.create(NODES, {"metadata": {"name": node}})
    listed = await ccm.list(NODES)
    async for _event in ccm.watch(
        NODES, resource_version=listed.resource_version, timeout_seconds=1
    ):
        pass
    await ccm.get(NODES, node)
    await ccm.patch(NODES, node, {"metadata": {"labels": {"zone": "a"}}})
    condition = {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
    await ccm.patch(NODES, node, {"status": {"conditions": [condition]}}, subresource="status")
    await ccm.delete(NODES, node)
    # services: list, status patch; no delete
    service = {
        "metadata": {"name": "lb", "namespace": kube_namespace},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    await kube.create(SERVICES, service)
    await ccm.list(SERVICES)
    ingress = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    await ccm.patch(SERVICES, "lb", ingress, namespace=kube_namespace, subresource="status")
    with pytest.raises(Forbidden):
        await ccm.delete(SERVICES, "lb", namespace=kube_namespace)
    with pytest.raises(Forbidden):
        await ccm.list(SECRETS, namespace=NS)
    # persistent volumes: list, patch
    pv = kube_cleanup.add(PERSISTENT_VOLUMES, unique_name("pv"))
    await kube.create(
        PERSISTENT_VOLUMES,
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": "/tmp/pv"},
            },
        },
    )
    await ccm.list(PERSISTENT_VOLUMES)
    await ccm.patch(
        PERSISTENT_VOLUMES, pv, {"metadata": {"labels": {"zone": "a"}}}, patch_type=PatchType.MERGE
    )
    # events: create, patch
    event = await ccm.create(
        EVENTS,
        {
            "metadata": {"name": "lb.1", "namespace": kube_namespace},
            "involvedObject": {"kind": "Service", "name": "lb", "namespace": kube_namespace},
            "reason": "Test",
            "message": "m",
            "type": "Normal",
            "count": 1,
        },
    )
    await ccm.patch(EVENTS, event["metadata"]["name"], {"count": 2}, namespace=kube_namespace)
    # leases: create, get, update on the lock; not another lease
    kube_cleanup.add(LEASES, unique, NS)
    lease = await ccm.create(
        LEASES,
        {"metadata": {"name": unique, "namespace": NS}, "spec": {"holderIdentity": "a"}},
    )
    lease = await ccm.get(LEASES, unique, namespace=NS)
    await ccm.replace(LEASES, {**lease, "spec": {"holderIdentity": "b"}})
    with pytest.raises(Forbidden):
        await ccm.get(LEASES, "kube-scheduler", namespace=NS)
    # delegated authn/authz
    review = await ccm.create(
        TOKEN_REVIEWS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "x"}},
    )
    assert review["status"].get("authenticated") is not True
    await ccm.create(
        SUBJECT_ACCESS_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": "nobody",
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        },
    )
