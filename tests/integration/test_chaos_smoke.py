"""Issue 28's chaos bench (``bench/chaos.py``) at small scale, the same code: real daemons with
leader election on the session's apiserver, the leader SIGKILLed (or the apiserver restarted)
while Services and Nodes change; the ledger must show every fault healed, the cloud matching
the Services, nothing left after they are deleted, no double leader and no cloud call from a
process that was not leading. The hundred-fault figures are in docs/measurements.md ("Chaos")."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kccm.testing.chaos import ChaosSettings, Ledger, LocalWorld, run_chaos
from kccm.testing.controlplane import ControlPlane
from kccm.testing.modules import load_module

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "rbac.yaml"

# Each run starts several daemons one after another and waits for a takeover (lease 4 s) or a
# restarted apiserver (~15 s on the loaded CI machine) per fault, then for convergence.
pytestmark = pytest.mark.timeout(600)


def _assert_clean(ledger: Ledger) -> None:
    print("\n" + ledger.render())
    assert ledger.final == {
        "without": 0,
        "duplicated": 0,
        "stale": 0,
        "leaked": 0,
        "pending": 0,
    }, ledger.final_detail
    assert ledger.after_delete == 0, ledger.after_delete_detail
    assert ledger.double_leaders == 0
    assert ledger.violations == []
    assert ledger.mutations > 0  # the workload reached the cloud
    assert ledger.clean


async def test_local_leader_killed_three_times(control_plane: ControlPlane, tmp_path: Path) -> None:
    run = f"c{uuid.uuid4().hex[:6]}"
    settings = ChaosSettings("kill", 3, seed=28, rbac=RBAC)
    ledger = await run_chaos(control_plane, LocalWorld(tmp_path, run), tmp_path, settings, run)
    assert (ledger.kills, ledger.takeovers) == (3, 3)
    _assert_clean(ledger)


async def test_local_apiserver_restarted_twice(control_plane: ControlPlane, tmp_path: Path) -> None:
    run = f"c{uuid.uuid4().hex[:6]}"
    settings = ChaosSettings("apiserver", 2, seed=28, rbac=RBAC)
    ledger = await run_chaos(control_plane, LocalWorld(tmp_path, run), tmp_path, settings, run)
    assert ledger.restarts == 2
    assert len(ledger.reconnect_seconds) == 2  # the leader renewed through each new apiserver
    _assert_clean(ledger)


async def test_aws_leader_killed_twice(control_plane: ControlPlane, tmp_path: Path) -> None:
    chaos_aws = load_module("chaos_aws", ROOT / "bench" / "chaos_aws.py")
    run = f"c{uuid.uuid4().hex[:6]}"
    world = chaos_aws.AwsWorld.start(tmp_path, run)
    settings = ChaosSettings("kill", 2, seed=28, rbac=RBAC)
    ledger = await run_chaos(control_plane, world, tmp_path, settings, run)
    assert (ledger.kills, ledger.takeovers) == (2, 2)
    _assert_clean(ledger)


async def test_local_leader_cut_off_from_the_apiserver_twice(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The cut-off leader loses its lease while its cloud stays reachable: it must exit, and
    no call of its may reach the cloud once its successor holds the lease."""
    run = f"c{uuid.uuid4().hex[:6]}"
    settings = ChaosSettings("partition", 2, seed=28, rbac=RBAC)
    ledger = await run_chaos(control_plane, LocalWorld(tmp_path, run), tmp_path, settings, run)
    assert (ledger.partitions, ledger.takeovers) == (2, 2)
    assert all("exit 1 (cut off)" in e for e in ledger.exits[:2]), ledger.exits
    _assert_clean(ledger)
