"""vcsim (govmomi's vCenter simulator): start it, steer it, count its calls.

The binary is ``hack/vcsim/main.go`` built by ``make vcsim`` (``hack/vcsim/build.sh``) into
``$KCCM_CACHE_DIR/bin/vcsim-<govmomi>/vcsim`` beside the control-plane binaries
(``KCCM_VCSIM_BIN`` overrides the path). Every VM has a guest host name
(``<prefix>dc0-c0-rp0-vm0``), an IP from ``ip_base`` up and valid runtime enum values.

The pytest plugin's fixture ``vcsim`` (:mod:`kccm.testing.pytest_plugin`, module scope) runs
one simulator per test module on a loopback port: 1 datacenter, 1 cluster of 3 hosts, 2 VMs
per pool. Tests that need another shape call :func:`start_vcsim` themselves.

Controls (see main.go): :meth:`Vcsim.calls` (SOAP calls per method, REST calls per path),
:meth:`Vcsim.add_fault` (vcsim's fault injection: ``NotAuthenticated``, ``NoPermission``,
``Timeout``, ... per method, with counts and delays), :meth:`Vcsim.add_delay`,
:meth:`Vcsim.add_rest_fault`; and the tagging REST API (:meth:`Vcsim.tag`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kccm.emulators import CloudEmulator, leaked
from kccm.emulators.process import EmulatorProcess, spawn

__all__ = ["GOVMOMI_VERSION", "Vcsim", "VcsimError", "start_vcsim", "vcsim_binary"]

# Keep in step with hack/vcsim/versions.env (a unit test compares them).
GOVMOMI_VERSION = "v0.55.1"


class VcsimError(RuntimeError):
    """vcsim could not be found, started or steered."""


def vcsim_binary() -> Path:
    """The vcsim binary, or VcsimError saying how to build it."""
    override = os.environ.get("KCCM_VCSIM_BIN")
    if override:
        path = Path(override)
    else:
        root = os.environ.get("KCCM_CACHE_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kccm"
        )
        path = Path(root) / "bin" / f"vcsim-{GOVMOMI_VERSION}" / "vcsim"
    if not os.access(path, os.X_OK):
        raise VcsimError(
            f"vcsim not found at {path} (build it with `make vcsim`, or set KCCM_VCSIM_BIN)"
        )
    return path


@dataclass(eq=False)
class Vcsim(EmulatorProcess):
    """A running vcsim."""

    url: str
    ca_file: str
    thumbprint: str
    username: str
    password: str = field(repr=False)
    hostname_prefix: str = ""
    _context: ssl.SSLContext = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._context = ssl.create_default_context()
        self._context.check_hostname = False
        self._context.verify_mode = ssl.CERT_NONE

    @property
    def host(self) -> str:
        return urlparse(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(urlparse(self.url).port or 443)

    @property
    def base(self) -> str:
        return f"https://{self.host}:{self.port}"

    def hostname(self, vm_name: str) -> str:
        """The guest host name (the node name) of a model VM (``DC0_C0_RP0_VM0``)."""
        return self.hostname_prefix + vm_name.lower().replace("_", "-")

    # -- cloud configs ------------------------------------------------------------------------

    def ini_section(self, tenant: str | None = None, **extra: str) -> str:
        """A ``[VirtualCenter]`` section for this simulator (credentials included)."""
        lines = [f'[VirtualCenter "{tenant or self.host}"]']
        if tenant:
            lines.append(f"server = {self.host}")
        lines += [f"port = {self.port}", f"user = {self.username}"]
        lines += [f"password = {self.password}", "insecure-flag = true"]
        lines += [f"{key.replace('_', '-')} = {value}" for key, value in extra.items()]
        return "\n".join(lines) + "\n"

    def ini_config(self, *, labels: tuple[str, str] | None = None, extra: str = "") -> str:
        """A complete INI cloud config: this vCenter, optional ``(zone, region)`` categories."""
        text = self.ini_section()
        if labels:
            text += f"\n[Labels]\nzone = {labels[0]}\nregion = {labels[1]}\n"
        return text + extra

    # -- controls -----------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, headers: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        with urllib.request.urlopen(request, timeout=30, context=self._context) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def calls(self) -> dict[str, dict[str, int]]:
        """``{"soap": {method: n}, "rest": {"POST /rest/...": n}}`` since start or reset."""
        found = self._request("GET", "/kccm/calls")
        return {"soap": dict(found.get("soap") or {}), "rest": dict(found.get("rest") or {})}

    def reset_calls(self) -> None:
        self._request("DELETE", "/kccm/calls")

    def add_fault(
        self,
        method: str,
        fault: str,
        *,
        count: int = 0,
        skip: int = 0,
        delay_ms: int = 0,
        object_type: str = "*",
        message: str = "",
    ) -> None:
        """Answer ``method`` with ``fault`` (``count`` times; 0 = always)."""
        self._request(
            "POST",
            "/kccm/faults",
            {
                "method": method,
                "fault": fault,
                "count": count,
                "skip": skip,
                "delayMs": delay_ms,
                "objectType": object_type,
                "message": message,
            },
        )

    def fault_stats(self) -> dict[str, Any]:
        return dict(self._request("GET", "/kccm/faults") or {})

    def clear_faults(self) -> None:
        self._request("DELETE", "/kccm/faults")
        self._request("DELETE", "/kccm/delays")
        self._request("DELETE", "/kccm/rest-faults")

    def add_delay(self, method: str, delay_ms: int, *, count: int = 0) -> None:
        """Hold ``method`` for ``delay_ms`` before answering (``count`` times; 0 = always)."""
        self._request(
            "POST", "/kccm/delays", {"method": method, "delayMs": delay_ms, "count": count}
        )

    def add_rest_fault(
        self, path_prefix: str, status: int, *, count: int = 0, delay_ms: int = 0
    ) -> None:
        self._request(
            "POST",
            "/kccm/rest-faults",
            {"pathPrefix": path_prefix, "status": status, "count": count, "delayMs": delay_ms},
        )

    # -- tags (vAPI REST) -----------------------------------------------------------------------

    def _rest(self, method: str, path: str, body: Any = None) -> Any:
        basic = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        token = self._request(
            "POST", "/rest/com/vmware/cis/session", headers={"Authorization": f"Basic {basic}"}
        )["value"]
        found = self._request(
            method, "/rest" + path, body, headers={"vmware-api-session-id": token}
        )
        return None if found is None else found.get("value")

    def tag(self, category: str, tag: str, objects: Sequence[tuple[str, str]]) -> str:
        """Attach tag ``tag`` of ``category`` (both made when missing) to ``objects`` given
        as ``(type, moref)``, e.g. ``("ClusterComputeResource", "domain-c29")``."""
        base = "/com/vmware/cis/tagging"
        categories = {
            self._rest("GET", f"{base}/category/id:{cid}")["name"]: cid
            for cid in self._rest("GET", f"{base}/category") or ()
        }
        cid = categories.get(category) or self._rest(
            "POST",
            f"{base}/category",
            {"create_spec": {"name": category, "cardinality": "SINGLE", "associable_types": []}},
        )
        tags = {
            (t["name"], t["category_id"]): tid
            for tid in self._rest("GET", f"{base}/tag") or ()
            for t in [self._rest("GET", f"{base}/tag/id:{tid}")]
        }
        tid = tags.get((tag, cid)) or self._rest(
            "POST", f"{base}/tag", {"create_spec": {"name": tag, "category_id": cid}}
        )
        for kind, moref in objects:
            self._rest(
                "POST",
                f"{base}/tag-association/id:{tid}?~action=attach",
                {"object_id": {"id": moref, "type": kind}},
            )
        return str(tid)

    # -- the shape every emulator shares (kccm.emulators.CloudEmulator) ---------------------

    def call_counts(self) -> dict[str, int]:
        """SOAP calls per ``"soap <method>"``, REST calls per ``"rest <METHOD> <path>"``."""
        found = self.calls()
        return {f"{kind} {name}": n for kind, calls in found.items() for name, n in calls.items()}

    def state(self) -> dict[str, list[str]]:
        """The SOAP fault rules left in place (what a test must remove)."""
        stats = self.fault_stats()
        return {"fault_rules": sorted(json.dumps(v, sort_keys=True) for v in stats.values())}

    def assert_clean(self, baseline: Mapping[str, Iterable[str]]) -> None:
        left = leaked(self.state(), baseline)
        if left:
            raise AssertionError(f"vcsim left with: {left}")

    def cleanup(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.ca_file)


def _implements(sim: Vcsim) -> CloudEmulator:
    """Never called: mypy checks that :class:`Vcsim` has the shape every emulator has."""
    return sim


def start_vcsim(
    *,
    datacenters: int = 1,
    clusters: int = 1,
    hosts: int = 3,
    standalone_hosts: int = 0,
    vms: int = 2,
    ip_base: str = "10.0.0.0",
    ext_ip_base: str = "",
    hostname_prefix: str = "",
    username: str = "user",
    password: str = "pass",
    log_path: str | os.PathLike[str] | None = None,
) -> Vcsim:
    """Start vcsim on a free loopback port (``vms`` VMs per resource pool)."""
    args = [
        str(vcsim_binary()),
        "-listen=127.0.0.1:0",
        f"-dc={datacenters}",
        f"-cluster={clusters}",
        f"-host={hosts}",
        f"-standalone-host={standalone_hosts}",
        f"-vm={vms}",
        f"-ip-base={ip_base}",
        f"-hostname-prefix={hostname_prefix}",
        f"-username={username}",
        f"-password={password}",
    ]
    if ext_ip_base:
        args.append(f"-ext-ip-base={ext_ip_base}")
    process, ready = spawn(args, name="vcsim", error=VcsimError, log_path=log_path)
    return Vcsim(
        process=process,
        url=ready["url"],
        ca_file=ready.get("ca_file", ""),
        thumbprint=ready.get("thumbprint", ""),
        username=username,
        password=password,
        hostname_prefix=hostname_prefix,
    )
