"""The kccm daemon as a subprocess of an integration test.

:class:`Daemons` starts ``python -m kccm`` (any provider, cloud config and kubeconfig) on a free
loopback port with its output in ``kccm-<n>.log`` and stops every daemon it started;
:class:`Daemon` answers HTTPS requests to the serving port, reads the log, tells when a line was
logged (failing at once if the process exited) and stops the process: SIGTERM, then SIGKILL after
a grace. :func:`apply_rbac` server-side applies a manifest's RBAC objects (``deploy/rbac.yaml``)
so the daemon can run as the shipped ServiceAccount (:data:`SA_USER`, :data:`SA_GROUPS`, for
:meth:`kccm.testing.controlplane.ControlPlane.kubeconfig_for`).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kccm.kube.interface import KubeClient, PatchType
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    Resource,
)
from kccm.testing.ports import free_port

SA_USER = "system:serviceaccount:kube-system:cloud-controller-manager"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
RBAC_KINDS: Mapping[str, Resource] = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "ClusterRole": CLUSTER_ROLES,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
}
KILL_WAIT = 10.0
"""Seconds to wait for a SIGKILLed daemon to be reaped."""


class DaemonExited(AssertionError):
    """The daemon ended while a test still waited for it (the message ends with its log)."""


async def apply_rbac(kube: KubeClient, manifest: Path, field_manager: str) -> None:
    """Server-side apply (forced, as ``field_manager``) every RBAC object in ``manifest``; the
    other documents are skipped."""
    text = await asyncio.to_thread(manifest.read_text)
    for doc in yaml.safe_load_all(text):
        if not doc or doc.get("kind") not in RBAC_KINDS:
            continue
        meta = doc["metadata"]
        await kube.patch(
            RBAC_KINDS[doc["kind"]],
            meta["name"],
            doc,
            patch_type=PatchType.APPLY,
            namespace=meta.get("namespace"),
            field_manager=field_manager,
            force=True,
        )


def daemon_args(
    provider: str, cloud_config: Path, kubeconfig: Path, port: int, *flags: str
) -> list[str]:
    """``python -m kccm`` serving on ``127.0.0.1:port``, then ``flags`` as given."""
    return [
        sys.executable,
        "-m",
        "kccm",
        f"--cloud-provider={provider}",
        f"--cloud-config={cloud_config}",
        f"--kubeconfig={kubeconfig}",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        *flags,
    ]


def daemon_env(env: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> dict[str, str]:
    """This process's environment with unbuffered Python output, ``env`` on top, ``unset``
    removed."""
    merged = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in unset:
        merged.pop(name, None)
    return merged


async def logged_by(
    proc: subprocess.Popen[Any],
    log: Path,
    text: str,
    exited: str,
    error: type[AssertionError] = AssertionError,
    tail: int = 3000,
) -> bool:
    """Whether ``proc``'s ``log`` holds ``text`` (a probe for ``eventually``); ``error``
    (``exited``, the status and the log's last ``tail`` characters) once the process has
    ended without logging it. The exit is looked at before the log is read: a line logged
    just before the exit is found, never reported missing."""
    ended = proc.poll() is not None
    logs = await asyncio.to_thread(log.read_text, errors="replace")
    if text in logs:
        return True
    if ended:
        raise error(f"{exited} ({proc.returncode}):\n{logs[-tail:]}")
    return False


def stop_child(proc: subprocess.Popen[Any], grace: float) -> int:
    """SIGTERM, SIGKILL after ``grace`` seconds (at once when ``grace`` is 0); the exit
    status."""
    if proc.poll() is None and grace > 0:
        proc.terminate()
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
    return proc.wait(KILL_WAIT)


@dataclass
class Daemon:
    """One started daemon: its process, serving port and log file."""

    proc: subprocess.Popen[str]
    port: int
    log: Path

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def get(
        self,
        path: str,
        token: str | None = None,
        *,
        context: ssl.SSLContext | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """(status, body) of a GET to the serving port (blocking: call it in a thread)."""
        request = urllib.request.Request(self.url(path), headers=headers or {})
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        context = context or ssl._create_unverified_context()  # self-signed serving cert
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    async def logged(self, text: str) -> bool:
        """Whether the log holds ``text`` (a probe for ``eventually``); raises
        :class:`DaemonExited` once the process has ended without logging it, so a waiting
        test fails at once instead of at its time limit. The exit is looked at before the
        log is read: a line logged just before the exit is found, never reported missing."""
        return await logged_by(self.proc, self.log, text, "kccm exited early", DaemonExited)

    def stop(self, grace: float) -> int:
        """:func:`stop_child`: SIGTERM, SIGKILL after ``grace`` seconds; the exit status."""
        return stop_child(self.proc, grace)


@dataclass
class Daemons:
    """The daemons a test started, logging to ``tmp/kccm-<n>.log``; ``stop_all`` in teardown."""

    tmp: Path
    started: list[Daemon] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.started)

    def start(
        self,
        provider: str,
        cloud_config: Path,
        kubeconfig: Path,
        *flags: str,
        env: Mapping[str, str] | None = None,
        unset: Iterable[str] = (),
    ) -> Daemon:
        port = free_port()
        log = self.tmp / f"kccm-{len(self.started)}.log"
        args = daemon_args(provider, cloud_config, kubeconfig, port, *flags)
        with log.open("w") as sink:
            proc = subprocess.Popen(
                args,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                env=daemon_env(env, unset),
            )
        daemon = Daemon(proc, port, log)
        self.started.append(daemon)
        return daemon

    def stop_all(self, grace: float) -> None:
        """Stop every daemon, even when stopping one fails (the first failure is raised after
        all were stopped: a teardown must not leave processes running); then print each
        log's warnings, errors and last lines: pytest shows them under "Captured stdout
        teardown" when the test failed (and drops them when it passed), so a CI failure can
        be diagnosed from its output alone."""
        failures: list[BaseException] = []
        for daemon in self.started:
            try:
                daemon.stop(grace)
            except Exception as exc:  # re-raised below
                failures.append(exc)
        for daemon in self.started:
            print(f"\n--- {daemon.log.name} (exit {daemon.proc.returncode}) ---")
            print(log_digest(daemon.logs()))
        if failures:
            raise failures[0]


def log_digest(text: str, *, tail: int = 40, limit: int = 8000) -> str:
    """klog warnings and errors (``W``/``E`` lines), then the last ``tail`` lines, at most
    ``limit`` characters from the end."""
    lines = text.splitlines()
    notable = [line for line in lines[:-tail] if line.startswith(("W", "E"))]
    digest = "\n".join([*notable, "...", *lines[-tail:]] if notable else lines[-tail:])
    return digest[-limit:]
