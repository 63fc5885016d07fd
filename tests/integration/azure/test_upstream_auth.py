"""Upstream's cloud-controller-manager v1.36.5 signs in at kccm's Azure emulator with every
form kccm's provider is checked with (``kccm.testing.azuresignin``: the same ``azure.json``
keys and webhook variables): a client certificate (PKCS#12 with a password, PEM), a managed
identity from the VM's own metadata service (reached as Go reaches 169.254.169.254 here:
``HTTP_PROXY``), and workload identity. Its start-up read (``GET
.../providers/Microsoft.Compute``, ``syncRegionZonesMap``) must succeed with a token the
emulator issued to the expected identity in the expected way: the emulator's sign-in checks
agree with Go's azidentity/MSAL as they do with Python's azure-identity."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure_upstream_support import (
    UpstreamProcesses,
    require_upstream,
    upstream_env,
    upstream_processes,
)

from kccm.emulators.azure.launcher import AzureEmulator, azure_emulator
from kccm.testing.azuresignin import FORMS, Builder
from kccm.testing.certs import emulator_tls
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane

eventually = functools.partial(shared_eventually, within=60.0, interval=0.2)
ZONES_READ = "providers/Microsoft.Compute"


@pytest.fixture(scope="module")
def emulator() -> Iterator[AzureEmulator]:
    require_upstream()  # skip (or fail under KCCM_REQUIRE_CONTROL_PLANE=1) before starting
    with azure_emulator(tls=emulator_tls()) as emu:
        yield emu


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[UpstreamProcesses]:
    yield from upstream_processes(tmp_path)


@pytest.mark.parametrize(
    "make",
    [pytest.param(builder, id=name) for name, builder in FORMS.items() if name != "client-secret"],
)
async def test_upstream_signs_in_and_reads_arm(
    emulator: AzureEmulator,
    upstream: UpstreamProcesses,
    control_plane: ControlPlane,
    tmp_path: Path,
    make: Builder,
) -> None:
    form = make(emulator, tmp_path)
    try:
        before, since = len(emulator.admin.tokens()), emulator.admin.last_seq()
        files = emulator.cloud_files(tmp_path / "cloud", **form.keys)
        env = upstream_env(files.env, **form.go_env)
        ccm = upstream.start_ccm(
            files.azure_json, control_plane.admin_kubeconfig, env, controllers=["service"]
        )

        async def zones_read() -> dict[str, Any] | None:
            ccm.alive()
            calls = await asyncio.to_thread(emulator.admin.requests, since)
            found = [r for r in calls if r["path"].endswith(ZONES_READ)]
            return found[-1] if found else None

        read = await eventually(zones_read)
        assert read["status"] == 200, ccm.digest()
        tokens = emulator.admin.tokens()[before:]
        assert {t["source"] for t in tokens} == {form.source}
        ids = {t["client_id"] for t in tokens}
        assert (
            ids == {form.client_id} if form.client_id else emulator.config["client_id"] not in ids
        )
    finally:
        form.cleanup()
