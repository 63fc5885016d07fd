"""The shared API-server behaviour table, run against the real kube-apiserver."""

from __future__ import annotations

import asyncio

import pytest

from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES
from kccm.testing.controlplane import ControlPlane
from kccm.testing.kubecontract import CASES, KubeCase, KubeCaseEnv
from kccm.testing.pytest_plugin import KubeCleanup


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
async def test_real_api_server_matches_the_table(
    case: KubeCase,
    control_plane: ControlPlane,
    kube: KubeApiClient,
    kube_namespace: str,
    kube_cleanup: KubeCleanup,
) -> None:
    async def compact() -> None:
        await asyncio.to_thread(control_plane.compact_etcd)

    env = KubeCaseEnv(client=kube, namespace=kube_namespace, compact=compact)
    try:
        await case.run(env)
    finally:
        for name in env.created_nodes:
            kube_cleanup.add(NODES, name)
