"""The store under several processes: concurrent writers lose nothing, a SIGKILL mid-write
leaves a consistent file holding every committed row."""

from __future__ import annotations

import ipaddress
import multiprocessing
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord, LocalStore

WRITERS = 4
PER_WRITER = 60
POOL = ipaddress.ip_network("127.0.20.0/24")


def _candidates() -> Iterable[str]:
    return (str(ip) for ip in POOL.hosts())


def _in_pool(ip: str) -> bool:
    return ipaddress.ip_address(ip) in POOL


def _balancer(service: str) -> LoadBalancerRecord:
    return LoadBalancerRecord(
        name="a" + service.replace("/", "-"),
        service=service,
        service_uid=service,
        vip="",
        ports=({"name": "p", "protocol": "TCP", "port": 80, "node_port": 30080},),
        backends=(),
        health={"mode": "kube-proxy", "port": 10256, "path": "/healthz"},
    )


def _writer(path: str, worker: int) -> None:
    """One process: instances (plain inserts) and VIP claims (read-modify-write)."""
    with LocalStore(path) as store:
        for i in range(PER_WRITER):
            store.add_instance(InstanceRecord(f"w{worker}-{i}"))
            if i % 4 == 0:
                store.ensure_load_balancer(
                    _balancer(f"ns/w{worker}-{i}"),
                    candidates=_candidates,
                    requested_ip=None,
                    in_pool=_in_pool,
                    retain=False,
                )


def test_concurrent_writers_in_several_processes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    LocalStore(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w)) for w in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * WRITERS
    with LocalStore(path) as store:
        assert len(store.list_instances()) == WRITERS * PER_WRITER
        claims = store.list_ip_claims()
        balancers = store.list_load_balancers()
    expected_lbs = WRITERS * len(range(0, PER_WRITER, 4))
    assert len(balancers) == len(claims) == expected_lbs
    assert len({c.ip for c in claims}) == expected_lbs, "a VIP was handed out twice"
    assert {lb.vip for lb in balancers} == {c.ip for c in claims}


_KILLED_WRITER = textwrap.dedent(
    """
    import ipaddress, sys
    from kccm.providers.local.store import InstanceRecord, LoadBalancerRecord, LocalStore

    pool = ipaddress.ip_network("127.0.0.0/16")
    store = LocalStore(sys.argv[1])
    i = 0
    while True:
        service = f"ns/s{i}"
        store.add_instance(InstanceRecord(f"n{i}", (("InternalIP", "127.0.10.1"),)))
        store.ensure_load_balancer(
            LoadBalancerRecord(
                name=f"a{i}", service=service, service_uid=str(i), vip="",
                ports=({"name": "p", "protocol": "TCP", "port": 80, "node_port": 30080},),
                backends=({"node": f"n{i}", "address": "127.0.10.1"},),
                health={"mode": "kube-proxy", "port": 10256, "path": "/healthz"},
            ),
            candidates=lambda: (str(ip) for ip in pool.hosts()),
            requested_ip=None,
            in_pool=lambda ip: True,
            retain=False,
        )
        print(i, flush=True)
        i += 1
    """
)


def test_sigkill_in_a_write_loop_keeps_every_committed_row(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    committed = -1
    for line in child.stdout:  # each line is printed after both commits of one round
        committed = int(line)
        if committed >= 150:
            break
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    with LocalStore(path) as store:
        instances = {i.name for i in store.list_instances()}
        balancers = {lb.service: lb.vip for lb in store.list_load_balancers()}
        claims = {c.owner: c.ip for c in store.list_ip_claims()}
    assert {f"n{i}" for i in range(committed + 1)} <= instances
    assert {f"ns/s{i}" for i in range(committed + 1)} <= set(balancers)
    assert balancers == claims, "a balancer row and its VIP claim are written together"
