"""A real etcd + kube-apiserver for tests, the demo and benchmarks, started as envtest does.

The binaries are built from Go modules by ``hack/controlplane/build.sh`` (etcd,
kube-apiserver) and ``hack/controlplane/build-kcm.sh`` (kube-controller-manager, kubectl) into
``~/.cache/kccm/bin/<kubernetes>-<etcd>/`` (or the directory in ``$KCCM_CONTROL_PLANE_BIN``).
:class:`ControlPlane` starts etcd and kube-apiserver on free loopback ports with a throw-away
PKI, client-cert authentication and RBAC, and, with ``controller_manager=True``,
kube-controller-manager (``--cloud-provider=external``; see
:mod:`kccm.testing.controllermanager`). It writes an admin kubeconfig, mints kubeconfigs for
any user, can restart the apiserver alone, and stops everything (SIGTERM, then SIGKILL).
Child processes get ``PR_SET_PDEATHSIG`` so they die with the process that started them, even
on SIGKILL.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kccm.testing.certs import CertificateAuthority, KeyPair, generate_key_pem
from kccm.testing.controllermanager import (
    ControllerManagerSettings,
    controller_manager_argv,
    controller_manager_healthy,
)
from kccm.testing.ports import free_port

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "die_with_parent",
    "find_binaries",
    "leftover_processes",
]

# Keep in step with hack/controlplane/versions.env (a unit test compares them).
KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
TMP_PREFIX = "kccm-cp-"
READY_TIMEOUT = 60.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be found, started or stopped."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path | None = None
    """``None`` when not built (only a control plane with ``controller_manager=True`` needs it)."""
    kubectl: Path | None = None


def cache_dir() -> Path:
    root = os.environ.get("KCCM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kccm"
    )
    return Path(root) / "bin" / f"{KUBERNETES_VERSION}-{ETCD_VERSION}"


BUILD_HINT = "build them with `make controlplane`, or set KCCM_CONTROL_PLANE_BIN"


def _executable(path: Path) -> Path | None:
    return path if os.access(path, os.X_OK) else None


def find_binaries(*, controller_manager: bool = False) -> Binaries:
    """Locate etcd and kube-apiserver (and kube-controller-manager when asked), or raise
    ControlPlaneError saying how to build them. kubectl is reported when present."""
    directory = Path(os.environ.get("KCCM_CONTROL_PLANE_BIN") or cache_dir())
    found = Binaries(
        directory / "etcd",
        directory / "kube-apiserver",
        _executable(directory / "kube-controller-manager"),
        _executable(directory / "kubectl"),
    )
    missing = [str(p) for p in (found.etcd, found.kube_apiserver) if not _executable(p)]
    if controller_manager and found.kube_controller_manager is None:
        missing.append(str(directory / "kube-controller-manager"))
    if missing:
        raise ControlPlaneError(
            f"control-plane binaries not found: {', '.join(missing)} ({BUILD_HINT})"
        )
    return found


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``PR_SET_PDEATHSIG`` SIGKILL: a ``preexec_fn``, run in the child between fork and exec."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _rss_bytes(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


_OURS = {"etcd", "kube-apiserver", "kube-controller-manager"}


def leftover_processes(marker: str = TMP_PREFIX) -> list[tuple[int, str]]:
    """Live etcd/kube-apiserver/kube-controller-manager processes whose command line
    mentions ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            name = Path(argv[0].decode(errors="replace")).name
            if name in _OURS and marker.encode() in b" ".join(argv):
                found.append((int(proc.name), " ".join(a.decode(errors="replace") for a in argv)))
    return found


@dataclass
class _Process:
    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self, spawner: ThreadPoolExecutor) -> None:
        """Start the process from ``spawner``'s thread: PR_SET_PDEATHSIG fires when the
        *thread* that forked the child exits, so children are forked from one long-lived
        thread owned by the control plane, never from a short-lived caller thread (such as
        one of asyncio.to_thread's workers)."""
        spawner.submit(self._spawn).result()

    def _spawn(self) -> None:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,  # PDEATHSIG needs it
            )

    @property
    def pid(self) -> int:
        return self.popen.pid if self.popen else 0

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self.popen = None

    def log_tail(self, lines: int = 25) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


_LIVE: weakref.WeakSet[ControlPlane] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for plane in list(_LIVE):
        plane.stop()


@dataclass(eq=False)
class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager with ``controller_manager=True``) on
    loopback. Use as a context manager or call start()/stop()."""

    binaries: Binaries | None = None
    extra_apiserver_args: Sequence[str] = ()
    controller_manager: bool = False
    controller_manager_settings: ControllerManagerSettings = field(
        default_factory=ControllerManagerSettings
    )
    keep_dir: bool = False
    root: Path = field(init=False)
    url: str = field(init=False, default="")
    etcd_url: str = field(init=False, default="")
    admin_kubeconfig: Path = field(init=False)
    started_in: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self._kcm: _Process | None = None
        self._ca = CertificateAuthority()
        self._admin: KeyPair | None = None
        self._spawner: ThreadPoolExecutor | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        """Start etcd then kube-apiserver and wait until /readyz answers ok (60 s budget);
        then kube-controller-manager, if asked for, until its /healthz answers ok."""
        binaries = self.binaries or find_binaries(controller_manager=self.controller_manager)
        if self.controller_manager and binaries.kube_controller_manager is None:
            raise ControlPlaneError(f"kube-controller-manager not found ({BUILD_HINT})")
        began = time.monotonic()
        self.root = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="kccm-control-plane")
        _LIVE.add(self)
        try:
            self._start_etcd(binaries.etcd)
            self._write_pki()
            self._apiserver = self._apiserver_process(binaries.kube_apiserver)
            self._apiserver.start(self._spawner_or_fail())
            self._wait_apiserver_ready()
            if binaries.kube_controller_manager is not None and self.controller_manager:
                self._start_controller_manager(binaries.kube_controller_manager)
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop kube-controller-manager, the apiserver, then etcd (SIGTERM, then SIGKILL), and
        remove the temp dir."""
        for proc in (self._kcm, self._apiserver, self._etcd):
            if proc is not None:
                proc.stop()
        self._kcm = self._apiserver = self._etcd = None
        if self._spawner is not None:
            self._spawner.shutdown(wait=True)
            self._spawner = None
        _LIVE.discard(self)
        if hasattr(self, "root") and not self.keep_dir:
            shutil.rmtree(self.root, ignore_errors=True)

    def restart_apiserver(self) -> None:
        """Stop the apiserver process alone and start it again on the same port."""
        if self._apiserver is None:
            raise ControlPlaneError("the control plane is not running")
        self._apiserver.stop()
        self._apiserver.start(self._spawner_or_fail())
        self._wait_apiserver_ready()

    def _spawner_or_fail(self) -> ThreadPoolExecutor:
        if self._spawner is None:
            raise ControlPlaneError("the control plane is not running")
        return self._spawner

    def kill_apiserver(self) -> None:
        """SIGKILL the apiserver without restarting it (start it with restart_apiserver)."""
        if self._apiserver is not None and self._apiserver.popen is not None:
            self._apiserver.popen.kill()
            self._apiserver.popen.wait(10)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- facts -------------------------------------------------------------------------------

    @property
    def pids(self) -> dict[str, int]:
        procs = (self._etcd, self._apiserver, self._kcm)
        return {p.name: p.pid for p in procs if p and p.alive()}

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each process right now."""
        return {name: _rss_bytes(pid) for name, pid in self.pids.items()}

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """Write a kubeconfig that authenticates as ``user`` in ``groups`` (client cert)."""
        pair = self._ca.client(user, tuple(groups))
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        path = self.root / f"kubeconfig-{safe}-{abs(hash(tuple(groups))) % 10**8}.yaml"
        return self._write_kubeconfig(path, user, pair)

    # -- etcd --------------------------------------------------------------------------------

    def _start_etcd(self, binary: Path) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        data = self.root / "etcd-data"
        self._etcd = _Process(
            "etcd",
            [
                str(binary),
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--name=default",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            self.root / "etcd.log",
        )
        self._etcd.start(self._spawner_or_fail())
        self._wait(self._etcd, self._etcd_healthy, "etcd")

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def etcd_revision(self) -> int:
        """etcd's current revision (Kubernetes resourceVersions are etcd revisions)."""
        body = self._etcd_post("/v3/kv/range", {"key": base64.b64encode(b"\0").decode()})
        header = body.get("header")
        if not isinstance(header, dict):
            raise ControlPlaneError(f"unexpected etcd range answer: {body}")
        return int(header["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd up to ``revision`` (default: now), so older watches get 410 Gone."""
        target = revision or self.etcd_revision()
        self._etcd_post("/v3/kv/compaction", {"revision": str(target), "physical": True})
        return target

    def _etcd_post(self, path: str, payload: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            result: dict[str, object] = json.loads(resp.read())
            return result

    # -- kube-apiserver ----------------------------------------------------------------------

    def _write_pki(self) -> None:
        pki = self.root / "pki"
        pki.mkdir()
        serving = self._ca.serving()
        (pki / "apiserver.crt").write_bytes(serving.cert_pem)
        (pki / "apiserver.key").write_bytes(serving.key_pem)
        (pki / "ca.crt").write_bytes(self._ca.cert_pem)
        sa_key, sa_pub = generate_key_pem()
        (pki / "sa.key").write_bytes(sa_key)
        (pki / "sa.pub").write_bytes(sa_pub)
        self._admin = self._ca.client("kccm-admin", ("system:masters",))

    def _apiserver_process(self, binary: Path) -> _Process:
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        pki = self.root / "pki"
        argv = [
            str(binary),
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={self.url}/",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/16",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            # ConfigMaps bypass the watch cache so etcd compaction can force 410 Gone in tests.
            "--watch-cache-sizes=configmaps#0",
            *self.extra_apiserver_args,
        ]
        self.admin_kubeconfig = self.root / "admin.kubeconfig"
        assert self._admin is not None
        self._write_kubeconfig(self.admin_kubeconfig, "kccm-admin", self._admin)
        return _Process("kube-apiserver", argv, self.root / "kube-apiserver.log")

    # -- kube-controller-manager -------------------------------------------------------------

    def _start_controller_manager(self, binary: Path) -> None:
        port = free_port()
        argv = controller_manager_argv(
            binary,
            kubeconfig=self.kubeconfig_for("system:kube-controller-manager"),
            pki=self.root / "pki",
            cert_dir=self.root / "kube-controller-manager",
            port=port,
            settings=self.controller_manager_settings,
        )
        self._kcm = _Process(
            "kube-controller-manager", argv, self.root / "kube-controller-manager.log"
        )
        self._kcm.start(self._spawner_or_fail())
        self._wait(self._kcm, lambda: controller_manager_healthy(port), "kube-controller-manager")

    @property
    def controller_manager_log(self) -> Path:
        return self.root / "kube-controller-manager.log"

    def _ssl_context(self) -> ssl.SSLContext:
        assert self._admin is not None
        context = ssl.create_default_context(cadata=self._ca.cert_pem.decode())
        certs = self.root / "pki" / "admin-client.pem"
        if not certs.exists():
            certs.write_bytes(self._admin.cert_pem + self._admin.key_pem)
        context.load_cert_chain(str(certs))
        return context

    def admin_request(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        """One synchronous request as admin (for pytest hooks, which run outside any event
        loop); the decoded JSON answer. HTTP errors raise ``urllib.error.HTTPError``."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=30, context=self._ssl_context()) as resp:
            answer: dict[str, Any] = json.loads(resp.read() or b"{}")
            return answer

    def _apiserver_ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.url}/readyz", timeout=2, context=self._ssl_context()
            ) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _wait_apiserver_ready(self) -> None:
        assert self._apiserver is not None
        self._wait(self._apiserver, self._apiserver_ready, "kube-apiserver")

    def _wait(self, proc: _Process, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if not proc.alive():
                raise ControlPlaneError(f"{what} exited during start-up:\n{proc.log_tail()}")
            if ready():
                return
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{what} was not ready within {READY_TIMEOUT:.0f} s:\n{proc.log_tail()}"
        )

    def _write_kubeconfig(self, path: Path, user: str, pair: KeyPair) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "kccm-dev",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": _b64(self._ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": _b64(pair.cert_pem),
                        "client-key-data": _b64(pair.key_pem),
                    },
                }
            ],
            "contexts": [{"name": "kccm-dev", "context": {"cluster": "kccm-dev", "user": user}}],
            "current-context": "kccm-dev",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path
