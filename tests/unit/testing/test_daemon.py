"""kccm.testing.daemon's own logic: the command line, the environment, stopping with a grace,
waiting for a log line, applying only the RBAC documents (child Pythons stand in for kccm)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from kccm.kube.interface import KubeClient, PatchType
from kccm.kube.resources import CLUSTER_ROLES, SERVICE_ACCOUNTS
from kccm.testing.controllers import eventually
from kccm.testing.daemon import (
    Daemon,
    DaemonExited,
    Daemons,
    apply_rbac,
    daemon_args,
    daemon_env,
    log_digest,
)

READY = "import signal, sys, time\n{handler}\nprint('ready', flush=True)\ntime.sleep(60)\n"
HONOURS_SIGTERM = READY.format(handler="")
IGNORES_SIGTERM = READY.format(handler="signal.signal(signal.SIGTERM, signal.SIG_IGN)")


def _child(tmp_path: Path, script: str) -> Daemon:
    log = tmp_path / "child.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdout=sink, stderr=subprocess.STDOUT, text=True
        )
    return Daemon(proc, 0, log)


def test_the_command_line_serves_on_loopback_and_ends_with_the_callers_flags() -> None:
    args = daemon_args("fake", Path("/c.conf"), Path("/k.yaml"), 4321, "--v=2", "--secure-port=9")
    assert args[:3] == [sys.executable, "-m", "kccm"]
    assert args[3:] == [
        "--cloud-provider=fake",
        "--cloud-config=/c.conf",
        "--kubeconfig=/k.yaml",
        "--secure-port=4321",
        "--bind-address=127.0.0.1",
        "--v=2",
        "--secure-port=9",  # last: kccm's flag parsing lets it win
    ]


def test_the_environment_is_unbuffered_with_overrides_and_removals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "someone")
    monkeypatch.setenv("KCCM_KEPT", "yes")
    env = daemon_env({"AWS_ACCESS_KEY_ID": "test"}, unset=("AWS_PROFILE",))
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["AWS_ACCESS_KEY_ID"] == "test"
    assert env["KCCM_KEPT"] == "yes"
    assert "AWS_PROFILE" not in env


@pytest.mark.parametrize(
    ("script", "grace", "status"),
    [
        pytest.param(HONOURS_SIGTERM, 30.0, -signal.SIGTERM, id="sigterm-within-the-grace"),
        pytest.param(IGNORES_SIGTERM, 0.5, -signal.SIGKILL, id="sigkill-after-the-grace"),
        pytest.param(HONOURS_SIGTERM, 0.0, -signal.SIGKILL, id="no-grace-sigkill-at-once"),
    ],
)
async def test_stop_sends_sigterm_then_sigkill_after_the_grace(
    tmp_path: Path, script: str, grace: float, status: int
) -> None:
    daemon = _child(tmp_path, script)
    await eventually(lambda: daemon.logged("ready"), within=30)
    assert daemon.stop(grace) == status


async def test_logged_fails_at_once_when_the_process_has_exited(tmp_path: Path) -> None:
    daemon = _child(tmp_path, "print('starting'); raise SystemExit(3)")
    await asyncio.to_thread(daemon.proc.wait, 30)
    with pytest.raises(DaemonExited, match=r"kccm exited early \(3\):\nstarting"):
        await daemon.logged("never logged")
    assert daemon.stop(30) == 3, "stopping an ended daemon reports its status"


async def test_a_line_logged_before_the_process_exited_counts(tmp_path: Path) -> None:
    """A line a daemon logs just before it ends (its shutdown message) is found: the wait
    fails only when the line is not in the whole log of an ended process."""
    daemon = _child(tmp_path, "print('shutdown complete', flush=True)")
    await asyncio.to_thread(daemon.proc.wait, 30)
    assert await daemon.logged("shutdown complete")


async def test_logged_is_false_until_the_line_appears(tmp_path: Path) -> None:
    daemon = _child(tmp_path, HONOURS_SIGTERM)
    try:
        assert not await daemon.logged("not in the log")
        await eventually(lambda: daemon.logged("ready"), within=30)
    finally:
        daemon.stop(0)


def test_daemons_number_their_logs_and_stop_them_all(tmp_path: Path) -> None:
    daemons = Daemons(tmp_path)
    config = tmp_path / "c.conf"
    config.write_text("")
    started = [daemons.start("no-such-provider", config, tmp_path / "k.yaml") for _ in range(2)]
    assert [d.log.name for d in started] == ["kccm-0.log", "kccm-1.log"]
    assert len(daemons) == 2
    daemons.stop_all(grace=30)
    assert all(d.proc.poll() is not None for d in started)


def test_stop_all_prints_each_log_for_a_failed_test_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    daemons = Daemons(tmp_path)
    config = tmp_path / "c.conf"
    config.write_text("")
    daemon = daemons.start("no-such-provider", config, tmp_path / "k.yaml")
    assert daemon.proc.wait(60) == 2
    daemons.stop_all(grace=30)
    printed = capsys.readouterr().out
    assert "--- kccm-0.log (exit 2) ---" in printed
    assert "no-such-provider" in printed, "the daemon's own error line is shown"


@pytest.mark.parametrize(
    ("lines", "digest"),
    [
        pytest.param(["I a", "I b"], "I a\nI b", id="short-log-whole"),
        pytest.param(
            ["I a", "W warn", "I b", "E err", "I c", "I d"],
            "W warn\nE err\n...\nI c\nI d",
            id="warnings-and-errors-then-the-tail",
        ),
        pytest.param(["I a", "I b", "I c", "I d"], "I c\nI d", id="quiet-log-only-the-tail"),
    ],
)
def test_log_digest(lines: list[str], digest: str) -> None:
    assert log_digest("\n".join(lines), tail=2) == digest


def test_log_digest_keeps_the_end_of_a_long_log() -> None:
    assert log_digest("x" * 100 + "\nEND", tail=2, limit=10) == "x" * 6 + "\nEND"


def test_stop_all_stops_the_others_when_one_stop_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that cannot be reaped must not leave the ones after it running."""
    stuck, other = _child(tmp_path, HONOURS_SIGTERM), _child(tmp_path, HONOURS_SIGTERM)

    def unreaped(grace: float) -> int:
        stuck.proc.kill()
        stuck.proc.wait(30)
        raise subprocess.TimeoutExpired("kccm", grace)

    monkeypatch.setattr(stuck, "stop", unreaped)
    daemons = Daemons(tmp_path, [stuck, other])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            daemons.stop_all(grace=30)
        assert other.proc.poll() is not None
    finally:
        other.stop(0)


class _RecordingKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, str | None, PatchType, str | None, bool]] = []

    async def patch(self, resource: Any, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        call = (str(resource), name, kw["namespace"], kw["patch_type"], kw["field_manager"])
        self.patches.append((*call, kw["force"]))
        return dict(body)


async def test_apply_rbac_applies_only_the_rbac_documents(tmp_path: Path) -> None:
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text(
        "kind: ServiceAccount\nmetadata: {name: ccm, namespace: kube-system}\n---\n"
        "kind: Deployment\nmetadata: {name: ccm, namespace: kube-system}\n---\n"
        "---\n"
        "kind: ClusterRole\nmetadata: {name: ccm-role}\nrules: []\n"
    )
    kube = _RecordingKube()
    await apply_rbac(cast(KubeClient, kube), manifest, "kccm-test")
    assert kube.patches == [
        (str(SERVICE_ACCOUNTS), "ccm", "kube-system", PatchType.APPLY, "kccm-test", True),
        (str(CLUSTER_ROLES), "ccm-role", None, PatchType.APPLY, "kccm-test", True),
    ]
