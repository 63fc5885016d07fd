"""bench/azure_scale.py --quick --only kccm as a subprocess, so the bench keeps working: 50
Nodes initialised and refreshed by the kccm daemon with the azure provider on the emulator, 10
LoadBalancer Services ensured and the daemon restarted. Checked: the refresh tick is one VM
listing and one NIC listing of the resource group (nothing per Node; 50 VMs fit one page),
initialisation only reads, the restart makes no mutating ARM call, and nothing is left in the
emulator. Never a duration (those belong to the bench's own runs). Upstream's half is left to
the bench's own runs (it needs upstream's binaries and a few minutes more).

It starts its own control plane from the cached binaries; requesting the ``control_plane``
fixture gives it the same skip/fail semantics as the other integration tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kccm.testing.benchsmoke import run_quick_bench
from kccm.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "azure_scale.py"


@pytest.fixture(scope="module")
def figures(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Any:
    workdir = tmp_path_factory.mktemp("azure-bench")
    return run_quick_bench(BENCH, workdir, "--only", "kccm")["kccm"]


def test_refresh_tick_is_one_vm_and_one_nic_listing(figures: Any) -> None:
    kinds: dict[str, int] = figures["refresh_requests_by_kind"]
    assert kinds == {
        "arm GET Microsoft.Compute/virtualMachines": 1,
        "arm GET Microsoft.Network/networkInterfaces": 1,
    }


def test_init_only_reads(figures: Any) -> None:
    kinds: dict[str, int] = figures["init_requests_by_kind"]
    assert kinds, "no ARM request while 50 Nodes were initialised"
    assert all(k.split(" ")[1] == "GET" for k in kinds if k.startswith("arm ")), kinds


def test_restart_makes_no_write(figures: Any) -> None:
    assert figures["restart_mutating"] == []
    assert figures["restart_arm_requests"] > 0


def test_ensure_writes_each_public_ip_once(figures: Any) -> None:
    kinds: dict[str, int] = figures["ensure_requests_by_kind"]
    assert kinds["arm PUT Microsoft.Network/publicIPAddresses/{}"] == 10, kinds


def test_nothing_left_in_the_emulator(figures: Any) -> None:
    assert figures["left_behind"] == {}
