"""The kccm daemon with ``--cloud-provider=vsphere`` on the real apiserver and two vcsims.

Two vCenters (one config, credentials in a Kubernetes Secret), zones and regions from tags.
kubelet-style uninitialised Nodes for every VM get providerID, addresses, instance type and
topology labels; a VM powered off gets the shutdown taint, loses it when back; a destroyed VM's
Node is deleted; injected NotAuthenticated / NoPermission faults are absorbed and logged.
A wrong password at start ends the process with one line and exit status 2. A shared session
manager in the Secret (fake vc-session-manager handing out vcsim clone tickets) logs in with
CloneSession; a wrong session manager token ends the process the same way.

Size: ``KCCM_VSPHERE_E2E_VMS`` VMs per vCenter (default 4). ``KCCM_VSPHERE_E2E_REPORT=<file>``
writes the figures (times, vSphere calls) as JSON; bench/vsphere_node_init.py drives 200.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyVmomi import vim
from vsphere_admin import VCAdmin, start_daemon, start_or_skip

from kccm.emulators.vsphere.sessionmanager import FakeSessionManager
from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import (
    NODES,
    SECRETS,
)
from kccm.testing.controllers import absent
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controllers import initialised_nodes as _initialised
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemons, apply_rbac
from kccm.testing.kubelet import kubelet_node
from kccm.testing.kubelet import ready_condition as ready
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

ROOT = Path(__file__).resolve().parents[3]
SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
VMS = int(os.environ.get("KCCM_VSPHERE_E2E_VMS", "4"))
BUDGET = 60.0 + 0.5 * VMS


eventually = functools.partial(shared_eventually, within=BUDGET, interval=0.25)
"""The shared :func:`kccm.testing.controllers.eventually` with this module's bound and pace
(it polls other processes)."""


@dataclass
class World:
    sims: dict[str, Vcsim]
    admins: dict[str, VCAdmin]
    tmp: Path
    plane: ControlPlane
    secret: str
    daemons: Daemons
    figures: dict[str, Any] = field(default_factory=dict)

    def config(self) -> str:
        text = f"[Global]\nsecret-name = {self.secret}\nsecret-namespace = kube-system\n"
        for tenant, sim in self.sims.items():
            text += f'\n[VirtualCenter "{tenant}"]\nserver = {sim.host}\nport = {sim.port}\n'
            text += "insecure-flag = true\n"
        return text + "\n[Labels]\nzone = k8s-zone\nregion = k8s-region\n"

    def start(self, config: str, *extra: str) -> tuple[subprocess.Popen[str], Path]:
        return start_daemon(self.daemons, self.plane, self.tmp, config, *extra)

    def stop(self) -> None:
        self.daemons.stop_all(grace=30)

    def calls(self) -> dict[str, int]:
        """vSphere calls per method, both vCenters summed (SOAP method or REST path)."""
        total: dict[str, int] = {}
        for sim in self.sims.values():
            found = sim.calls()
            for kind in ("soap", "rest"):
                for op, n in found[kind].items():
                    total[op] = total.get(op, 0) + n
        return total


@pytest.fixture
async def world(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> AsyncIterator[World]:
    await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-vsphere-e2e")
    await apply_rbac(
        kube, ROOT / "examples" / "vsphere" / "secret-reader-rbac.yaml", "kccm-vsphere-e2e"
    )
    sims = {
        "vc-a": start_or_skip(vms=VMS, hosts=2, hostname_prefix="a-", ip_base="10.10.0.0"),
        "vc-b": start_or_skip(vms=VMS, hosts=2, hostname_prefix="b-", ip_base="10.20.0.0"),
    }
    admins = {tenant: VCAdmin(sim) for tenant, sim in sims.items()}
    for tenant, sim in sims.items():
        admin = admins[tenant]
        sim.tag("k8s-region", "region-1", [admin.moref(vim.Datacenter, "DC0")])
        sim.tag(
            "k8s-zone", f"zone-{tenant[-1]}", [admin.moref(vim.ClusterComputeResource, "DC0_C0")]
        )
    host = next(iter(sims.values())).host  # both listen on 127.0.0.1: one key serves both
    data = {f"{host}.username": "user", f"{host}.password": "pass"}
    secret = await _secret(kube, "vsphere-creds", data)
    env = World(sims, admins, tmp_path, control_plane, secret, Daemons(tmp_path))
    try:
        yield env
    finally:
        env.stop()
        for admin in admins.values():
            admin.close()
        for sim in sims.values():
            sim.stop()
        await kube.delete(SECRETS, secret, namespace="kube-system")


async def _taints(kube: KubeApiClient, name: str) -> set[str]:
    node = await kube.get(NODES, name)
    return {t["key"] for t in node["spec"].get("taints") or []}


async def _set_ready(kube: KubeApiClient, name: str, status: str) -> None:
    # a patch, not get + replace: kccm may write the Node in between (409)
    await kube.patch(NODES, name, {"status": {"conditions": [ready(status)]}}, subresource="status")


async def test_two_vcenters_nodes_lifecycle_and_faults(
    world: World, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    # NotAuthenticated then Timeout (vCenter A), NoPermission twice (B) while Nodes initialise
    world.sims["vc-a"].add_fault("RetrievePropertiesEx", "NotAuthenticated", count=1)
    world.sims["vc-a"].add_fault("RetrievePropertiesEx", "Timeout", count=1)
    world.sims["vc-b"].add_fault("RetrievePropertiesEx", "NoPermission", count=2)
    vms = {
        (tenant, vm.name): kube_cleanup.add(NODES, world.sims[tenant].hostname(vm.name))
        for tenant, admin in world.admins.items()
        for vm in admin.vms()
    }
    for sim in world.sims.values():  # from here on, until the assertions, only kccm calls
        sim.reset_calls()
    _, log = world.start(world.config())
    started = time.monotonic()
    for name in vms.values():
        await kube.create(NODES, kubelet_node(name))
    nodes = await eventually(lambda: _initialised(kube, list(vms.values())))
    world.figures["nodes"] = len(nodes)
    world.figures["nodes_initialised_s"] = round(time.monotonic() - started, 2)
    world.figures["vsphere_calls_for_init"] = sum(world.calls().values())
    world.figures["vsphere_calls_by_method"] = world.calls()
    for (tenant, vm_name), node in zip(vms, nodes, strict=True):
        vm = world.admins[tenant].vm(vm_name)
        assert node["spec"]["providerID"] == f"vsphere://{vm.config.uuid.lower()}"
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "vsphere-vm.cpu-2.mem-4gb.os-ubuntu"
        assert labels["topology.kubernetes.io/zone"] == f"zone-{tenant[-1]}"
        assert labels["topology.kubernetes.io/region"] == "region-1"
        addresses = {(a["type"], a["address"]) for a in node["status"]["addresses"]}
        assert ("InternalIP", vm.guest.net[0].ipAddress[0]) in addresses
    text = log.read_text()
    assert "session not authenticated during read the VM inventory; logging in again" in text
    assert "permission denied: the user lacks privilege System.Modify" in text
    assert "SystemError: Operation timed out" in text
    assert "login failed" not in text

    # -- power off -> shutdown taint; power on -> removed (vCenter B) -------------------------
    phase = time.monotonic()
    off_key = ("vc-b", "DC0_C0_RP0_VM0")
    off = vms[off_key]
    world.admins["vc-b"].power_off(off_key[1])
    await _set_ready(kube, off, "Unknown")  # kubelet stops posting
    await eventually(lambda: _has(kube, off, SHUTDOWN))
    world.figures["shutdown_taint_s"] = round(time.monotonic() - phase, 2)
    world.admins["vc-b"].power_on(off_key[1])
    await _set_ready(kube, off, "True")  # kubelet is back
    await eventually(lambda: _lacks(kube, off, SHUTDOWN))

    # -- destroyed VM -> Node deleted (vCenter A) ---------------------------------------------
    phase = time.monotonic()
    gone_key = ("vc-a", "DC0_C0_RP0_VM1")
    world.admins["vc-a"].destroy(gone_key[1])
    await _set_ready(kube, vms[gone_key], "Unknown")
    await eventually(lambda: absent(kube, NODES, vms[gone_key]))
    world.figures["node_deleted_s"] = round(time.monotonic() - phase, 2)
    for key, name in vms.items():  # nobody else was touched
        if key != gone_key:
            assert SHUTDOWN not in await _taints(kube, name)
    world.figures["vsphere_calls_total"] = sum(world.calls().values())
    tasks = {op: n for op, n in world.calls().items() if op.endswith("_Task")}
    # the test's own power-off, power-on and destroy: kccm never changes vSphere
    assert tasks == {"PowerOffVM_Task": 2, "PowerOnVM_Task": 1, "Destroy_Task": 1}
    world.figures["vsphere_writes_by_kccm"] = 0
    print("\nvsphere e2e figures:", json.dumps(world.figures, indent=1))
    if report := os.environ.get("KCCM_VSPHERE_E2E_REPORT"):
        await asyncio.to_thread(Path(report).write_text, json.dumps(world.figures, indent=1))


async def _has(kube: KubeApiClient, name: str, taint: str) -> bool:
    return taint in await _taints(kube, name)


async def _lacks(kube: KubeApiClient, name: str, taint: str) -> bool:
    return taint not in await _taints(kube, name)


async def test_wrong_password_at_start_is_one_line_and_exit_2(world: World) -> None:
    sim = world.sims["vc-a"]
    config = sim.ini_section().replace("password = pass", "password = wrong") + (
        "\n[Labels]\nzone = k8s-zone\nregion = k8s-region\n"
    )
    proc, log = world.start(config)
    code = await asyncio.to_thread(proc.wait, 60)
    assert code == 2
    errors = [line for line in log.read_text().splitlines() if "login failed" in line]
    assert len(errors) == 1, log.read_text()
    assert "incorrect user name or password" in errors[0]
    assert "wrong" not in errors[0]


async def _secret(kube: KubeApiClient, prefix: str, values: dict[str, str]) -> str:
    """A credentials Secret in kube-system holding ``values``; its name."""
    secret = unique_name(prefix)
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": secret, "namespace": "kube-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
        },
    )
    return secret


async def _start_with_secret(
    world: World, kube: KubeApiClient, prefix: str, values: dict[str, str], marker: str
) -> tuple[str, list[str]]:
    """Start kccm on vc-a with credentials from a Secret of ``values``; it must exit 2. Its
    log and the log lines holding ``marker``."""
    secret = await _secret(kube, prefix, values)
    try:
        proc, log = world.start(_vc_a_config(world, secret))
        code = await asyncio.to_thread(proc.wait, 60)
        text = await asyncio.to_thread(log.read_text)
    finally:
        await kube.delete(SECRETS, secret, namespace="kube-system")
    assert code == 2, text
    return text, [line for line in text.splitlines() if marker in line]


def _vc_a_config(world: World, secret: str) -> str:
    """vCenter A alone, credentials from ``secret``, no zones."""
    sim = world.sims["vc-a"]
    return (
        f"[Global]\nsecret-name = {secret}\nsecret-namespace = kube-system\n"
        f'[VirtualCenter "vc-a"]\nserver = {sim.host}\nport = {sim.port}\n'
        "insecure-flag = true\n"
    )


async def test_wrong_password_in_the_secret_is_one_line_and_exit_2(
    world: World, kube: KubeApiClient
) -> None:
    sim = world.sims["vc-a"]
    values = {f"{sim.host}.username": "user", f"{sim.host}.password": "not-it"}
    text, errors = await _start_with_secret(
        world, kube, "vsphere-bad-creds", values, "login failed"
    )
    assert len(errors) == 1, text
    assert "not-it" not in text


@pytest.fixture
def session_manager(world: World) -> Iterator[FakeSessionManager]:
    """A shared session manager for vCenter A with its own vCenter session."""
    owner = VCAdmin(world.sims["vc-a"])
    try:
        issue = owner.content.sessionManager.AcquireCloneTicket
        with FakeSessionManager("sm-bearer", issue) as fake:
            yield fake
    finally:
        owner.close()


def _session_manager_keys(world: World, url: str, token: str) -> dict[str, str]:
    host = world.sims["vc-a"].host
    return {f"{host}.vc-session-manager-url": url, f"{host}.vc-session-manager-token": token}


async def test_a_session_manager_in_the_secret_logs_in_and_nodes_initialise(
    world: World,
    kube: KubeApiClient,
    kube_cleanup: KubeCleanup,
    session_manager: FakeSessionManager,
) -> None:
    """Upstream vclib login with SessionManagerURL: CloneSession, no user or password. No
    zones: vcsim's REST endpoints refuse the SOAP session id a real vCenter accepts."""
    sim = world.sims["vc-a"]
    keys = _session_manager_keys(world, session_manager.url, "sm-bearer")
    secret = await _secret(kube, "vsphere-sm-creds", keys)
    names = [kube_cleanup.add(NODES, sim.hostname(vm.name)) for vm in world.admins["vc-a"].vms()]
    try:
        sim.reset_calls()
        _, log = world.start(_vc_a_config(world, secret))
        for name in names:
            await kube.create(NODES, kubelet_node(name))
        nodes = await eventually(lambda: _initialised(kube, names))
        assert all(n["spec"]["providerID"].startswith("vsphere://") for n in nodes)
        soap = sim.calls()["soap"]
        assert soap.get("CloneSession", 0) >= 1
        assert "Login" not in soap
        assert "from the shared session manager" in await asyncio.to_thread(log.read_text)
        assert session_manager.requests >= 1
    finally:
        await kube.delete(SECRETS, secret, namespace="kube-system")


async def test_a_wrong_session_manager_token_is_one_line_and_exit_2(
    world: World, kube: KubeApiClient, session_manager: FakeSessionManager
) -> None:
    keys = _session_manager_keys(world, session_manager.url, "not-the-bearer")
    text, errors = await _start_with_secret(
        world, kube, "vsphere-sm-bad", keys, "refused the token"
    )
    assert len(errors) == 1, text
    assert "401 Unauthorized" in errors[0]
    assert "not-the-bearer" not in text
