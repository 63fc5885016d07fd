"""Issue 28: claiming 3,000 VIPs one by one is not quadratic (the claims are read again only
after another connection wrote, the pool's addresses are formatted once, a Service's claims
are found by index), and still gives the lowest free address, as before."""

from __future__ import annotations

import io
import ipaddress
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.providers.local import LocalCloud
from kccm.providers.local.config import VipPool, load_local_config
from kccm.providers.local.store import LocalStore

CLUSTER = "kubernetes"
NODES = ({"metadata": {"name": "n1"}, "status": {"addresses": [
    {"type": "InternalIP", "address": "127.0.10.1"}]}},)  # fmt: skip


def service(i: int) -> dict[str, Any]:
    port = {"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30000 + i}
    return {"metadata": {"name": f"svc-{i}", "namespace": "ns", "uid": f"uid-{i}"},
            "spec": {"type": "LoadBalancer", "ports": [port]}}  # fmt: skip


def cloud_on(store: LocalStore) -> LocalCloud:
    return LocalCloud(
        store, load_local_config(io.StringIO("[Global]\nvip-range = 127.0.20.0/24\n"))
    )


def vip(cloud: LocalCloud, i: int) -> str:
    return cloud.ensure_load_balancer(CLUSTER, service(i), NODES).ingress[0].ip or ""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    with LocalStore(tmp_path / "state.db") as opened:
        yield opened


def statements(store: LocalStore) -> list[str]:
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    return seen


def test_fifty_claims_read_every_claim_once(store: LocalStore) -> None:
    cloud = cloud_on(store)
    seen = statements(store)
    assert [vip(cloud, i) for i in range(50)] == [f"127.0.20.{i + 1}" for i in range(50)]
    assert seen.count("SELECT ip FROM ip_claims") == 1, "not once per claim (50 x 50 rows)"


def test_a_vip_freed_elsewhere_or_here_is_the_next_one_claimed(tmp_path: Path) -> None:
    with LocalStore(tmp_path / "state.db") as store, LocalStore(store.path) as other:
        cloud = cloud_on(store)
        assert [vip(cloud, i) for i in range(5)] == [f"127.0.20.{i}" for i in range(1, 6)]
        other.release_ip("127.0.20.2")  # another process (the CLI) frees one
        assert vip(cloud, 5) == "127.0.20.2"
        cloud.ensure_load_balancer_deleted(CLUSTER, service(0))  # and here
        assert vip(cloud, 6) == "127.0.20.1"
        assert vip(cloud, 7) == "127.0.20.6"


def test_a_claim_rolled_back_is_free_again(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloud = cloud_on(store)
    assert vip(cloud, 0) == "127.0.20.1"

    def broken(*args: object) -> None:
        raise RuntimeError("the row write fails")

    with monkeypatch.context() as patched:
        patched.setattr(store, "_put_balancer", broken)
        with pytest.raises(RuntimeError):
            vip(cloud, 1)
    assert vip(cloud, 2) == "127.0.20.2"


def test_a_services_claims_are_found_by_index(store: LocalStore) -> None:
    plan = store._conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM ip_claims WHERE owner = ? ORDER BY ip", ("ns/a",)
    ).fetchall()
    assert any("ip_claims_owner" in str(tuple(row)) for row in plan)


def _one_by_one(pool: VipPool) -> Iterator[str]:
    current = pool.first
    while current <= pool.last:  # type: ignore[operator]
        yield str(current)
        current = current + 1


@pytest.mark.parametrize(
    "text", ["127.0.20.0/24", "10.0.0.5-10.0.0.5", "10.0.0.250-10.0.3.2", "fd00::/120"]
)
def test_the_pool_gives_the_same_addresses_in_the_same_order_every_time(text: str) -> None:
    pool = VipPool.parse(text)
    assert list(pool.addresses()) == list(_one_by_one(pool))
    assert list(pool.addresses()) == list(_one_by_one(pool)), "again, from what was kept"
    assert list(itertools.islice(pool.addresses(), 3)) == list(_one_by_one(pool))[:3]


def test_a_pool_bigger_than_what_is_kept_still_yields_every_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kccm.providers.local import config

    monkeypatch.setattr(config, "MAX_POOL_SIZE", 300)
    pool = VipPool(ipaddress.ip_address("10.1.0.0"), ipaddress.ip_address("10.1.3.231"))
    assert list(pool.addresses()) == list(_one_by_one(pool))
