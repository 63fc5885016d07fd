"""vcsim administration for the vsphere tests: power, destroy, inventory morefs (pyvmomi).

Imported by the test modules of this directory (pytest puts it on sys.path)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from kccm.emulators.vsphere.vcsim import Vcsim
from kccm.testing.controlplane import ControlPlane
from kccm.testing.daemon import SA_GROUPS, SA_USER, Daemons
from kccm.testing.pytest_plugin import start_vcsim_or_skip


class VCAdmin:
    """What a vSphere administrator does to the simulator during a test."""

    def __init__(self, sim: Vcsim) -> None:
        self.sim = sim
        self.si = SmartConnect(
            host=sim.host,
            port=sim.port,
            user=sim.username,
            pwd=sim.password,
            disableSslCertValidation=True,
        )
        self.content = self.si.content

    def find(self, kind: Any, name: str) -> Any:
        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        try:
            for obj in view.view:
                if obj.name == name:
                    return obj
        finally:
            view.DestroyView()
        raise LookupError(f"no {kind} named {name}")

    def vm(self, name: str) -> Any:
        return self.find(vim.VirtualMachine, name)

    def vms(self) -> list[Any]:
        view = self.content.viewManager.CreateContainerView(
            self.content.rootFolder, [vim.VirtualMachine], True
        )
        try:
            return sorted(view.view, key=lambda v: v.name)
        finally:
            view.DestroyView()

    def moref(self, kind: Any, name: str) -> tuple[str, str]:
        obj = self.find(kind, name)
        return obj._wsdlName, obj._moId

    def _wait(self, task: Any) -> None:
        """Poll the task to its end (pyVim.task.WaitForTask trips on vcsim's task names)."""
        deadline = time.monotonic() + 30
        while (state := task.info.state) not in ("success", "error"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task} still {state}")
            time.sleep(0.05)
        if state == "error":
            raise RuntimeError(str(task.info.error))

    def power_off(self, name: str) -> None:
        self._wait(self.vm(name).PowerOffVM_Task())

    def power_on(self, name: str) -> None:
        self._wait(self.vm(name).PowerOnVM_Task())

    def destroy(self, name: str) -> None:
        vm = self.vm(name)
        if vm.runtime.powerState == "poweredOn":
            self._wait(vm.PowerOffVM_Task())
        self._wait(vm.Destroy_Task())

    def close(self) -> None:
        Disconnect(self.si)
        self.si._stub.DropConnections()


def start_or_skip(**kwargs: Any) -> Vcsim:
    return start_vcsim_or_skip(**kwargs)


def start_daemon(
    daemons: Daemons, plane: ControlPlane, tmp: Path, config: str, *extra: str
) -> tuple[subprocess.Popen[str], Path]:
    """``kccm --cloud-provider=vsphere`` with ``config`` as the shipped ServiceAccount (no
    leader election, a 1 s node monitor period, --v=2): its process and its log."""
    path = tmp / f"vsphere-{len(daemons)}.conf"
    path.write_text(config)
    daemon = daemons.start(
        "vsphere",
        path,
        plane.kubeconfig_for(SA_USER, SA_GROUPS),
        "--leader-elect=false",
        "--node-monitor-period=1s",
        "--v=2",
        *extra,
    )
    return daemon.proc, daemon.log
