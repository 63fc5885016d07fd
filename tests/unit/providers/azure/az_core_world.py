"""The azure provider on kccm's ARM emulator, as its unit tests share it: one emulator per
module, a provider built from the azure.json the emulator writes for upstream (signed in
through its ADFS endpoint, TLS with its CA), and Nodes as kubelet registers them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.providers.azure.config import load_azure_config
from kccm.providers.azure.provider import AzureCloud, build_parts


def start_emulator() -> Iterator[Any]:
    launcher = pytest.importorskip("kccm.emulators.azure")
    from kccm.testing.certs import emulator_tls

    with launcher.azure_emulator(tls=emulator_tls()) as emu:
        yield emu


def make_cloud(emu: Any, directory: Path, **overrides: Any) -> AzureCloud:
    """The provider for the emulator's azure.json (with ``overrides``); its caches keep
    nothing (each call reads ARM), so tests see changes at once."""
    files = emu.cloud_files(directory, **overrides)
    text = Path(files.azure_json).read_text()
    config = load_azure_config(text, "azure.json", environ=files.env)
    cloud = AzureCloud(build_parts(config, files.env, sleep=_no_wait), environ=files.env)
    parts = cloud.parts
    assert parts is not None
    parts.inventory.cache.ttl = 0.0
    parts.inventory.scale_set_cache.ttl = 0.0
    return cloud


def _no_wait(seconds: float) -> None:
    """Retries and polls go on at once (the emulator answers at once)."""


def node(name: str, provider_id: str = "", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"addresses": []},
    }


def azure_json(emu: Any, directory: Path, **overrides: Any) -> str:
    return json.dumps(
        json.loads(Path(emu.cloud_files(directory, **overrides).azure_json).read_text())
    )
