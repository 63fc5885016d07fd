"""Fixtures of the daemon end-to-end tests: the shipped RBAC applied, a cluster of daemons."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from daemon_e2e_support import (
    ROOT,
    Cluster,
)

from kccm.kube.client import KubeApiClient
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemons, apply_rbac


@pytest.fixture
async def cluster(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> AsyncIterator[Cluster]:
    await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-e2e")
    c = Cluster(control_plane, tmp_path, kube, Daemons(tmp_path))
    try:
        yield c
    finally:
        c.stop_all()
