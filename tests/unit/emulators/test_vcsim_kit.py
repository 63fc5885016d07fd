"""Cheap checks of the vcsim kit that need no binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from kccm.emulators.vsphere import vcsim

REPO = Path(__file__).resolve().parents[3]


def test_pinned_govmomi_matches_the_build_script_and_the_cpi_pin() -> None:
    pins = dict(
        line.split("=", 1)
        for line in (REPO / "hack/vcsim/versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["GOVMOMI_VERSION"] == vcsim.GOVMOMI_VERSION == "v0.55.1"


def test_missing_binary_says_how_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KCCM_VCSIM_BIN", str(tmp_path / "vcsim"))
    with pytest.raises(vcsim.VcsimError, match="make vcsim"):
        vcsim.vcsim_binary()


def test_cache_dir_follows_kccm_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KCCM_VCSIM_BIN", raising=False)
    monkeypatch.setenv("KCCM_CACHE_DIR", str(tmp_path))
    binary = tmp_path / "bin" / f"vcsim-{vcsim.GOVMOMI_VERSION}" / "vcsim"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert vcsim.vcsim_binary() == binary
