"""Issue 25 items 1 and 2 through the kccm daemon (``--cloud-provider=vsphere``) on the real
apiserver and vcsim: what kccm does not know yet is neither "gone" nor a reason to exit.

- A configured datacenter vcsim does not have (``datacenters = "DC9"``; the VMs are in DC0):
  a NotReady Node whose VM exists is kept, and the error names the datacenter as upstream's
  ``vclib.GetDatacenter`` does (``datacenter 'DC9' not found``).
- The credentials Secret is created after kccm starts: kccm keeps running, says what it waits
  for, and initialises the Nodes once the Secret exists (upstream's lookups retry the login).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from vsphere_admin import VCAdmin, start_daemon, start_or_skip

from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.kube.client import KubeApiClient
from kccm.kube.resources import EVENTS, NODES, SECRETS
from kccm.testing.controllers import absent, initialised_nodes
from kccm.testing.controllers import eventually as shared_eventually
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import Daemons, apply_rbac
from kccm.testing.kubelet import kubelet_node, ready_condition
from kccm.testing.pytest_plugin import KubeCleanup, unique_name

ROOT = Path(__file__).resolve().parents[3]
eventually = functools.partial(shared_eventually, within=90.0, interval=0.25)


@dataclass
class Env:
    sim: Vcsim
    admin: VCAdmin
    tmp: Path
    plane: ControlPlane
    daemons: Daemons

    def start(self, config: str) -> tuple[subprocess.Popen[str], Path]:
        return start_daemon(self.daemons, self.plane, self.tmp, config)

    def vc_section(self, **extra: str) -> str:
        lines = [f'[VirtualCenter "{self.sim.host}"]', f"port = {self.sim.port}"]
        lines += ["insecure-flag = true", *(f"{k} = {v}" for k, v in extra.items())]
        return "\n".join(lines) + "\n"


@pytest.fixture
async def env(
    control_plane: ControlPlane, kube: KubeApiClient, tmp_path: Path
) -> AsyncIterator[Env]:
    await apply_rbac(kube, ROOT / "deploy" / "rbac.yaml", "kccm-vsphere-unknowns")
    await apply_rbac(
        kube, ROOT / "examples" / "vsphere" / "secret-reader-rbac.yaml", "kccm-vsphere-unknowns"
    )
    sim = start_or_skip(vms=2, hostname_prefix="u-", ip_base="10.30.0.0")
    admin = VCAdmin(sim)
    found = Env(sim, admin, tmp_path, control_plane, Daemons(tmp_path))
    try:
        yield found
    finally:
        found.daemons.stop_all(grace=30)
        admin.close()
        sim.stop()


def _log_has(proc: subprocess.Popen[str], log: Path, text: str) -> bool:
    """Whether ``log`` holds ``text``; an AssertionError with the log once the daemon exited."""
    content = log.read_text()
    if text in content:
        return True
    if proc.poll() is not None:
        raise AssertionError(f"kccm exited {proc.returncode} before logging {text!r}:\n{content}")
    return False


async def test_an_unknown_datacenter_never_deletes_a_node_whose_vm_exists(
    env: Env, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    vm = env.admin.vm("DC0_C0_RP0_VM0")
    name = kube_cleanup.add(NODES, env.sim.hostname(vm.name))
    node = kubelet_node(name)
    node["spec"] = {"providerID": f"vsphere://{vm.config.uuid.lower()}"}  # initialised before
    await kube.create(NODES, node)
    not_ready = {"status": {"conditions": [ready_condition("False")]}}
    await kube.patch(NODES, name, not_ready, subresource="status")
    creds = f"user = {env.sim.username}\npassword = {env.sim.password}\n"
    proc, log = env.start(env.vc_section(datacenters='"DC9"') + creds)
    wanted = f"error checking if node {name} exists: vCenter {env.sim.host}: datacenter 'DC9'"

    async def decided() -> bool:  # either outcome ends the wait; only one passes
        return await asyncio.to_thread(_log_has, proc, log, wanted) or await absent(
            kube, NODES, name
        )

    await eventually(decided)
    assert not await absent(kube, NODES, name), "kccm deleted the Node of an existing VM"
    events = (await kube.list(EVENTS, namespace="default")).items
    assert not [
        e
        for e in events
        if e.get("reason") == "DeletingNode" and (e.get("involvedObject") or {}).get("name") == name
    ]
    assert "datacenter 'DC9' not found" in log.read_text()


async def test_a_credentials_secret_created_late_is_waited_for(
    env: Env, kube: KubeApiClient, kube_cleanup: KubeCleanup
) -> None:
    secret = unique_name("vsphere-late")
    config = (
        f"[Global]\nsecret-name = {secret}\nsecret-namespace = kube-system\n" + env.vc_section()
    )
    names = [kube_cleanup.add(NODES, env.sim.hostname(vm.name)) for vm in env.admin.vms()]
    proc, log = env.start(config)
    for name in names:
        await kube.create(NODES, kubelet_node(name))
    waiting = f"credentials secret kube-system/{secret} does not exist (yet); waiting for it"
    await eventually(lambda: asyncio.to_thread(_log_has, proc, log, waiting))
    host = env.sim.host
    values = {f"{host}.username": env.sim.username, f"{host}.password": env.sim.password}
    created = time.monotonic()
    await kube.create(
        SECRETS,
        {
            "metadata": {"name": secret, "namespace": "kube-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
        },
    )
    try:
        nodes = await eventually(lambda: initialised_nodes(kube, names))
        print(f"\nNodes initialised {time.monotonic() - created:.2f} s after the Secret")
        assert all(n["spec"]["providerID"].startswith("vsphere://") for n in nodes)
        assert proc.poll() is None, log.read_text()
    finally:
        await kube.delete(SECRETS, secret, namespace="kube-system")
