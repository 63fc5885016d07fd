"""The chaos bench (issue 28, "a hundred kills"): real ``kccm`` daemons with leader election on
a real apiserver, one provider's cloud shared by all of them, a random workload of Services and
Nodes, and one kind of fault again and again:

- ``kill``: SIGKILL the leader (the Lease's holder), start a replacement standby, wait until
  another process holds the Lease (a takeover);
- ``apiserver``: restart the kube-apiserver under the running daemons, wait until the leader
  renews the Lease through the new apiserver (it reconnected); a daemon that exits is counted
  and replaced (as its pod would be restarted).

Then the workload stops, the bench waits until the cloud matches the Services and Nodes
(:func:`~kccm.testing.chaos.world.verdict`), deletes every Service and checks the cloud holds
nothing of them, and judges leadership (:mod:`~kccm.testing.chaos.leadership`). The
:class:`~kccm.testing.chaos.report.Ledger` is the result."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kccm.kube.client import KubeApiClient
from kccm.kube.config import load_cluster_config
from kccm.kube.errors import AlreadyExists, NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import LEASES, NAMESPACES, NODES, ROLE_BINDINGS, ROLES, SERVICES
from kccm.testing.chaos.fleet import Fleet, LeaseSighting, LeaseWatch
from kccm.testing.chaos.leadership import Mutation, judge
from kccm.testing.chaos.report import Ledger
from kccm.testing.chaos.workload import Workload
from kccm.testing.chaos.world import ChaosWorld, Verdict, verdict
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemons, apply_rbac

__all__ = ["ChaosSettings", "run_chaos"]

LEASE_NAMESPACE = "kube-system"
FAST = ("4s", "3s", "500ms")
"""Lease duration, renew deadline, retry period for ``kill`` (as the election tests use)."""
PATIENT = ("40s", "30s", "2s")
"""For ``apiserver``: a leader that cannot renew within the renew deadline exits by design
(upstream: ``leaderelection lost``), and a restart leaves the daemons without an apiserver
for longer than FAST's 3 s: the graceful stop (up to 10 s) plus the start (~5 s) on this
loaded machine, more than even the cloud-controller-manager's default 10 s at times. With a
renew deadline of 30 s the leader rides a restart out, so the bench sees whether the daemons
reconnect; one that exits anyway is counted (``exits``) and replaced, as its pod would be."""
TAKEOVER_WAIT = 120.0
CONVERGE_WAIT = 300.0
REAP_EVERY = 2.0
"""Seconds between looks for exited daemons while waiting for the leader to renew."""
FAULT_GAP = (1.0, 5.0)
"""Seconds from one healed fault to the next, drawn uniformly (the "random moment")."""


@dataclass
class ChaosSettings:
    mode: str = "kill"
    faults: int = 100
    seed: int = 0
    replicas: int = 2
    rbac: Path = Path("deploy/rbac.yaml")
    say: Callable[[str], None] = print


async def _lease_role(kube: KubeClient, name: str, delete: bool = False) -> None:
    """The shipped RBAC lets the ServiceAccount get/update the ``cloud-controller-manager``
    Lease only: a Role for the bench's own Lease name (so a shared control plane's default
    Lease is left alone)."""
    if delete:
        for resource in (ROLE_BINDINGS, ROLES, LEASES):
            with contextlib.suppress(NotFound):
                await kube.delete(resource, name, namespace=LEASE_NAMESPACE)
        return
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "rules": [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [name],
                "verbs": ["get", "update"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": SA_USER.rsplit(":", 1)[1],
                "namespace": "kube-system",
            }
        ],
    }
    for resource, body in ((ROLES, role), (ROLE_BINDINGS, binding)):
        await kube.patch(
            resource,
            name,
            body,
            patch_type=PatchType.APPLY,
            namespace=LEASE_NAMESPACE,
            field_manager="kccm-chaos",
            force=True,
        )


async def _judge_cloud(kube: KubeClient, world: ChaosWorld, namespace: str, run: str) -> Verdict:
    services = (await kube.list(SERVICES, namespace=namespace)).items
    nodes = (await kube.list(NODES)).items
    mine = [n for n in nodes if (n["metadata"].get("labels") or {}).get(LABEL) == run]
    balancers = await asyncio.to_thread(world.balancers)
    others = await asyncio.to_thread(world.other_leftovers, services)
    found = verdict(world, services, nodes, balancers, others)
    found.pending += [
        f"uninitialised node {n['metadata']['name']}"
        for n in mine
        if any(t.get("key") == UNINITIALIZED for t in (n.get("spec") or {}).get("taints") or ())
    ]
    return found


LABEL = "chaos.kccm.io/run"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


async def _converge(
    kube: KubeClient, world: ChaosWorld, namespace: str, run: str, within: float
) -> tuple[Verdict, float]:
    """Poll the verdict until it is clean or ``within`` runs out: the last one, and when."""
    started = time.monotonic()
    last = Verdict()
    while time.monotonic() - started < within:
        try:
            last = await _judge_cloud(kube, world, namespace, run)
        except Exception as exc:  # a read meeting a change in flight (moto answers 500 for
            # the attributes of a balancer deleted since it was listed): read again
            last = Verdict(pending=[f"cloud or apiserver read failed: {exc!r}"[:300]])
            await asyncio.sleep(1.0)
            continue
        if last.clean:
            break
        await asyncio.sleep(1.0)
    return last, time.monotonic() - started


async def run_chaos(
    plane: ControlPlane, world: ChaosWorld, tmp: Path, settings: ChaosSettings, run: str
) -> Ledger:
    say, rng = settings.say, random.Random(settings.seed)
    ledger = Ledger(world.provider, settings.mode, settings.faults, settings.seed)
    ledger.load_start = os.getloadavg()[0]
    started = time.monotonic()
    kube = KubeApiClient(load_cluster_config(str(plane.admin_kubeconfig)))
    namespace, lease = f"chaos-{run}", f"kccm-chaos-{run}"
    await apply_rbac(kube, settings.rbac, "kccm-chaos")
    await _lease_role(kube, lease)
    with contextlib.suppress(AlreadyExists):
        await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    duration, deadline, retry = PATIENT if settings.mode == "apiserver" else FAST
    fleet = Fleet(
        Daemons(tmp),
        world.provider,
        world.cloud_config(),
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        (
            f"--cluster-name={run}",
            "--leader-elect=true",
            f"--leader-elect-resource-name={lease}",
            f"--leader-elect-lease-duration={duration}",
            f"--leader-elect-renew-deadline={deadline}",
            f"--leader-elect-retry-period={retry}",
            "--controllers=*,-route",
            "--node-monitor-period=1s",
            "--logging-format=json",
            *world.daemon_flags(),
        ),
        world.env_for,
        forward_to=_port(plane.url) if settings.mode == "partition" else None,
    )
    watch = LeaseWatch(kube, LEASE_NAMESPACE, lease)
    workload = Workload(kube, world, rng, namespace)
    stop = asyncio.Event()
    try:
        for _ in range(settings.replicas):
            await fleet.start()
        watch.start()
        await workload.seed_nodes()

        def led_by_member(s: LeaseSighting) -> bool:
            return bool(s.holder) and fleet.by_identity(s.holder) is not None

        await watch.wait_for(led_by_member, TAKEOVER_WAIT)
        say(f"seed {settings.seed}: {settings.replicas} daemons, leader up; workload starts")
        working = asyncio.create_task(workload.run(stop), name="workload")
        for fault in range(settings.faults):
            await asyncio.sleep(rng.uniform(*FAULT_GAP))
            if fault == settings.faults // 2:
                ledger.load_middle = os.getloadavg()[0]
            if settings.mode == "kill":
                await _kill_leader(fleet, watch, ledger)
            elif settings.mode == "partition":
                await _partition_leader(fleet, watch, ledger)
            else:
                await _restart_apiserver(plane, fleet, watch, ledger)
            await _replace_exited(fleet, ledger)
            clock = time.strftime("%H:%M:%S")
            say(f"{clock} {settings.mode} {fault + 1}/{settings.faults}: {ledger.progress()}")
            if working.done():
                await working  # the workload failed: raise its error
        stop.set()
        await working
        ledger.workload = dict(workload.done)
        ledger.workload_failures = dict(workload.failed)
        await watch.wait_for(led_by_member, TAKEOVER_WAIT)
        final, waited = await _converge(kube, world, namespace, run, CONVERGE_WAIT)
        ledger.converged_after = waited
        ledger.final = final.counts()
        ledger.final_detail = [
            *final.without,
            *final.duplicated,
            *final.stale,
            *final.leaked,
            *final.pending,
        ]
        say(f"converged check after {waited:.1f} s: {ledger.final}")
        await _delete_all(kube, namespace, workload)
        after, _ = await _converge(kube, world, namespace, run, CONVERGE_WAIT)
        ledger.after_delete = len(after.leaked) + len(after.pending)
        ledger.after_delete_detail = after.leaked + after.pending
    finally:
        stop.set()
        fleet.stop_all(grace=10)
        await fleet.close_forwarders()
        await watch.stop()
        for node in (await kube.list(NODES, label_selector=f"{LABEL}={run}")).items:
            with contextlib.suppress(NotFound):
                await kube.delete(NODES, node["metadata"]["name"])
        await _lease_role(kube, lease, delete=True)
        with contextlib.suppress(NotFound):
            await kube.delete(NAMESPACES, namespace)
        await kube.close()
        world.close()
    logs = {m.index: m.daemon.log for m in fleet.members}
    mutations = world.mutations(logs)
    deaths = {m.index: d for m in fleet.members if (d := m.killed or m.exited) is not None}
    # the graceful stop at the end is no fault: the last leader's interval ends there too
    verdict_ = judge({m.index: m.log() for m in fleet.members}, deaths, watch.holdings(), mutations)
    ledger.mutations = verdict_.mutations
    ledger.made, ledger.deleted = world.made_and_deleted(mutations)
    ledger.per_process = _per_process(mutations)
    ledger.double_leaders = len(verdict_.overlaps)
    ledger.winding_down = verdict_.winding_down
    ledger.violations = [
        f"kccm-{m.process} {m.operation} {m.subject} at {m.at:.3f}: {why}"
        for m, why in verdict_.violations
    ]
    ledger.leaderships = len(verdict_.beliefs)
    ledger.lease_transitions = max((s.transitions for s in watch.sightings), default=0)
    ledger.processes = len(fleet.members)
    ledger.wall = time.monotonic() - started
    ledger.load_end = os.getloadavg()[0]
    return ledger


def _per_process(mutations: list[Mutation]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in mutations:
        counts[f"kccm-{m.process}"] = counts.get(f"kccm-{m.process}", 0) + 1
    return counts


async def _kill_leader(fleet: Fleet, watch: LeaseWatch, ledger: Ledger) -> None:
    current = watch.current
    member = fleet.by_identity(current.holder) if current is not None else None
    if current is None or member is None:  # the holder died some other way: wait for the next
        current = await watch.wait_for(
            lambda s: bool(s.holder) and fleet.by_identity(s.holder) is not None, TAKEOVER_WAIT
        )
        member = fleet.by_identity(current.holder)
        assert member is not None
    killed = current.holder
    standbys = [m for m in fleet.live() if m is not member and m.log().campaigning is not None]
    at = fleet.kill(member)
    ledger.kills += 1
    await fleet.start()
    took = await watch.wait_for(lambda s: bool(s.holder) and s.holder != killed, TAKEOVER_WAIT)
    ledger.takeovers += 1
    ledger.takeover_seconds.append(took.seen - at)
    ledger.takeover_standbys.append(len(standbys))


async def _restart_apiserver(
    plane: ControlPlane, fleet: Fleet, watch: LeaseWatch, ledger: Ledger
) -> None:
    began = time.time()
    await asyncio.to_thread(plane.restart_apiserver)
    ready = time.time()
    ledger.restarts += 1
    ledger.restart_seconds.append(ready - began)

    def renewed_by_member(s: LeaseSighting) -> bool:
        return (s.renewed or 0) > ready and fleet.by_identity(s.holder) is not None

    async with asyncio.timeout(TAKEOVER_WAIT):
        while True:
            try:
                renewed = await watch.wait_for(renewed_by_member, REAP_EVERY)
                break
            except TimeoutError:
                await _replace_exited(fleet, ledger)
    ledger.reconnect_seconds.append(renewed.seen - ready)


async def _replace_exited(fleet: Fleet, ledger: Ledger) -> None:
    for gone in fleet.reap():
        ledger.exits.append(f"kccm-{gone.index} exit {gone.exit_code}")
        await fleet.start()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].rstrip("/"))


async def _partition_leader(fleet: Fleet, watch: LeaseWatch, ledger: Ledger) -> None:
    """Cut the leader off the apiserver (its cloud stays reachable): another process must
    take the lease, and the cut-off one must exit (lost lease) without acting meanwhile (the
    judge checks its cloud calls against the successor's acquireTime). Then it is replaced."""
    current = await watch.wait_for(
        lambda s: bool(s.holder) and fleet.by_identity(s.holder) is not None, TAKEOVER_WAIT
    )
    member = fleet.by_identity(current.holder)
    assert member is not None
    fleet.forwarders[member.index].cut()
    ledger.partitions += 1
    took = await watch.wait_for(
        lambda s: bool(s.holder) and s.holder != current.holder, TAKEOVER_WAIT
    )
    ledger.takeovers += 1
    gone_already = member.daemon.proc.poll() is not None
    code = await asyncio.to_thread(member.daemon.proc.wait, TAKEOVER_WAIT)
    member.exited, member.exit_code = time.time(), code
    ledger.exits.append(f"kccm-{member.index} exit {code} (cut off)")
    ledger.lingered_seconds.append(0.0 if gone_already else member.exited - took.seen)
    fleet.forwarders[member.index].heal()
    await fleet.start()


async def _delete_all(kube: KubeClient, namespace: str, workload: Workload) -> None:
    services: list[Obj] = (await kube.list(SERVICES, namespace=namespace)).items
    for service in services:
        with contextlib.suppress(NotFound):
            await kube.delete(SERVICES, service["metadata"]["name"], namespace=namespace)
    workload.services.clear()
