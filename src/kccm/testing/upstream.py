"""Upstream's Go cloud controller managers as subprocesses of a test (OpenStack's OCCM, Azure's
cloud-controller-manager and cloud-node-manager): what running one takes whichever cloud it
serves.

The binaries are built from Go modules by ``hack/`` scripts into ``$KCCM_CACHE_DIR/bin/``
(:func:`bin_cache`), each at the version its ``go.mod`` requires (:func:`required_version`, so
the two cannot drift apart); :func:`built` finds one or raises :class:`UpstreamUnavailable`
saying how to build it, and :func:`kccm.testing.pytest_plugin.unavailable` turns that into a
skip, or a failure under ``KCCM_REQUIRE_CONTROL_PLANE=1`` (CI builds them).

:func:`ccm_argv` is a controller manager's command line as the tests run it: the cloud config,
the test's kubeconfig for the API and for delegated authentication/authorization, a free
loopback secure port, no leader election, the controllers asked for, and the route
controller's flags when ``route`` is among them. :class:`UpstreamProcesses` starts binaries
(each dies with the test process: ``PR_SET_PDEATHSIG``), logs each to a file and stops them
all at the test's end, printing each log's digest; :class:`UpstreamProcess` is one of them.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kccm.testing.controllermanager import serving_flags
from kccm.testing.controlplane import die_with_parent
from kccm.testing.daemon import KILL_WAIT, logged_by, stop_child

__all__ = [
    "CLUSTER_CIDR",
    "CLUSTER_NAME",
    "KILL_WAIT",
    "PROXY_VARS",
    "UpstreamProcess",
    "UpstreamProcesses",
    "UpstreamUnavailable",
    "bin_cache",
    "built",
    "ccm_argv",
    "required_version",
    "running_processes",
    "without_proxies",
]

CLUSTER_NAME = "kubernetes"
"""Upstream's default ``--cluster-name``, which names its balancers."""
CLUSTER_CIDR = "10.244.0.0/16"
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
"""Proxy settings (in either case) a client must not inherit from the test's environment."""


class UpstreamUnavailable(RuntimeError):
    """An upstream binary was not built."""


def bin_cache() -> Path:
    """``$KCCM_CACHE_DIR/bin`` (``$XDG_CACHE_HOME/kccm/bin``, ``~/.cache/kccm/bin``)."""
    root = os.environ.get("KCCM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kccm"
    )
    return Path(root) / "bin"


def required_version(go_mod: Path, module: str) -> str:
    """The version of ``module`` that ``go_mod`` requires (e.g. ``v1.36.0``)."""
    pattern = rf"^require {re.escape(module)} (v\S+)$"
    found = re.search(pattern, go_mod.read_text(), re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{go_mod}: no require of {module}")
    return found.group(1)


def built(path: Path, how: str) -> Path:
    """``path`` when it is an executable, else :class:`UpstreamUnavailable` saying ``how`` to
    build it."""
    if not os.access(path, os.X_OK):
        raise UpstreamUnavailable(f"{path.name} not found at {path} ({how})")
    return path


def ccm_argv(
    binary: Path,
    provider: str,
    *,
    cloud_config: Path,
    kubeconfig: Path,
    cert_dir: Path,
    port: int,
    controllers: Sequence[str],
    allocate_node_cidrs: bool,
    extra: Sequence[str] = (),
) -> list[str]:
    """A cloud controller manager's command line (see the module's docstring); with the
    route controller, pod CIDRs are allocated by it or not (``allocate_node_cidrs``)."""
    argv = [
        str(binary),
        f"--cloud-provider={provider}",
        f"--cloud-config={cloud_config}",
        *serving_flags(kubeconfig=kubeconfig, cert_dir=cert_dir, port=port),
        "--authentication-skip-lookup=true",  # no requestheader CA here: spares the log
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        f"--cluster-name={CLUSTER_NAME}",
        f"--controllers={','.join(controllers)}",
        "--v=4",
    ]
    if "route" in controllers:
        argv += [
            "--configure-cloud-routes=true",
            f"--allocate-node-cidrs={str(allocate_node_cidrs).lower()}",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--route-reconciliation-period=2s",
        ]
    return [*argv, *extra]


def without_proxies(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    """This process's environment without :data:`PROXY_VARS`, plus ``base`` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS}
    return env | dict(base) | extra


@dataclass
class UpstreamProcess:
    """A running upstream binary: its name, process and log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> None:
        """Raise with the log's tail if the process has ended."""
        if self.proc.poll() is not None:
            raise AssertionError(
                f"{self.name} exited ({self.proc.returncode}):\n{self.logs()[-4000:]}"
            )

    async def logged(self, text: str) -> bool:
        """:func:`kccm.testing.daemon.logged_by`: whether the log holds ``text``, failing at
        once when the process ended without logging it."""
        return await logged_by(self.proc, self.log, text, f"{self.name} exited", tail=4000)

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM, SIGKILL after ``grace`` seconds; the exit status."""
        return stop_child(self.proc, grace)

    def digest(self, tail: int = 60) -> str:
        """klog errors and warnings, then the last ``tail`` lines (for a failing test's
        output)."""
        lines = self.logs().splitlines()
        notable = [line for line in lines[:-tail] if line.startswith(("E", "W"))]
        return "\n".join([*notable[-40:], "...", *lines[-tail:]])


@dataclass
class UpstreamProcesses:
    """The upstream processes of one test, logging to ``tmp/<name>-<n>.log``;
    :meth:`stop_all` stops them and prints each log's digest (pytest shows it when the test
    failed). Each cloud's subclass adds how its binaries start."""

    tmp: Path
    started: list[UpstreamProcess] = field(default_factory=list)

    def spawn(
        self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> UpstreamProcess:
        """``argv`` started (in ``env``, else this process's environment) as ``name``."""
        log = self.tmp / f"{name}-{len(self.started)}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                list(argv),
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                preexec_fn=die_with_parent,
            )
        running = UpstreamProcess(name, proc, log)
        self.started.append(running)
        return running

    def stop_all(self) -> None:
        for running in self.started:
            running.stop()
        for running in self.started:
            code = running.proc.returncode
            print(f"\n--- {running.log.name} (exit {code}) ---\n{running.digest()}")


ProcessesT = TypeVar("ProcessesT", bound=UpstreamProcesses)


def running_processes(processes: ProcessesT) -> Iterator[ProcessesT]:
    """A fixture body: ``processes`` for one test, stopped at its end."""
    try:
        yield processes
    finally:
        processes.stop_all()
