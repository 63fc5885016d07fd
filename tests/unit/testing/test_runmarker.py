"""CI's leftover check judges only its own run's processes: those whose environment carries
its ``KCCM_TEST_RUN`` value exactly (kccm.testing.runmarker), never another job's."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kccm.testing.runmarker import RUN_VARIABLE, ancestors, main, run_processes


def fake_proc(root: Path, processes: dict[int, tuple[int, list[str] | None, str]]) -> Path:
    """A /proc with pid -> (parent pid, environment or None when unreadable, command)."""
    for pid, (parent, environ, command) in processes.items():
        entry = root / str(pid)
        entry.mkdir()
        (entry / "stat").write_bytes(f"{pid} (a) b) S {parent} 1 1 0".encode())
        (entry / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")
        if environ is not None:
            (entry / "environ").write_bytes(b"\0".join(v.encode() for v in environ) + b"\0")
    (root / "self").mkdir()
    return root


PROCESSES = {
    10: (1, ["HOME=/root", f"{RUN_VARIABLE}=run-1"], "etcd --data-dir x"),
    11: (1, [f"{RUN_VARIABLE}=run-12"], "vcsim -l 127.0.0.1:0"),
    12: (1, [f"X{RUN_VARIABLE}=run-1"], "kube-apiserver"),
    13: (1, None, "unreadable"),
    14: (1, [f"{RUN_VARIABLE}=run-2"], "etcd --data-dir y"),
    15: (10, [f"{RUN_VARIABLE}=run-1"], "python -m kccm.testing.runmarker run-1"),
    16: (1, [], "another job's kube-apiserver"),
}


@pytest.mark.parametrize(
    ("run", "exclude", "found"),
    [
        pytest.param("run-1", (), [10, 15], id="exactly-this-runs-value"),
        pytest.param("run-2", (), [14], id="another-run-is-not-this-one"),
        pytest.param("run-1", (15,), [10], id="the-check-itself-left-out"),
        pytest.param("run-3", (), [], id="none"),
    ],
)
def test_run_processes_match_the_whole_environment_entry(
    tmp_path: Path, run: str, exclude: tuple[int, ...], found: list[int]
) -> None:
    proc = fake_proc(tmp_path, PROCESSES)
    assert [pid for pid, _ in run_processes(run, proc=proc, exclude=exclude)] == found


def test_the_command_line_is_reported(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, PROCESSES)
    assert run_processes("run-2", proc=proc) == [(14, "etcd --data-dir y")]


def test_an_empty_run_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=RUN_VARIABLE):
        run_processes("", proc=tmp_path)


def test_ancestors_follow_the_parent_chain(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, {30: (20, [], "c"), 20: (10, [], "b"), 10: (0, [], "a")})
    assert ancestors(30, proc) == {30, 20, 10}
    assert ancestors(99, proc) == {99}, "a process gone meanwhile ends the chain"


def test_main_finds_a_live_process_of_the_run_and_not_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = f"test-{uuid.uuid4().hex}"
    assert main([run], grace=0) == 0
    env = {**os.environ, RUN_VARIABLE: run}
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        # Popen may return while the child's execve is still laying out its new environment
        # (Python 3.13 spawns with posix_spawn): its /proc environ is read once it has run
        assert child.stdout is not None
        assert child.stdout.readline() == b"up\n"
        assert main([run], grace=0) == 1
        assert capsys.readouterr().err.startswith(f"{child.pid} {sys.executable} -c")
    finally:
        assert child.stdin is not None
        assert child.stdout is not None
        child.stdin.close()
        child.wait()
        child.stdout.close()
    assert main([run], grace=0) == 0


def test_main_needs_the_run_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert f"${RUN_VARIABLE}" in capsys.readouterr().err
