"""bench/openstack_scale.py --quick as a subprocess, so the bench keeps working: 50 Nodes
initialised and refreshed by the kccm daemon with the openstack provider on the emulator, 10
LoadBalancer Services ensured and the daemon restarted. Checked: the refresh tick is one
servers listing and one ports listing (nothing per node), the restart makes no mutating
OpenStack call while it reads every balancer, every Service keeps its ingress, and nothing is
left in the emulator. Never a duration (those belong to the bench's own runs).

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
BENCH = ROOT / "bench" / "openstack_scale.py"
SERVERS_LISTING = "compute GET /compute/v2.1/servers/detail"
PORTS_LISTING = "network GET /network/v2.0/ports"


@pytest.fixture(scope="module")
def figures(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("keystoneauth1")
    workdir = tmp_path_factory.mktemp("openstack-bench")
    return run_quick_bench(BENCH, workdir)


def _listing(kind: str, prefix: str) -> bool:
    """A listing of the collection: no id in the path, no name filter."""
    return kind.split("?")[0] == prefix and "name" not in kind.partition("?")[2].split("&")


def test_refresh_tick_is_one_servers_and_one_ports_listing(figures: Any) -> None:
    kinds: dict[str, int] = figures["refresh_requests_by_kind"]
    servers = sum(n for k, n in kinds.items() if _listing(k, SERVERS_LISTING))
    ports = sum(n for k, n in kinds.items() if _listing(k, PORTS_LISTING))
    assert (servers, ports) == (1, 1), kinds
    assert sum(kinds.values()) == 2, kinds


def test_init_writes_nothing(figures: Any) -> None:
    kinds: dict[str, int] = figures["init_requests_by_kind"]
    assert kinds, "no OpenStack request while 50 Nodes were initialised"
    assert all(k.split(" ")[1] == "GET" for k in kinds), kinds


def test_restart_makes_no_write_and_reads_every_balancer(figures: Any) -> None:
    assert figures["restart_mutating"] == 0, figures["restart_mutating_requests"]
    assert figures["restart_balancers"] == 10
    assert figures["restart_balancers_read"] == 10
    assert figures["restart_services_with_ingress"] == 10


def test_ensure_creates_each_balancer_in_one_post(figures: Any) -> None:
    kinds: dict[str, int] = figures["ensure_requests_by_kind"]
    assert kinds["load-balancer POST /load-balancer/v2/lbaas/loadbalancers"] == 10, kinds


def test_nothing_left_in_the_emulator(figures: Any) -> None:
    assert figures["left_behind"] == {}
