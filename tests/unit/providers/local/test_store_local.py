"""The local provider's SQLite store: schema, migrations, instances, VIP claims, routes."""

from __future__ import annotations

import ipaddress
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from kccm.providers.local import store as store_module
from kccm.providers.local.store import (
    SCHEMA_VERSION,
    InstanceExists,
    InstanceRecord,
    IPUnavailable,
    LoadBalancerRecord,
    LocalStore,
    RouteRecord,
    SchemaTooNew,
    UnknownInstance,
    resolve_state_path,
)

POOL = ipaddress.ip_network("127.0.20.0/29")  # 6 usable addresses: .1 - .6


def candidates() -> Iterable[str]:
    return (str(ip) for ip in POOL.hosts())


def in_pool(ip: str) -> bool:
    return ipaddress.ip_address(ip) in POOL


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    with LocalStore(tmp_path / "state.db") as opened:
        yield opened


def balancer(
    service: str = "default/web", uid: str = "u1", **changes: object
) -> LoadBalancerRecord:
    fields: dict[str, object] = {
        "name": "a" + uid,
        "service": service,
        "service_uid": uid,
        "vip": "",
        "ports": ({"name": "http", "protocol": "TCP", "port": 80, "node_port": 30080},),
        "backends": ({"node": "n1", "address": "127.0.10.1"},),
        "health": {"mode": "kube-proxy", "port": 10256, "path": "/healthz"},
    }
    fields.update(changes)
    return LoadBalancerRecord(**fields)  # type: ignore[arg-type]


def ensure(
    store: LocalStore, lb: LoadBalancerRecord, requested: str | None = None, retain: bool = False
) -> LoadBalancerRecord:
    return store.ensure_load_balancer(
        lb, candidates=candidates, requested_ip=requested, in_pool=in_pool, retain=retain
    )


# -- opening, pragmas and migrations ---------------------------------------------------------


def test_a_new_file_gets_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "state.db"
    with LocalStore(path) as store:
        assert store.migrated_from == 0
        assert store.schema_version() == SCHEMA_VERSION == 2
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables >= {"meta", "instances", "load_balancers", "ip_claims", "routes"}
    assert tables >= {"backend_health", "dataplane", "backend_sets"}
    raw.close()


def _empty_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=0")
    conn.close()


@pytest.mark.parametrize(
    "prepare",
    [
        pytest.param(lambda p: p.write_bytes(b""), id="zero-byte-file"),
        pytest.param(_empty_db, id="empty-db"),
    ],
)
def test_a_v0_file_is_migrated(tmp_path: Path, prepare: Callable[[Path], object]) -> None:
    path = tmp_path / "state.db"
    prepare(path)
    with LocalStore(path) as store:
        assert (store.migrated_from, store.schema_version()) == (0, SCHEMA_VERSION)
    with LocalStore(path) as again:
        assert again.migrated_from == SCHEMA_VERSION


def test_a_file_from_a_newer_kccm_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    LocalStore(path).close()
    raw = sqlite3.connect(path)
    with raw:
        raw.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    raw.close()
    with pytest.raises(SchemaTooNew, match=r"schema version 7 .* newer kccm .* up to 2"):
        LocalStore(path)


def test_migrations_run_in_order_once_and_all_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    LocalStore(path).close()
    ran: list[int] = []

    def add_column(conn: sqlite3.Connection) -> None:
        ran.append(2)
        conn.execute("ALTER TABLE instances ADD COLUMN note TEXT NOT NULL DEFAULT ''")

    def broken(conn: sqlite3.Connection) -> None:
        ran.append(3)
        raise RuntimeError("migration 3 fails")

    now = store_module.SCHEMA_VERSION
    v3 = (*store_module.MIGRATIONS, add_column, broken)
    monkeypatch.setattr(store_module, "MIGRATIONS", v3)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", now + 2)
    with pytest.raises(RuntimeError, match="migration 3 fails"):
        LocalStore(path)
    raw = sqlite3.connect(path)
    columns = [r[1] for r in raw.execute("PRAGMA table_info(instances)")]
    assert "note" not in columns, "a failed migration must roll back the earlier steps too"
    raw.close()

    monkeypatch.setattr(store_module, "MIGRATIONS", v3[: now + 1])
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", now + 1)
    with LocalStore(path) as migrated:
        assert (migrated.migrated_from, migrated.schema_version()) == (now, now + 1)
    with LocalStore(path) as reopened:
        assert reopened.migrated_from == now + 1
    assert ran == [2, 3, 2]


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        pytest.param("/x/state.db", "/env.db", "/x/state.db", id="explicit-wins"),
        pytest.param(None, "/env.db", "/env.db", id="env-next"),
        pytest.param(None, None, "/xdg/kccm/local/state.db", id="xdg-default"),
    ],
)
def test_state_path_resolution(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: str | None, expected: str
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg")
    if env is None:
        monkeypatch.delenv("KCCM_LOCAL_STATE", raising=False)
    else:
        monkeypatch.setenv("KCCM_LOCAL_STATE", env)
    assert resolve_state_path(explicit) == Path(expected)


# -- instances -------------------------------------------------------------------------------


def test_instance_lifecycle(store: LocalStore) -> None:
    added = store.add_instance(InstanceRecord("n1", (("InternalIP", "127.0.10.1"),)))
    assert (added.provider_id, added.running, added.addresses) == (
        "local://n1",
        True,
        (("InternalIP", "127.0.10.1"),),
    )
    assert store.find_instance_by_provider_id("local://n1") == added
    assert not store.set_instance_state("n1", running=False).running
    assert store.set_instance_state("n1", running=True).running
    store.delete_instance("n1")
    assert store.find_instance("n1") is None
    assert store.list_instances() == []


@pytest.mark.parametrize(
    ("action", "error"),
    [
        pytest.param(lambda s: s.add_instance(InstanceRecord("n1")), InstanceExists, id="add-dup"),
        pytest.param(lambda s: s.set_instance_state("nope", False), UnknownInstance, id="stop"),
        pytest.param(lambda s: s.delete_instance("nope"), UnknownInstance, id="delete"),
        pytest.param(lambda s: s.get_instance("nope"), UnknownInstance, id="get"),
    ],
)
def test_instance_errors(
    store: LocalStore, action: Callable[[LocalStore], object], error: type[Exception]
) -> None:
    store.add_instance(InstanceRecord("n1"))
    with pytest.raises(error):
        action(store)


def test_adopt_keeps_an_existing_instance(store: LocalStore) -> None:
    store.add_instance(InstanceRecord("n1", instance_type="big"))
    assert store.adopt_instance(InstanceRecord("n1", instance_type="small")).instance_type == "big"
    assert store.adopt_instance(InstanceRecord("n2")).name == "n2"


# -- load balancers and VIP claims -----------------------------------------------------------


def test_first_free_vip_is_claimed_and_kept(store: LocalStore) -> None:
    first = ensure(store, balancer("ns/a", "1"))
    second = ensure(store, balancer("ns/b", "2"))
    assert (first.vip, second.vip) == ("127.0.20.1", "127.0.20.2")
    assert ensure(store, balancer("ns/a", "1")).vip == "127.0.20.1"
    assert [(c.ip, c.owner) for c in store.list_ip_claims()] == [
        ("127.0.20.1", "ns/a"),
        ("127.0.20.2", "ns/b"),
    ]


def test_generation_moves_only_when_the_desired_state_changes(store: LocalStore) -> None:
    assert ensure(store, balancer()).generation == 1
    assert ensure(store, balancer()).generation == 1
    moved = ensure(store, balancer(backends=({"node": "n2", "address": "127.0.10.2"},)))
    assert moved.generation == 2
    updated = store.update_backends(moved.name, [])
    assert updated is not None
    assert (updated.generation, updated.backends) == (3, ())
    assert store.update_backends("missing", []) is None


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        pytest.param("127.0.20.1", "already claimed by ns/holder", id="taken"),
        pytest.param("10.9.9.9", "not in the local VIP pool", id="outside-pool"),
    ],
)
def test_an_unavailable_requested_ip_writes_nothing(
    store: LocalStore, requested: str, message: str
) -> None:
    ensure(store, balancer("ns/holder", "h"))
    with pytest.raises(IPUnavailable, match=message):
        ensure(store, balancer("ns/wants", "w"), requested=requested)
    assert [lb.service for lb in store.list_load_balancers()] == ["ns/holder"]
    assert [c.owner for c in store.list_ip_claims()] == ["ns/holder"]


def test_a_requested_ip_moves_the_claim(store: LocalStore) -> None:
    assert ensure(store, balancer()).vip == "127.0.20.1"
    assert ensure(store, balancer(), requested="127.0.20.5").vip == "127.0.20.5"
    assert [c.ip for c in store.list_ip_claims()] == ["127.0.20.5"]


def test_an_exhausted_pool_is_an_error(store: LocalStore) -> None:
    for i in range(6):
        ensure(store, balancer(f"ns/s{i}", str(i)))
    with pytest.raises(IPUnavailable, match="exhausted"):
        ensure(store, balancer("ns/late", "late"))


@pytest.mark.parametrize(
    ("keep", "claims_after"),
    [pytest.param(False, [], id="released"), pytest.param(True, ["127.0.20.1"], id="retained")],
)
def test_delete_frees_the_claim_unless_retained(
    store: LocalStore, keep: bool, claims_after: list[str]
) -> None:
    lb = ensure(store, balancer())
    assert store.delete_load_balancer(lb.name, lb.service, keep_claim=keep)
    assert store.find_load_balancer(lb.name) is None
    assert [c.ip for c in store.list_ip_claims()] == claims_after
    assert not store.delete_load_balancer(lb.name, lb.service, keep_claim=keep)


def test_a_retained_claim_comes_back_to_the_recreated_service(store: LocalStore) -> None:
    ensure(store, balancer("ns/other", "o"))
    old = ensure(store, balancer("ns/web", "old"), retain=True)
    store.delete_load_balancer(old.name, "ns/web", keep_claim=True)
    ensure(store, balancer("ns/third", "t"))
    again = ensure(store, balancer("ns/web", "new"))
    assert (again.vip, again.name) == (old.vip, "anew")
    assert not next(c for c in store.list_ip_claims() if c.owner == "ns/web").retain


def test_a_recreated_service_replaces_its_stale_row(store: LocalStore) -> None:
    ensure(store, balancer("ns/web", "old"))
    ensure(store, balancer("ns/web", "new"))
    assert [lb.name for lb in store.list_load_balancers()] == ["anew"]


# -- routes ----------------------------------------------------------------------------------


def test_routes_round_trip(store: LocalStore) -> None:
    store.put_route(RouteRecord("c-n1-10.244.1.0/24", "c", "n1", "10.244.1.0/24"))
    store.put_route(RouteRecord("d-n1-10.244.1.0/24", "d", "n1", "10.244.1.0/24"))
    assert [r.name for r in store.list_routes("c")] == ["c-n1-10.244.1.0/24"]
    assert len(store.list_routes()) == 2
    assert store.delete_route("c", "n1", "10.244.1.0/24")
    assert not store.delete_route("c", "n1", "10.244.1.0/24")
    assert [r.cluster for r in store.list_routes()] == ["d"]


def test_nothing_from_the_data_plane_yet(store: LocalStore) -> None:
    assert store.list_backend_health() == []
    assert store.dataplane_heartbeat() is None


@pytest.mark.parametrize(
    "before",
    [
        pytest.param(None, id="new-file"),
        pytest.param(0o644, id="existing-world-readable-file-is-tightened"),
    ],
)
def test_the_state_file_is_private(tmp_path: Path, before: int | None) -> None:
    path = tmp_path / "deeper" / "state.db"
    if before is not None:
        path.parent.mkdir()
        path.touch()
        path.chmod(before)
    with LocalStore(path) as store:
        store.add_instance(InstanceRecord("n1"))  # writes the WAL
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir()}
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}
    if before is None:
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
