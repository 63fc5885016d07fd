"""The local data plane's cost with S balancers over N backends (issue 28): RSS and CPU.

Usage: .venv/bin/python bench/dataplane_scale.py [--nodes 1000] [--services 10] [--seconds 30]

Writes a state file as the provider does (``--services`` balancers, one TCP port each, over
``--nodes`` nodes at loopback InternalIPs 127.65.x.x, so every health probe is refused at
once instead of leaving the machine), starts the data plane process (``python -m
kccm.providers.local.dataplane_main``) and samples it every 5 s for ``--seconds``: its RSS,
its CPU seconds per second, the listeners it opened and the verdicts it wrote to
``backend_health``. The data plane probes every (balancer, node) every 2 s, as
cloud-provider-kind does, so its work is S x N by design.
"""

from __future__ import annotations

import argparse
import io
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from localcloud import vip_range  # bench/ is on sys.path when run as a script
from proc import cpu_seconds, rss_mib

from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.supervise import live_dataplane
from kccm.providers.local.store import LocalStore


def node(i: int) -> dict[str, object]:
    address = f"127.65.{i // 256 % 256}.{i % 256}"
    return {"metadata": {"name": f"n{i:05d}"},
            "status": {"addresses": [{"type": "InternalIP", "address": address}]}}  # fmt: skip


def service(i: int) -> dict[str, object]:
    port = {"name": "http", "protocol": "TCP", "port": 8080, "nodePort": 30000 + i}
    return {"metadata": {"name": f"svc-{i:05d}", "namespace": "bench", "uid": f"u{i}"},
            "spec": {"type": "LoadBalancer", "ports": [port]}}  # fmt: skip


def write_state(path: Path, nodes: int, services: int) -> None:
    config = load_local_config(io.StringIO(f"[Global]\nvip-range = {vip_range(services)}\n"))
    hosts = tuple(node(i) for i in range(nodes))
    with LocalStore(path) as store:
        cloud = LocalCloud(store, config)
        for i in range(services):
            cloud.ensure_load_balancer("kubernetes", service(i), hosts)


def counts(path: Path) -> tuple[int, int]:
    with LocalStore(path) as store:
        conn = store._conn
        verdicts = conn.execute("SELECT count(*) FROM backend_health").fetchone()[0]
    listeners = path.with_name("dataplane.log").read_text().count(" open for ")
    return listeners, int(verdicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--services", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kccm-dataplane-") as tmp:
        state = Path(tmp) / "local.db"
        started = time.perf_counter()
        write_state(state, args.nodes, args.services)
        print(f"state file written in {time.perf_counter() - started:.1f} s "
              f"({state.stat().st_size / 2**20:.1f} MiB)", flush=True)  # fmt: skip
        command = [sys.executable, "-m", "kccm.providers.local.dataplane_main"]
        with state.with_name("dataplane.log").open("wb") as out:
            proc = subprocess.Popen([*command, "--state-file", str(state)], stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip
        try:
            start = time.perf_counter()
            while live_dataplane(state) is None:
                if proc.poll() is not None or time.perf_counter() - start > 120:
                    raise SystemExit(state.with_name("dataplane.log").read_text()[-2000:])
                time.sleep(0.2)
            print(f"data plane heartbeating after {time.perf_counter() - start:.1f} s")
            last_cpu, last = cpu_seconds(proc.pid), time.perf_counter()
            while time.perf_counter() - start < args.seconds:
                time.sleep(5)
                cpu, now = cpu_seconds(proc.pid), time.perf_counter()
                listeners, verdicts = counts(state)
                print(f"t={now - start:5.1f} s  RSS {rss_mib(proc.pid):7.0f} MiB  CPU "
                      f"{(cpu - last_cpu) / (now - last):4.2f} s/s ({cpu:.1f} s)  listeners "
                      f"{listeners}  verdicts {verdicts}/{args.nodes * args.services}",
                      flush=True)  # fmt: skip
                last_cpu, last = cpu, now
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()
