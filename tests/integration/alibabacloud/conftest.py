"""Fixtures the tests that run upstream's manager share: ``emu`` (a fresh emulator, after
checking that the manager is built: skipped, or failed under ``KCCM_REQUIRE_CONTROL_PLANE=1``,
before anything starts), ``upstream`` (the test's upstream processes, stopped at its end) and
``instances`` (two ECS instances with Ready Nodes named after them)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from alibabacloud_upstream_support import VPC, VSWITCH, require_manager

from kccm.emulators.alibabacloud import AlibabaEmulator, alibaba_emulator
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import NODES
from kccm.testing.pytest_plugin import KubeCleanup
from kccm.testing.upstream import UpstreamProcesses, running_processes


@pytest.fixture
def emu() -> Iterator[AlibabaEmulator]:
    require_manager()
    with alibaba_emulator() as running:
        yield running


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[UpstreamProcesses]:
    yield from running_processes(UpstreamProcesses(tmp_path))


async def _ready_node(kube: KubeApiClient, cleanup: KubeCleanup, instance: str) -> None:
    cleanup.add(NODES, instance)
    await kube.create(
        NODES, {"metadata": {"name": instance}, "spec": {"providerID": f"cn-hangzhou.{instance}"}}
    )
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}
    await kube.patch(NODES, instance, {"status": {"conditions": [ready]}}, subresource="status")


@pytest.fixture
async def instances(
    emu: AlibabaEmulator, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> AsyncIterator[list[str]]:
    """Two instances in the VPC's vSwitch and their Ready Nodes (providerID ``<region>.<id>``),
    both deleted at the end of the test."""
    made = [
        emu.admin.add_instance(vpc=VPC, vswitch=VSWITCH, private_ip=f"10.0.3.{i}")["InstanceId"]
        for i in (1, 2)
    ]
    for instance in made:
        await _ready_node(kube, kube_cleanup, instance)
    yield made
    await kube_cleanup.run()
    for instance in made:
        emu.admin.delete_instance(instance)
