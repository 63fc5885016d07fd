"""Upstream's openstack-cloud-controller-manager (OCCM) as a subprocess of a test.

The binary is built from Go modules by ``hack/openstack/build-occm.sh`` (``make occm``) into
``$KCCM_CACHE_DIR/bin/occm-<version>/openstack-cloud-controller-manager``; ``KCCM_OCCM_BIN``
overrides the path. The version is the one ``hack/openstack/occm/go.mod`` requires, read from
that file so the two cannot drift apart. Without the binary a test is skipped, or fails when
``KCCM_REQUIRE_CONTROL_PLANE=1`` (CI: ``make test`` builds it), as the vcsim tests do.

:func:`occm_argv` is OCCM's command line as the brief of issue 26 runs it: the cloud.conf, the
test's kubeconfig for the API and for delegated authentication/authorization, a free loopback
secure port, no leader election, the controllers asked for; the route controller's flags
(``--configure-cloud-routes``, ``--allocate-node-cidrs``, ``--cluster-cidr``) when ``route`` is
among them. :class:`Occm` is the running process: its log, a probe for a logged line, stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import re
import signal
import ssl
import subprocess
import urllib.request
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import REQUIRE_ENV, require_control_plane

ROOT = Path(__file__).resolve().parents[3]
GO_MOD = ROOT / "hack" / "openstack" / "occm" / "go.mod"
BINARY = "openstack-cloud-controller-manager"
CLUSTER_NAME = "kubernetes"
"""OCCM's default ``--cluster-name``: balancer names are ``kube_service_kubernetes_<ns>_<name>``."""
CLUSTER_CIDR = "10.244.0.0/16"
KILL_WAIT = 10.0
_PR_SET_PDEATHSIG = 1
CONTROLLERS = ("cloud-node", "cloud-node-lifecycle", "service", "route")


def occm_version() -> str:
    """The release ``hack/openstack/occm/go.mod`` requires (``v1.36.0``)."""
    text = GO_MOD.read_text()
    found = re.search(r"^require k8s\.io/cloud-provider-openstack (v\S+)$", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{GO_MOD}: no require of k8s.io/cloud-provider-openstack")
    return found.group(1)


class OccmUnavailable(RuntimeError):
    """The OCCM binary was not built."""


def occm_binary() -> Path:
    """The OCCM binary, or :class:`OccmUnavailable` saying how to build it."""
    override = os.environ.get("KCCM_OCCM_BIN")
    if override:
        path = Path(override)
    else:
        root = os.environ.get("KCCM_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kccm"
        )
        path = Path(root) / "bin" / f"occm-{occm_version()}" / BINARY
    if not os.access(path, os.X_OK):
        raise OccmUnavailable(
            f"{BINARY} not found at {path} (build it with `make occm`, or set KCCM_OCCM_BIN)"
        )
    return path


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``KCCM_REQUIRE_CONTROL_PLANE=1`` (where ``make test`` built it)."""
    if require_control_plane():
        pytest.fail(f"{REQUIRE_ENV}=1 but OCCM is unavailable: {reason}")
    pytest.skip(f"OCCM unavailable: {reason}")


def require_occm() -> Path:
    try:
        return occm_binary()
    except OccmUnavailable as exc:
        unavailable(str(exc))


def occm_argv(
    binary: Path,
    *,
    cloud_config: Path,
    kubeconfig: Path,
    cert_dir: Path,
    port: int,
    controllers: Sequence[str] = CONTROLLERS,
    extra: Sequence[str] = (),
) -> list[str]:
    """OCCM's command line (see the module docstring)."""
    argv = [
        str(binary),
        "--cloud-provider=openstack",
        f"--cloud-config={cloud_config}",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
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
            "--allocate-node-cidrs=true",
            f"--cluster-cidr={CLUSTER_CIDR}",
            "--route-reconciliation-period=2s",
        ]
    return [*argv, *extra]


def _die_with_parent() -> None:  # in the child between fork and exec, as the control plane's
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Occm:
    """A running OCCM: its process and log file."""

    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    async def logged(self, text: str) -> bool:
        """Whether the log holds ``text`` (a probe for ``eventually``); fails at once when
        the process ended without logging it."""
        ended = self.proc.poll() is not None
        logs = await asyncio.to_thread(self.logs)
        if text in logs:
            return True
        if ended:
            raise AssertionError(f"OCCM exited ({self.proc.returncode}):\n{logs[-4000:]}")
        return False

    def alive(self) -> None:
        """Raise with the log's tail if the process has ended."""
        if self.proc.poll() is not None:
            raise AssertionError(f"OCCM exited ({self.proc.returncode}):\n{self.logs()[-4000:]}")

    def stop(self, grace: float = 10.0) -> int:
        """SIGTERM, SIGKILL after ``grace`` seconds; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(KILL_WAIT)

    def digest(self, tail: int = 60) -> str:
        """klog errors and warnings, then the last ``tail`` lines (for a failing test's output)."""
        lines = self.logs().splitlines()
        notable = [line for line in lines[:-tail] if line.startswith(("E", "W"))]
        return "\n".join([*notable[-40:], "...", *lines[-tail:]])


def start_occm(
    tmp: Path,
    cloud_conf: str,
    kubeconfig: Path,
    *,
    controllers: Sequence[str] = CONTROLLERS,
    extra: Sequence[str] = (),
    name: str = "occm",
) -> Occm:
    """Write ``cloud_conf`` to ``tmp`` and start OCCM with it; its log is ``tmp/<name>.log``."""
    binary = require_occm()
    config = tmp / f"{name}-cloud.conf"
    config.write_text(cloud_conf)
    cert_dir = tmp / f"{name}-certs"
    cert_dir.mkdir(exist_ok=True)
    argv = occm_argv(
        binary,
        cloud_config=config,
        kubeconfig=kubeconfig,
        cert_dir=cert_dir,
        port=free_port(),
        controllers=controllers,
        extra=extra,
    )
    log = tmp / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    return Occm(proc, log)


@dataclass
class OccmProcesses:
    """The OCCMs a test started; :meth:`stop_all` stops them and prints each log's digest
    (pytest shows it when the test failed)."""

    tmp: Path
    started: list[Occm]

    def start(
        self,
        cloud_conf: str,
        kubeconfig: Path,
        *,
        controllers: Sequence[str] = CONTROLLERS,
        extra: Sequence[str] = (),
    ) -> Occm:
        name = f"occm-{len(self.started)}"
        occm = start_occm(
            self.tmp, cloud_conf, kubeconfig, controllers=controllers, extra=extra, name=name
        )
        self.started.append(occm)
        return occm

    def stop_all(self) -> None:
        for occm in self.started:
            occm.stop()
        for occm in self.started:
            print(f"\n--- {occm.log.name} (exit {occm.proc.returncode}) ---\n{occm.digest()}")


def occm_processes(tmp: Path) -> Iterator[OccmProcesses]:
    """A fixture body: the OCCMs of one test, stopped at its end."""
    processes = OccmProcesses(tmp, [])
    try:
        yield processes
    finally:
        processes.stop_all()


DELETED_LB_POLL = re.compile(r"^/load-balancer/v2(\.0)?/lbaas/loadbalancers/[0-9a-f-]+$")


def error_answers(requests: Sequence[dict[str, Any]]) -> list[str]:
    """The requests the emulator answered with an error, but for the GETs of a deleted balancer
    that end in the 404 a client waits for (``WaitLoadbalancerDeleted``,
    ``pkg/util/openstack/loadbalancer.go``): an OCCM that gets an answer OpenStack would not
    give shows here, as does a client that sends what OpenStack refuses."""
    return [
        f"{r['method']} {r['path']}?{r.get('query') or ''} -> {r['status']}"
        for r in requests
        if r["status"] >= 400
        and not (r["method"] == "GET" and r["status"] == 404 and DELETED_LB_POLL.match(r["path"]))
    ]


@dataclass
class CloudReader:
    """Reads the emulator as the ``demo`` user does (Keystone v3 password token, then plain
    GETs on the catalog's URLs): what a test compares OCCM's and kccm's work against."""

    base_url: str
    ca_file: str = ""
    """The CA of an HTTPS emulator (``Emulator.ca_file``)."""
    user: str = "demo"
    password: str = "secret"
    project: str = "demo"
    _token: str = ""

    @classmethod
    def of(cls, emulator: Any) -> CloudReader:
        """A reader of a running :class:`~kccm.emulators.openstack.launcher.Emulator`."""
        return cls(emulator.base_url, emulator.ca_file)

    def _open(self, request: urllib.request.Request) -> Any:
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        return urllib.request.urlopen(request, timeout=10, context=context)

    def _authenticate(self) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": self.user,
                            "domain": {"name": "Default"},
                            "password": self.password,
                        }
                    },
                },
                "scope": {"project": {"name": self.project, "domain": {"name": "Default"}}},
            }
        }
        request = urllib.request.Request(
            f"{self.base_url}/identity/v3/auth/tokens",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with self._open(request) as resp:
            return str(resp.headers["X-Subject-Token"])

    def request(self, method: str, path: str, body: object = None) -> Any:
        """``method`` on ``<base_url><path>`` (e.g. ``/network/v2.0/routers``); decoded JSON."""
        if not self._token:
            self._token = self._authenticate()
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"X-Auth-Token": self._token, "Content-Type": "application/json"},
            method=method,
        )
        with self._open(request) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def load_balancers(self, name: str) -> list[dict[str, Any]]:
        found = self.get(f"/load-balancer/v2/lbaas/loadbalancers?name={name}")
        return list(found["loadbalancers"])

    def pools(self, lb_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/load-balancer/v2/lbaas/pools?loadbalancer_id={lb_id}")["pools"])

    def members(self, pool_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/load-balancer/v2/lbaas/pools/{pool_id}/members")["members"])

    def floating_ips(self, **filters: str) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        return list(self.get(f"/network/v2.0/floatingips?{query}")["floatingips"])

    def router(self, router_id: str) -> dict[str, Any]:
        return dict(self.get(f"/network/v2.0/routers/{router_id}")["router"])

    def routers(self, name: str) -> list[dict[str, Any]]:
        return list(self.get(f"/network/v2.0/routers?name={name}")["routers"])

    def network_id(self, name: str) -> str:
        return str(self.get(f"/network/v2.0/networks?name={name}")["networks"][0]["id"])

    def ports(self, **filters: str) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        return list(self.get(f"/network/v2.0/ports?{query}")["ports"])


def routes_made(reader: CloudReader, router_id: str, cidrs: Collection[str]) -> bool:
    """Whether ``CreateRoute`` finished for each of ``cidrs``: the router routes it AND a port
    allows it in its ``allowed_address_pairs`` (blocking). Upstream writes the router first
    and the port after (v1.36.0 ``pkg/openstack/routes.go``: ``addRoute``, then
    ``updateAllowedAddressPairs``): the route alone is no steady state, a snapshot taken
    between the two writes lacks the pair, and an OCCM stopped there leaves it to be written
    by whoever comes next."""
    routed = {r["destination"] for r in reader.router(router_id)["routes"]}
    allowed = {p["ip_address"] for port in reader.ports() for p in port["allowed_address_pairs"]}
    return set(cidrs) <= routed & allowed


def routes_removed(reader: CloudReader, router_id: str) -> bool:
    """Whether ``DeleteRoute`` finished for every route: the router routes nothing AND no
    port allows an address pair (blocking). The route goes first and the port's pair after
    (v1.36.0 ``pkg/openstack/routes.go``: ``DeleteRoute``, kccm's ``delete_route`` likewise),
    and a failed port write puts the route back: a router without routes alone is no steady
    state (a test that deleted the servers then lost the port under that write, and the route
    came back after its check)."""
    allowed = [p for port in reader.ports() for p in port["allowed_address_pairs"]]
    return not reader.router(router_id)["routes"] and not allowed
