"""kccm and upstream's cloud-controller-manager v1.36.5, side by side on the scenarios of
tests/integration/azure/test_upstream_{lb,routes,vmss}.py: the ARM requests each made, the
mutating ones, and the objects each left, compared.

Usage: .venv/bin/python bench/azure_side_by_side.py [--only kccm,upstream]
           [--worlds standard,vmss] [--json out.json]

Starts its own etcd + kube-apiserver. Each daemon gets an emulator of its own
(``kccm.emulators.azure``, HTTPS, ADFS sign-in), seeded the same way: two availability-set
VMs ``sbs-node-0`` (zone 1) and ``sbs-node-1`` (zone 2) whose Nodes are registered as
cloud-node-manager leaves them (providerID, addresses, pod CIDRs 10.244.31.0/24 and
10.244.32.0/24). Both read the same ``azure.json`` (the emulator's, with the route batch and
VM cache at 1-2 s as the upstream tests set them) and run the same controllers: service,
route (every 2 s, routes on ``kccm-rt``), cloud-node-lifecycle, and kccm's cloud-node
(upstream's cloud-node-manager, started for the Node-initialisation scenario); cluster name
``kubernetes``. ``--worlds vmss`` runs the scale-set scenarios (:mod:`azure_sbs_vmss`).
kccm is ``python -m kccm --cloud-provider=azure`` with those flags, every
other at its default; upstream is ``make azure-upstream``'s binary as the tests start it.

Each scenario is an action on the apiserver (or a VM), then a wait until the emulator shows
its result, then until no ARM write came for 3 s. Counted: the ARM requests from the action
to then, except the route controller's reads of the route table (both daemons read it every
2 s whatever happens; they are listed apart), and the mutating ones by kind. After each
scenario the balancers, public IPs, security rules, routes and pool members are read
(:mod:`azure_sbs_objects`) and, once both daemons ran, compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure_bench_upstream import binary  # bench/ is on sys.path when run as a script
from azure_sbs_objects import differences, normalised, object_names, snapshot
from azure_sbs_scenarios import SCENARIOS, Run, Scenario, seed_node
from azure_sbs_vmss import VMSS_JSON, VMSS_SCENARIOS, seed_scale_set
from cloud_bench import log

from kccm.emulators.azure.launcher import AzureEmulator, start_azure
from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.testing import upstream
from kccm.testing.certs import emulator_tls
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemons
from kccm.testing.ports import free_port

PERIODIC = "GET Microsoft.Network/routeTables/{}"
SETTLE = 3.0
FAST = {
    "routeUpdateIntervalInSeconds": 1,
    "routeUpdateWaitingInSeconds": 1,
    "vmCacheTTLInSeconds": 2,
}
CONTROLLERS = ("cloud-node-lifecycle", "service", "route")
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


@dataclass
class Measured:
    """One scenario's figures for one daemon."""

    arm: int
    periodic: int
    writes: Counter[str]
    kinds: Counter[str]
    """Every counted request by kind (reads too)."""
    objects: Any
    names: dict[str, list[str]]
    seconds: float


@dataclass
class Result:
    who: str
    scenarios: dict[str, Measured] = field(default_factory=dict)


def kind(entry: dict[str, Any]) -> str:
    """``GET Microsoft.Network/loadBalancers/{}``: the emulator's name of the operation."""
    return str(entry.get("op") or f"{entry['method']} {entry['path']}")


def arm_since(emu: AzureEmulator, since: int) -> list[dict[str, Any]]:
    return [e for e in emu.admin.requests(since) if e["service"] == "arm"]


async def settled(emu: AzureEmulator, alive: Callable[[], None], since: int) -> int:
    """Once no ARM write came for :data:`SETTLE` seconds and no operation is pending: the
    log's last sequence number."""
    last_write, quiet_from = -1, time.monotonic()
    while True:
        alive()
        entries = await asyncio.to_thread(arm_since, emu, since)
        writes = [e["seq"] for e in entries if e["method"] != "GET"]
        newest = writes[-1] if writes else since
        if newest != last_write:
            last_write, quiet_from = newest, time.monotonic()
        elif time.monotonic() - quiet_from >= SETTLE:
            state = await asyncio.to_thread(emu.admin.state)
            if not state["pendingOperations"]:
                return int(await asyncio.to_thread(emu.admin.last_seq))
        await asyncio.sleep(0.25)  # the log has no watch: read it four times a second


def start_kccm(daemons: Daemons, files: Any, plane: ControlPlane) -> Callable[[], None]:
    daemon = daemons.start(
        "azure",
        files.azure_json,
        plane.admin_kubeconfig,
        f"--cluster-name={upstream.CLUSTER_NAME}",
        f"--cluster-cidr={upstream.CLUSTER_CIDR}",
        f"--controllers={','.join(('cloud-node', *CONTROLLERS))}",  # kccm initialises Nodes
        "--allocate-node-cidrs=false",
        "--configure-cloud-routes=true",
        "--route-reconciliation-period=2s",
        "--leader-elect=false",
        env=files.env,
        unset=[*PROXY_VARS, *(v.upper() for v in PROXY_VARS)],
    )

    def alive() -> None:
        if daemon.proc.poll() is not None:
            raise SystemExit(f"kccm exited {daemon.proc.returncode}:\n{daemon.logs()[-3000:]}")

    return alive


def start_upstream(
    processes: upstream.UpstreamProcesses, files: Any, plane: ControlPlane, tmp: Path
) -> Callable[[], None]:
    cert_dir = tmp / "ccm-certs"
    cert_dir.mkdir(exist_ok=True)
    argv = upstream.ccm_argv(
        Path(binary("cloud-controller-manager")),
        "azure",
        cloud_config=files.azure_json,
        kubeconfig=plane.admin_kubeconfig,
        cert_dir=cert_dir,
        port=free_port(),
        controllers=CONTROLLERS,
        allocate_node_cidrs=False,
    )
    ccm = processes.spawn("ccm", argv, upstream.without_proxies(files.env))
    return ccm.alive


def start_cnm(
    processes: upstream.UpstreamProcesses,
    plane: ControlPlane,
    node: str,
    vm_id: str,
    emu: AzureEmulator,
) -> None:
    """cloud-node-manager for ``node`` as its DaemonSet runs it: from its VM's metadata
    service (the emulator's, as the HTTP proxy of 169.254.169.254)."""
    argv = [binary("cloud-node-manager"), f"--node-name={node}",
            f"--kubeconfig={plane.admin_kubeconfig}", "--wait-routes=false", "--v=2"]  # fmt: skip
    env = upstream.without_proxies({}, HTTP_PROXY=emu.admin.imds_for(vm_id), NODE_NAME=node)
    processes.spawn(f"cnm-{node}", argv, env)


async def measure(run: Run, scenario: Scenario, alive: Callable[[], None]) -> Measured:
    if scenario.prepare is not None:
        await scenario.prepare(run)
        await run.until(run.routed, alive)  # every prepared Node routed before counting
        await settled(run.emu, alive, await asyncio.to_thread(run.emu.admin.last_seq))
    since = await asyncio.to_thread(run.emu.admin.last_seq)
    started = time.monotonic()
    await scenario.act(run)
    await run.until(lambda: scenario.done(run), alive)
    until = await settled(run.emu, alive, since)
    found = await asyncio.to_thread(counted, run, since, until, time.monotonic() - started)
    log(f"{run.who} {scenario.name}: {found.arm} ARM, {sum(found.writes.values())} writes "
        f"in {found.seconds:.1f} s")  # fmt: skip
    return found


def counted(run: Run, since: int, until: int, seconds: float) -> Measured:
    """The requests in (since, until] and the objects now."""
    entries = [e for e in arm_since(run.emu, since) if e["seq"] <= until]
    periodic = [e for e in entries if kind(e) == PERIODIC]
    counted = Counter(kind(e) for e in entries if kind(e) != PERIODIC)
    writes = Counter({k: n for k, n in counted.items() if not k.startswith("GET ")})
    objects = normalised(snapshot(run.emu), run.uids, run.namespace, run.node_ports)
    arm = len(entries) - len(periodic)
    return Measured(arm, len(periodic), writes, counted, objects, object_names(objects), seconds)


async def run_daemon(who: str, plane: ControlPlane, tmp: Path, world: str) -> Result:
    """One daemon through every scenario of ``world`` (``standard``: availability-set VMs;
    ``vmss``: a scale set) on an emulator of its own."""
    result = Result(who)
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)), qps=0, burst=0)
    emu = start_azure(tls=emulator_tls(), log_path=tmp / f"emulator-{who}-{world}.log")
    daemons, processes = Daemons(tmp), upstream.UpstreamProcesses(tmp)
    try:
        baseline = emu.admin.state()
        run = Run(who, emu, kube, f"sbs-{who}-{world}")
        if who == "upstream":
            run.node_agent = lambda node, vm_id: start_cnm(processes, plane, node, vm_id, emu)
        if world == "vmss":
            await seed_scale_set(run)
        else:
            for index in range(2):
                await seed_node(run, index)
        keys = FAST | (VMSS_JSON if world == "vmss" else {})
        files = emu.cloud_files(tmp / f"cloud-{who}-{world}", **keys)
        since = emu.admin.last_seq()
        started = time.monotonic()
        alive = (start_kccm(daemons, files, plane) if who == "kccm"
                 else start_upstream(processes, files, plane, tmp))  # fmt: skip
        await run.until(lambda: run.routed(), alive)
        until = await settled(emu, alive, since)
        prefix = "scale set: " if world == "vmss" else ""
        result.scenarios[f"{prefix}start"] = counted(run, since, until, time.monotonic() - started)
        for scenario in VMSS_SCENARIOS if world == "vmss" else SCENARIOS:
            result.scenarios[prefix + scenario.name] = await measure(run, scenario, alive)
        await run.close(alive)
        emu.admin.assert_clean(baseline)
    finally:
        daemons.stop_all(grace=10)
        processes.stop_all()
        emu.stop()
        await kube.close()
    return result


def compact(writes: Counter[str]) -> str:
    parts = [f"{k.split(' ')[0]} {k.split('/')[-2]}" + (f" x{n}" if n > 1 else "")
             for k, n in sorted(writes.items())]  # fmt: skip
    return ", ".join(parts) or "none"


def report(results: list[Result]) -> dict[str, Any]:
    by = {r.who: r for r in results}
    names = list(results[0].scenarios)
    print("\n| scenario | upstream ARM | upstream writes | kccm ARM | kccm writes | objects |")
    print("|---|---|---|---|---|---|")
    doc: dict[str, Any] = {}
    for name in names:
        row = {w: by[w].scenarios[name] for w in by}
        diffs: list[str] = []
        if len(row) == 2:
            diffs = differences(row["upstream"].objects, row["kccm"].objects)
        cells = []
        for who in ("upstream", "kccm"):
            m = row.get(who)
            cells += (
                [f"{m.arm}", f"{sum(m.writes.values())}: {compact(m.writes)}"] if m else ["", ""]
            )
        same = "" if len(row) < 2 else ("same" if not diffs else f"{len(diffs)} differences")
        print(f"| {name} | {' | '.join(cells)} | {same} |")
        doc[name] = {
            w: {"arm": m.arm, "periodic_route_table_reads": m.periodic, "writes": dict(m.writes),
                "by_kind": dict(m.kinds), "seconds": round(m.seconds, 1), "names": m.names,
                "objects": m.objects}
            for w, m in row.items()
        } | {"differences": diffs}  # fmt: skip
    for name in names:
        for line in doc[name]["differences"]:
            print(f"  {name}: {line}")
    return doc


async def main_async(args: argparse.Namespace, plane: ControlPlane, tmp: Path) -> list[Result]:
    results = {w: Result(w) for w in ("upstream", "kccm") if w in args.only}
    for world in args.worlds.split(","):
        for who, result in results.items():
            result.scenarios |= (await run_daemon(who, plane, tmp, world)).scenarios
    return list(results.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="kccm,upstream")
    parser.add_argument("--worlds", default="standard,vmss", help="availability sets, scale set")
    parser.add_argument("--json", help="write the figures and differences to this file")
    args = parser.parse_args()
    for var in PROXY_VARS:
        os.environ.pop(var, None)
        os.environ.pop(var.upper(), None)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kccm-azure-sbs-") as tmp, ControlPlane() as plane:
        results = asyncio.run(main_async(args, plane, Path(tmp)))
    load_after = os.getloadavg()
    before, after = ([round(x, 2) for x in load] for load in (load_before, load_after))
    print(f"machine: {os.cpu_count()} CPUs; load (1, 5, 15 min) at start {before}, end {after}")
    doc = report(results)
    if args.json:
        doc["load_average"] = {"start": load_before, "end": load_after}
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
