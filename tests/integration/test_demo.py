"""`kccm dev demo` (what `make demo` runs) end to end as a subprocess: exit 0 and every step of
its summary held. It starts its own control plane from the cached binaries; requesting the
``control_plane`` fixture gives it the same skip/fail semantics as the other integration tests
(KCCM_REQUIRE_CONTROL_PLANE=1 turns a missing control plane into a failure)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from kccm.testing.controlplane import ControlPlane

ROW = re.compile(r"^\s*(\d+)\s{2}(.+?)\s+(ok|FAILED|skipped|stopped)\s+(-|[\d.]+s)\s*$")
EXPECTED = [
    "start the dev control plane",
    "create 3 local instances and their Nodes (kubelet-style)",
    "start the nodes' HTTP servers (kube-proxy stand-ins)",
    "run the kccm daemon --cloud-provider=local",
    "Nodes initialised by the cloud node controller",
    "create a LoadBalancer Service; wait for its VIP",
    "60 requests via the VIP reach every node",
    "stop instance demo-node-1, its kubelet silent: kcm marks it NotReady",
    "kccm taints demo-node-1 shutdown",
    "demo-node-1 backend unhealthy; traffic moves",
    "delete instance demo-node-2, its kubelet silent: kcm marks it NotReady",
    "kccm deletes Node demo-node-2",
    "traffic reaches only demo-node-3",
    "delete the Service: LB, VIP claim and finalizer gone",
    "teardown",
]


def test_demo_passes_every_step(control_plane: ControlPlane) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kccm", "dev", "demo"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    summary = output.split("\nsummary\n", 1)[1]
    rows = [m.groups() for m in map(ROW.match, summary.splitlines()) if m]
    assert [title for _, title, _, _ in rows] == EXPECTED, output
    assert all(status == "ok" for _, _, status, _ in rows), output
    assert re.search(r"demo-node-1 \d+, demo-node-2 \d+, demo-node-3 \d+; 0 failed", output)
    assert re.search(r"; demo-node-2 \d+, demo-node-3 \d+; 0 failed", output), output
    assert re.search(r"; demo-node-3 60; 0 failed", output), output
    # kube-controller-manager, not the demo, marked both silent Nodes NotReady
    marked = re.findall(r"kube-controller-manager set Ready=Unknown \(NodeStatusUnknown\)", output)
    assert len(marked) == 2, output
    assert "its Lease garbage-collected" in output, output
    assert "demo passed: every step held; everything stopped" in output
