"""What the control-plane kit offers tests: minted identities under RBAC, apiserver restart."""

from __future__ import annotations

import asyncio

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import Forbidden
from kccm.kube.resources import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, NODES
from kccm.testing.controllers import eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

_RBAC = "rbac.authorization.k8s.io"


async def test_minted_user_is_subject_to_rbac(
    control_plane: ControlPlane, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    user, group = unique_name("user"), unique_name("group")
    path = control_plane.kubeconfig_for(user, groups=[group])
    client = KubeApiClient(load_cluster_config(str(path)), qps=0, burst=0)
    try:
        with pytest.raises(Forbidden, match=user):
            await client.list(NODES)
        role = kube_cleanup.add(CLUSTER_ROLES, unique_name("node-reader"))
        await kube.create(
            CLUSTER_ROLES,
            {
                "metadata": {"name": role},
                "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
            },
        )
        binding = kube_cleanup.add(CLUSTER_ROLE_BINDINGS, role)
        await kube.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "Group", "name": group, "apiGroup": _RBAC}],
            },
        )
        await _eventually_allowed(client)
        with pytest.raises(Forbidden):
            await client.get(NODES, "anything")  # only "list" was granted
    finally:
        await client.close()


async def _eventually_allowed(client: KubeApiClient) -> None:
    """RBAC changes reach the authorizer through an informer: allow it a moment."""

    async def allowed() -> bool:
        try:
            await client.list(NODES)
        except Forbidden:
            return False
        return True

    await eventually(allowed, 60, interval=0.1)


async def test_apiserver_restart_keeps_data_and_clients_reconnect(
    control_plane: ControlPlane, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    name = kube_cleanup.add(NODES, unique_name("node"))
    await kube.create(NODES, {"metadata": {"name": name}})
    before = control_plane.pids["kube-apiserver"]
    await asyncio.to_thread(control_plane.restart_apiserver)
    assert control_plane.pids["kube-apiserver"] != before
    node = await kube.get(NODES, name)
    assert node["metadata"]["name"] == name
