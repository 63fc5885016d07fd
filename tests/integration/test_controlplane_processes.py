"""The control plane never leaves an etcd or kube-apiserver behind, however its owner ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kccm.testing.controlplane import ControlPlane, find_binaries, leftover_processes

pytestmark = pytest.mark.usefixtures("control_plane")  # binaries present (or skip/fail)


def _wait_until_none_left(marker: str, budget: float = 60.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + budget
    while (left := leftover_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp_path), "KCCM_REQUIRE_CONTROL_PLANE": "1"}


@pytest.mark.parametrize(
    ("kcm", "processes"),
    [
        pytest.param(False, 2, id="etcd-and-apiserver"),
        pytest.param(True, 3, id="with-kube-controller-manager"),
    ],
)
def test_sigkilled_owner_takes_its_processes_along(
    tmp_path: Path, kcm: bool, processes: int
) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from kccm.testing.controlplane import ControlPlane
        plane = ControlPlane(controller_manager={kcm}).start()
        print("ready", flush=True)
        time.sleep(600)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=_env(tmp_path)
    ) as owner:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "ready"
        assert len(leftover_processes(str(tmp_path))) == processes
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
    assert _wait_until_none_left(str(tmp_path)) == []


INNER_TESTS = {
    "fixture-raises-after-start": """
        import pytest

        @pytest.fixture
        def broken(control_plane):
            raise RuntimeError("boom mid-fixture")

        def test_uses_broken(broken):
            pass
    """,
    "test-interrupted-by-ctrl-c": """
        import os, signal

        def test_interrupted(control_plane):
            # A background job may inherit SIGINT ignored; act like a terminal's Ctrl-C.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.kill(os.getpid(), signal.SIGINT)
    """,
    "test-fails": """
        def test_fails(control_plane):
            assert False
    """,
}


@pytest.mark.parametrize("body", [pytest.param(b, id=k) for k, b in INNER_TESTS.items()])
def test_pytest_session_leaves_nothing_behind(tmp_path: Path, body: str) -> None:
    find_binaries()
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode != 0, run.stdout
    assert _wait_until_none_left(str(tmp_path)) == []


def test_context_manager_stops_and_cleans_up() -> None:
    with ControlPlane() as plane:
        root = plane.root
        assert set(plane.pids) == {"etcd", "kube-apiserver"}
    assert not root.exists()
    assert leftover_processes(str(root)) == []


def test_dev_up_runs_in_the_foreground_until_ctrl_c(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "kccm", "dev", "up"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(tmp_path),
    ) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith("press Ctrl-C"):
                break
        exports = [x for x in lines if x.startswith("export KUBECONFIG=")]
        assert exports, lines
        kubeconfig = Path(exports[0].split("=", 1)[1])
        existed = kubeconfig.is_file()
        running = leftover_processes(str(tmp_path))
        proc.send_signal(signal.SIGINT)  # before any assert: a failure must not leave it running
        rest = proc.stdout.read()
        assert existed
        names = sorted(Path(argv.split()[0]).name for _, argv in running)
        assert names == ["etcd", "kube-apiserver", "kube-controller-manager"], running
        assert proc.wait(90) == 0, rest
    assert "stopped; nothing left running" in rest
    assert not kubeconfig.exists(), "the temp dir is removed"
    assert leftover_processes(str(tmp_path)) == []


def test_apiserver_restarted_from_a_short_lived_thread_survives_the_thread() -> None:
    """PR_SET_PDEATHSIG follows the forking *thread*; the control plane forks from its own
    long-lived thread, so a restart done by a worker thread that then exits is harmless."""
    import threading

    with ControlPlane() as plane:
        worker = threading.Thread(target=plane.restart_apiserver)
        worker.start()
        worker.join()
        pid = plane.pids["kube-apiserver"]
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(["tail", f"--pid={pid}", "-f", "/dev/null"], timeout=2)
        assert plane.pids.get("kube-apiserver") == pid, "still alive after the thread ended"
