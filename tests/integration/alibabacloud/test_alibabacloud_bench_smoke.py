"""bench/alibabacloud_scale.py --quick --only kccm as a subprocess, so the bench keeps working: 50
Nodes initialised by the kccm daemon with the alibabacloud provider on the emulator, 20 s of its
periodic refresh, 10 LoadBalancer Services ensured and the daemon restarted. Checked: every
instance's ENI gets its source/destination check turned off once, the refresh reads only
``DescribeInstances`` (batched: nothing per Node), each Service gets one CLB, the restart makes
no mutating call, and nothing is left in the emulator. Never a duration (those belong to the
bench's own runs); upstream's half is left to the bench's own runs.

It starts its own control plane from the cached binaries; requesting the ``control_plane``
fixture gives it the same skip/fail semantics as the other integration tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kccm.testing.benchsmoke import run_quick_bench
from kccm.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "alibabacloud_scale.py"


@pytest.fixture(scope="module")
def figures(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Any:
    workdir = tmp_path_factory.mktemp("alibabacloud-bench")
    return run_quick_bench(BENCH, workdir, "--only", "kccm")["kccm"]


def test_init_turns_each_source_dest_check_off_once(figures: Any) -> None:
    kinds: dict[str, int] = figures["init_calls_by_kind"]
    assert kinds["ecs ModifyNetworkInterfaceAttribute"] == 50, kinds
    assert set(kinds) == {
        "ecs DescribeInstances",
        "ecs DescribeNetworkInterfaces",
        "ecs ModifyNetworkInterfaceAttribute",
    }


def test_the_refresh_reads_only_instance_listings(figures: Any) -> None:
    kinds: dict[str, int] = figures["steady_calls_by_kind"]
    assert set(kinds) == {"ecs DescribeInstances"}, kinds


def test_each_service_gets_one_balancer(figures: Any) -> None:
    assert figures["ensure_calls_by_kind"]["slb CreateLoadBalancer"] == 10


def test_restart_makes_no_write(figures: Any) -> None:
    assert figures["restart_mutating"] == []
    assert figures["restart_calls"] > 0


def test_nothing_left_in_the_emulator(figures: Any) -> None:
    assert figures["left_behind"] == {}
