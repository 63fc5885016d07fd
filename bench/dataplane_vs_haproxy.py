"""Throughput of the local data plane against HAProxy, side by side, on loopback.

    .venv/bin/python bench/dataplane_vs_haproxy.py [--seconds 3] [--json]

Installs HAProxy from Debian when it is missing (``apt-get install -y haproxy``, after
``apt-get update`` if needed; never run this in CI). Three backends (127.77.0.1-3) serve one
port: a connection that sends ``S`` receives an endless stream, one that sends ``C`` receives
``ok`` and is closed. The same backends are put behind one VIP of kccm's data plane (the real
``kccm.providers.local.dataplane_main`` process, state written with the local store) and behind
one VIP of HAProxy (``mode tcp``, ``balance roundrobin``, default threads), and each is measured
for a fixed time: MB/s of 1 and of 16 concurrent streams, and new connections per second (each
connection: connect, send, read the answer to EOF, close). The same loads straight to one
backend give the machine's ceiling. All traffic stays on 127.77.0.0/24.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import LoadBalancerRecord, LocalStore

__all__ = ["main"]

NODES = ("127.77.0.1", "127.77.0.2", "127.77.0.3")
KCCM_VIP, HAPROXY_VIP = "127.77.0.10", "127.77.0.11"
BACKEND_PORT, VIP_PORT = 31080, 8080
CHUNK = bytes(256 * 1024)


# --- backends (a child process, blocking sockets, a thread per connection) --------------
def _serve_conn(conn: socket.socket) -> None:
    with conn:
        try:
            command = conn.recv(1)
            if command == b"S":
                while True:
                    conn.sendall(CHUNK)
            elif command == b"C":
                conn.sendall(b"ok")
        except OSError:
            pass


def _serve(address: str) -> None:
    srv = socket.create_server((address, BACKEND_PORT), backlog=4096, reuse_port=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve_conn, args=(conn,), daemon=True).start()


def _backends() -> None:
    for address in NODES:
        threading.Thread(target=_serve, args=(address,), daemon=True).start()
    threading.Event().wait()


# --- load ---------------------------------------------------------------------------------
def _stream(target: tuple[str, int], until: float, out: list[int]) -> None:
    buf = bytearray(1 << 20)
    total = 0
    with socket.create_connection(target, timeout=10) as sock:
        sock.sendall(b"S")
        while time.monotonic() < until:
            got = sock.recv_into(buf)
            if not got:
                raise ConnectionError("stream ended early")
            total += got
    out.append(total)


def measure_streams(target: tuple[str, int], streams: int, seconds: float) -> float:
    """MB/s received over ``streams`` concurrent connections for ``seconds``."""
    until = time.monotonic() + seconds
    out: list[int] = []
    threads = [threading.Thread(target=_stream, args=(target, until, out)) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(out) != streams:
        raise RuntimeError(f"{streams - len(out)} streams failed")
    return sum(out) / seconds / 1e6


def _one_conn(target: tuple[str, int]) -> None:
    with socket.create_connection(target, timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(b"C")
        data = b""
        while chunk := sock.recv(16):
            data += chunk
        if data != b"ok":
            raise ConnectionError(f"answer {data!r}")


def _conn_worker(target: tuple[str, int], until: float) -> tuple[int, int]:
    ok = failed = 0
    while time.monotonic() < until:
        try:
            _one_conn(target)
            ok += 1
        except OSError:
            failed += 1
    return ok, failed


def measure_connections(
    target: tuple[str, int], seconds: float, workers: int = 4
) -> tuple[float, int]:
    """(new connections per second, failures) from ``workers`` client processes."""
    until = time.monotonic() + seconds
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        results = pool.starmap(_conn_worker, [(target, until)] * workers)
    ok = sum(r[0] for r in results)
    return ok / seconds, sum(r[1] for r in results)


# --- the proxies ----------------------------------------------------------------------------
def ensure_haproxy() -> str:
    path = shutil.which("haproxy")
    if path:
        return path
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "haproxy"]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    path = shutil.which("haproxy")
    if not path:
        raise RuntimeError("haproxy is not installed")
    return path


HAPROXY_CFG = """\
global
    maxconn 8000
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend vip
    bind {vip}:{port}
    default_backend nodes
backend nodes
    balance roundrobin
{servers}
"""


@contextlib.contextmanager
def haproxy(workdir: Path) -> Iterator[str]:
    binary = ensure_haproxy()
    servers = "\n".join(
        f"    server n{i} {address}:{BACKEND_PORT}" for i, address in enumerate(NODES, 1)
    )
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(HAPROXY_CFG.format(vip=HAPROXY_VIP, port=VIP_PORT, servers=servers))
    version = subprocess.run([binary, "-v"], capture_output=True, text=True, check=True)
    proc = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL)
    try:
        _wait_port(HAPROXY_VIP, VIP_PORT)
        yield version.stdout.splitlines()[0]
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def kccm_dataplane(workdir: Path) -> Iterator[str]:
    state = workdir / "state.db"
    with LocalStore(state) as store:
        store.ensure_load_balancer(
            LoadBalancerRecord(
                name="bench",
                service="default/bench",
                service_uid="bench",
                vip=KCCM_VIP,
                ports=(
                    {"name": "t", "protocol": "TCP", "port": VIP_PORT, "node_port": BACKEND_PORT},
                ),
                backends=tuple({"node": f"n{i}", "address": a} for i, a in enumerate(NODES, 1)),
                health={"mode": "tcp"},
                source_ranges=("0.0.0.0/0",),
            ),
            candidates=lambda: [KCCM_VIP],
            requested_ip=KCCM_VIP,
            in_pool=lambda ip: True,
            retain=False,
        )
    command = [sys.executable, "-m", "kccm.providers.local.dataplane_main"]
    log = open(workdir / "dataplane.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([*command, "--state-file", str(state)], stdout=log, stderr=log)
    try:
        _wait_port(KCCM_VIP, VIP_PORT)
        assert live_dataplane(state) is not None
        yield f"kccm data plane (python {sys.version.split()[0]}, one event loop)"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def _wait_port(host: str, port: int, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port}")


# --- the run ---------------------------------------------------------------------------------
def _measure(target: tuple[str, int], seconds: float) -> dict[str, float]:
    one = measure_streams(target, 1, seconds)
    sixteen = measure_streams(target, 16, seconds)
    conns, failed = measure_connections(target, seconds)
    return {"mb_s_1": one, "mb_s_16": sixteen, "conn_s": conns, "conn_failures": float(failed)}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _table(results: dict[str, dict[str, list[float]]]) -> str:
    rows = [
        ("MB/s, 1 stream", "mb_s_1"),
        ("MB/s, 16 streams", "mb_s_16"),
        ("new connections/s", "conn_s"),
    ]
    lines = [
        "| measure | direct (no proxy) | kccm data plane | HAProxy | kccm / HAProxy |",
        "|---|---|---|---|---|",
    ]
    for label, key in rows:
        d, k, h = (_median(results[name][key]) for name in ("direct", "kccm", "haproxy"))
        lines.append(f"| {label} | {d:,.0f} | {k:,.0f} | {h:,.0f} | {k / h:.2f} |")
    return "\n".join(lines)


def _run_rounds(rounds: int, seconds: float) -> dict[str, dict[str, list[float]]]:
    """Interleaved rounds (direct, kccm, HAProxy, direct, ...) so drift hits all alike."""
    targets = {
        "direct": (NODES[0], BACKEND_PORT),
        "kccm": (KCCM_VIP, VIP_PORT),
        "haproxy": (HAPROXY_VIP, VIP_PORT),
    }
    results: dict[str, dict[str, list[float]]] = {name: {} for name in targets}
    for _ in range(rounds):
        for name, target in targets.items():
            for key, value in _measure(target, seconds).items():
                results[name].setdefault(key, []).append(value)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="the table shows medians")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args(argv)
    backends = multiprocessing.get_context("fork").Process(target=_backends, daemon=True)
    backends.start()
    try:
        _wait_port(NODES[0], BACKEND_PORT)
        with (
            tempfile.TemporaryDirectory(prefix="kccm-bench-") as tmp,
            contextlib.ExitStack() as stack,
        ):
            ours = stack.enter_context(kccm_dataplane(Path(tmp)))
            theirs = stack.enter_context(haproxy(Path(tmp)))
            results = _run_rounds(ns.rounds, ns.seconds)
    finally:
        backends.kill()
    print(json.dumps(results, indent=2) if ns.json else _table(results))
    print(
        f"({os.cpu_count()} CPUs; medians of {ns.rounds} rounds of {ns.seconds:g} s;"
        f" {ours}; {theirs})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
