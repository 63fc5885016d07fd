"""Issue 28: a backend list is kept once, not once per balancer (schema 2's ``backend_sets``),
and taken from the nodes once per node-set version; the same balancers, backends and
read-compare-write as before."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import default_load_balancer_name
from kccm.providers.local import LocalCloud, backendsets, balancers
from kccm.providers.local import store as store_module
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.store import DataplaneStore
from kccm.providers.local.schema import V1
from kccm.providers.local.store import LocalStore

CLUSTER = "kubernetes"


def service(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"svc-{i}", "namespace": "ns", "uid": f"uid-{i}"},
        "spec": {
            "type": "LoadBalancer",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30000 + i}],
        },
    }


def node(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"n{i:03d}"},
        "status": {"addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256}.{i % 256}"}]},
    }


NODES = tuple(node(i) for i in range(50))
BACKENDS = [{"address": f"10.0.0.{i}", "node": f"n{i:03d}"} for i in range(50)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    with LocalStore(tmp_path / "state.db") as opened:
        yield opened


def cloud_on(store: LocalStore) -> LocalCloud:
    return LocalCloud(
        store, load_local_config(io.StringIO("[Global]\nvip-range = 127.0.20.0/24\n"))
    )


def count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(module, name)

    def counted(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


def rows(store: LocalStore, table: str) -> int:
    return int(store._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_twenty_balancers_over_the_same_nodes_store_one_backend_list(store: LocalStore) -> None:
    cloud = cloud_on(store)
    for i in range(20):
        cloud.ensure_load_balancer(CLUSTER, service(i), NODES)
    assert (rows(store, "load_balancers"), rows(store, "backend_sets")) == (20, 1)
    (text,) = store._conn.execute("SELECT backends FROM backend_sets").fetchone()
    assert json.loads(text) == BACKENDS
    records = store.list_load_balancers()
    assert [list(map(dict, r.backends)) for r in records] == [BACKENDS] * 20
    assert len({id(r.backends) for r in records}) == 1, "one parsed tuple for every row"

    fewer = NODES[:10]  # one balancer moves to another list, then goes: its list goes too
    cloud.update_load_balancer(CLUSTER, service(0), fewer)
    assert rows(store, "backend_sets") == 2
    cloud.ensure_load_balancer_deleted(CLUSTER, service(0))
    assert (rows(store, "load_balancers"), rows(store, "backend_sets")) == (19, 1)


def test_the_nodes_backends_are_taken_once_per_node_tuple(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_calls(monkeypatch, balancers, "backends_of")
    cloud = cloud_on(store)
    for i in range(20):
        cloud.ensure_load_balancer(CLUSTER, service(i), NODES)
    for i in range(20):
        cloud.update_load_balancer(CLUSTER, service(i), NODES)
    assert len(calls) == 1, "the service controller's tuple: once for 40 calls"
    cloud.ensure_load_balancer(CLUSTER, service(0), tuple(NODES))  # the same tuple object
    cloud.ensure_load_balancer(CLUSTER, service(0), NODES[:49] + NODES[49:])  # an equal one
    assert len(calls) == 2
    cloud.ensure_load_balancer(CLUSTER, service(0), list(NODES))
    cloud.ensure_load_balancer(CLUSTER, service(0), list(NODES))
    assert len(calls) == 4, "a list may change between calls: never remembered"


class ContendedLock:
    """A lock that says when a second thread has to wait for it (sets ``contended``)."""

    def __init__(self, contended: threading.Event) -> None:
        self._lock = threading.Lock()
        self.contended = contended

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_threads_asking_for_one_tuple_at_once_wait_for_one_making(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service workers all ensure with a new node tuple at once: one thread takes its
    backends, the others wait for them instead of each taking them too (issue 28)."""
    memo = backendsets.NodeBackends(balancers.backends_of)
    made_again, either = threading.Event(), threading.Event()
    monkeypatch.setattr(memo._memo, "_lock", ContendedLock(either))
    others: list[threading.Thread] = []

    def first(nodes: Any) -> Any:
        others.append(threading.Thread(target=memo, args=(nodes,)))
        others[0].start()  # asks while this thread is still making the value
        either.wait(timeout=30)  # it waits for the lock, or (made twice) makes it too
        return balancers.backends_of(nodes)

    def again(nodes: Any) -> Any:
        made_again.set()
        either.set()
        return balancers.backends_of(nodes)

    makers = iter([first, again])
    monkeypatch.setattr(memo, "_backends_of", lambda nodes: next(makers)(nodes))
    assert memo(NODES) == balancers.backends_of(NODES)
    others[0].join(timeout=30)
    assert not others[0].is_alive()
    assert not made_again.is_set(), "a second thread took the same tuple's backends again"


def test_threads_reading_one_set_at_once_wait_for_one_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restart's workers reading the same stored set: parsed once, the others wait."""
    parsed_again, either = threading.Event(), threading.Event()
    others: list[threading.Thread] = []
    text = json.dumps([{"node": "n000", "address": "10.0.0.1"}])

    def parse(raw: str) -> Any:
        if others:
            parsed_again.set()
            either.set()
        else:
            others.append(threading.Thread(target=sets.get, args=("set-1", text)))
            others[0].start()
            either.wait(timeout=30)
        return tuple(json.loads(raw))

    sets = backendsets.ParsedSets(parse)
    monkeypatch.setattr(sets, "_lock", ContendedLock(either))
    assert sets.get("set-1", text) == ({"node": "n000", "address": "10.0.0.1"},)
    others[0].join(timeout=30)
    assert not others[0].is_alive()
    assert not parsed_again.is_set(), "a second thread parsed the same set again"


def test_unchanged_balancers_serialise_the_backend_list_at_most_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart's ensure of every unchanged balancer compares remembered texts: the desired
    list and the stored one are serialised once each, not twice per balancer."""
    path = tmp_path / "state.db"
    with LocalStore(path) as first:
        cloud = cloud_on(first)
        for i in range(30):
            cloud.ensure_load_balancer(CLUSTER, service(i), NODES)
    calls = count_calls(monkeypatch, backendsets, "_text_and_id")
    with LocalStore(path) as again:
        cloud = cloud_on(again)
        nodes = NODES[:25] + NODES[25:]  # the next process's tuple: equal, not the same
        for i in range(30):
            cloud.ensure_load_balancer(CLUSTER, service(i), nodes)
        assert cloud.cloud_api_calls().snapshot().writes == {}
    assert len(calls) <= 2


def test_a_backend_list_edited_in_the_state_file_is_repaired(store: LocalStore) -> None:
    cloud = cloud_on(store)
    for i in range(3):
        cloud.ensure_load_balancer(CLUSTER, service(i), NODES)
    with store._write() as conn:  # an operator editing the state file by hand
        conn.execute("UPDATE backend_sets SET backends = '[]'")
    assert store.find_load_balancer(default_load_balancer_name(service(0))).backends == ()  # type: ignore[union-attr]
    cloud.ensure_load_balancer(CLUSTER, service(0), NODES)
    assert dict(cloud.cloud_api_calls().snapshot().writes) == {"put_load_balancer": 4}
    assert [list(map(dict, r.backends)) for r in store.list_load_balancers()] == [BACKENDS] * 3


def v1_file(path: Path, backends: list[list[dict[str, str]]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    V1(conn)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    for i, listed in enumerate(backends):
        conn.execute(
            "INSERT INTO load_balancers (name, service, service_uid, vip, ports, backends,"
            " health, source_ranges, session_affinity, generation, updated_at)"
            " VALUES (?, ?, ?, ?, '[]', ?, '{}', '[\"0.0.0.0/0\"]', 'None', 3, 0)",
            (f"lb{i}", f"ns/s{i}", f"u{i}", f"127.0.20.{i + 1}", json.dumps(listed, indent=1)),
        )
    conn.close()


def test_a_v1_file_moves_its_backend_lists_into_sets(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    other = [{"node": "x", "address": "10.9.9.9"}]
    v1_file(path, [BACKENDS, other, BACKENDS])
    with LocalStore(path) as store:
        assert (store.migrated_from, store.schema_version()) == (1, store_module.SCHEMA_VERSION)
        assert rows(store, "backend_sets") == 2
        columns = [r[1] for r in store._conn.execute("PRAGMA table_info(load_balancers)")]
        assert "backends" not in columns
        assert "backend_set" in columns
        found = [
            (r.name, list(map(dict, r.backends)), r.generation) for r in store.list_load_balancers()
        ]
    assert found == [("lb0", BACKENDS, 3), ("lb1", other, 3), ("lb2", BACKENDS, 3)]


def test_the_data_plane_parses_a_set_once_for_every_balancer_and_reconcile(
    store: LocalStore,
) -> None:
    cloud = cloud_on(store)
    for i in range(10):
        cloud.ensure_load_balancer(CLUSTER, service(i), NODES)
    plane = DataplaneStore(store.path)
    try:
        first, second = plane.load_balancers(), plane.load_balancers()
    finally:
        plane.close()
    assert first is not None
    assert second is not None
    assert len(first) == 10
    assert len({id(lb.backends) for lb in first + second}) == 1
    assert [(b.node, b.address) for b in first[0].backends] == [
        (b["node"], b["address"]) for b in BACKENDS
    ]


@pytest.mark.parametrize(
    ("migrated", "stopped"),
    [pytest.param(True, [(7, "stop")], id="v1-file"), pytest.param(False, [], id="new-file")],
)
async def test_a_data_plane_older_than_the_migration_is_replaced(
    tmp_path: Path, migrated: bool, stopped: list[tuple[int, str]]
) -> None:
    """A data plane started by an older kccm reads the rows' own backends: after the file's
    migration it would drop every listener, so the provider stops it and starts a current one."""
    path = tmp_path / "state.db"
    if migrated:
        v1_file(path, [BACKENDS])
    calls: list[tuple[int, str]] = []
    running = {"pid": 7}

    def probe(state_file: Path, now: float) -> int | None:
        return running["pid"]

    def stopper(state_file: Path, pid: int) -> None:
        calls.append((pid, "stop"))
        running["pid"] = None  # type: ignore[assignment]

    def starter(state_file: Path) -> int:
        calls.append((running["pid"] or 8, "start"))
        return running["pid"] or 8

    with LocalStore(path) as store:
        config = load_local_config(io.StringIO("[Global]\nvip-range = 127.0.20.0/24\n"))
        cloud = LocalCloud(
            store, config, dataplane_starter=starter, dataplane_probe=probe,
            dataplane_stopper=stopper,
        )  # fmt: skip
        stop = asyncio.Event()
        await cloud.initialize(None, stop)
        stop.set()
    assert calls == [*stopped, (8 if migrated else 7, "start")]
