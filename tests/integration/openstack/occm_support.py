"""Upstream's openstack-cloud-controller-manager (OCCM) as a subprocess of a test, and readers
of what it leaves in the emulator.

The binary is built from Go modules by ``hack/openstack/build-occm.sh`` (``make occm``) into
``$KCCM_CACHE_DIR/bin/occm-<version>/openstack-cloud-controller-manager`` (the version
``hack/openstack/occm/go.mod`` requires); ``KCCM_OCCM_BIN`` overrides the path. What running an
upstream binary takes whichever cloud it serves (finding it, the skip-or-fail rule, the
command line as the brief of issue 26 runs it, the processes and their logs) is
:mod:`kccm.testing.upstream`'s; this module keeps OCCM's own: its controllers, its pod CIDRs
allocated by its route controller, its ``cloud.conf`` written per start.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.request
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from kccm.testing import upstream
from kccm.testing.ports import free_port
from kccm.testing.pytest_plugin import unavailable as skip_or_fail
from kccm.testing.upstream import (
    CLUSTER_CIDR,
    CLUSTER_NAME,
    UpstreamProcess,
    running_processes,
)
from kccm.testing.upstream import UpstreamUnavailable as OccmUnavailable

__all__ = [
    "CLUSTER_CIDR",
    "CLUSTER_NAME",
    "CONTROLLERS",
    "CloudReader",
    "Occm",
    "OccmProcesses",
    "OccmUnavailable",
    "error_answers",
    "occm_argv",
    "occm_binary",
    "occm_processes",
    "require_occm",
    "routes_made",
    "routes_removed",
]

ROOT = Path(__file__).resolve().parents[3]
GO_MOD = ROOT / "hack" / "openstack" / "occm" / "go.mod"
BINARY = "openstack-cloud-controller-manager"
CONTROLLERS = ("cloud-node", "cloud-node-lifecycle", "service", "route")
Occm = UpstreamProcess


def occm_version() -> str:
    """The release ``hack/openstack/occm/go.mod`` requires (``v1.36.0``)."""
    return upstream.required_version(GO_MOD, "k8s.io/cloud-provider-openstack")


def occm_binary() -> Path:
    """The OCCM binary, or :class:`OccmUnavailable` saying how to build it."""
    override = os.environ.get("KCCM_OCCM_BIN")
    path = Path(override) if override else upstream.bin_cache() / f"occm-{occm_version()}" / BINARY
    return upstream.built(path, "build it with `make occm`, or set KCCM_OCCM_BIN")


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under ``KCCM_REQUIRE_CONTROL_PLANE=1`` (where ``make test`` built it)."""
    skip_or_fail("OCCM", reason)


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
    """OCCM's command line (:func:`kccm.testing.upstream.ccm_argv`; its route controller
    allocates the pod CIDRs)."""
    return upstream.ccm_argv(
        binary,
        "openstack",
        cloud_config=cloud_config,
        kubeconfig=kubeconfig,
        cert_dir=cert_dir,
        port=port,
        controllers=controllers,
        allocate_node_cidrs=True,
        extra=extra,
    )


@dataclass
class OccmProcesses(upstream.UpstreamProcesses):
    """The OCCMs a test started (:class:`kccm.testing.upstream.UpstreamProcesses`)."""

    def start(
        self,
        cloud_conf: str,
        kubeconfig: Path,
        *,
        controllers: Sequence[str] = CONTROLLERS,
        extra: Sequence[str] = (),
    ) -> Occm:
        """Write ``cloud_conf`` to ``tmp`` and start OCCM with it; its log is
        ``tmp/occm-<n>.log``."""
        binary = require_occm()
        name = f"occm-{len(self.started)}"
        config = self.tmp / f"{name}-cloud.conf"
        config.write_text(cloud_conf)
        cert_dir = self.tmp / f"{name}-certs"
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
        return self.spawn("occm", argv)


def occm_processes(tmp: Path) -> Iterator[OccmProcesses]:
    """A fixture body: the OCCMs of one test, stopped at its end."""
    return running_processes(OccmProcesses(tmp))


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
