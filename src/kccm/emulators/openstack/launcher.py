"""Start the OpenStack emulator as a subprocess and steer it.

``with openstack_emulator(lb_active_delay=0.05) as emu:`` runs ``python -m
kccm.emulators.openstack`` on a loopback port of its own choosing (see
:mod:`kccm.emulators.process`) and yields an :class:`Emulator`: ``emu.auth_url`` for
clients, ``emu.cloud_conf()`` for an OCCM-style ``cloud.conf``, ``emu.admin``
(:class:`EmulatorAdmin`) for servers, faults, the request log and leak checks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.emulators import CloudEmulator, leaked
from kccm.emulators.process import (
    EmulatorProcess,
    ServingTls,
    child_env,
    python_module,
    spawn,
)

__all__ = ["Emulator", "EmulatorAdmin", "EmulatorError", "openstack_emulator", "start_emulator"]


class EmulatorError(RuntimeError):
    """The emulator could not be started or steered."""


@dataclass
class EmulatorAdmin:
    """The ``/_emu`` test API of a running emulator (blocking calls)."""

    base_url: str
    ca_file: str = ""

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise EmulatorError(f"{method} {path}: {exc.code} {exc.read().decode()}") from exc
        return json.loads(payload) if payload else None

    # -- the world ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """Ids and credentials of the default world (see ``admin.config``)."""
        return dict(self._call("GET", "/_emu/config"))

    def set_config(self, **values: Any) -> dict[str, Any]:
        """Change ``lb_active_delay``, ``token_ttl``, ``max_routes``, ``octavia_version``
        (``"2.11"``) or ``disabled_extensions`` (Neutron aliases) of the running server."""
        return dict(self._call("PATCH", "/_emu/config", values))

    def add_server(
        self,
        name: str,
        *,
        flavor: str = "m1.small",
        networks: tuple[str, ...] = ("private",),
        az: str = "nova",
        status: str = "ACTIVE",
        floating: bool = False,
        metadata: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A new server (Nova's detail view without microversion), with a port per network."""
        body = {
            "name": name,
            "flavor": flavor,
            "networks": list(networks),
            "az": az,
            "status": status,
            "floating": floating,
            "metadata": dict(metadata or {}),
        }
        return dict(self._call("POST", "/_emu/servers", body))

    def set_server_status(self, server_id: str, status: str) -> dict[str, Any]:
        return dict(self._call("PUT", f"/_emu/servers/{server_id}/status", {"status": status}))

    def delete_server(self, server_id: str) -> None:
        self._call("DELETE", f"/_emu/servers/{server_id}")

    # -- observation --------------------------------------------------------------------------

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """Calls after sequence number ``since``: ``{seq, method, path, query, service,
        status}``."""
        return list(self._call("GET", f"/_emu/requests?since={since}"))

    def last_seq(self) -> int:
        """The sequence number of the last logged call: ``requests(since=last_seq())``
        later lists what came after."""
        return int(self._call("GET", "/_emu/seq")["seq"])

    def mutating(self, since: int = 0) -> list[dict[str, Any]]:
        """The writes after ``since``: every call but GET/HEAD, less Keystone token POSTs."""
        return [
            r
            for r in self.requests(since)
            if r["method"] not in ("GET", "HEAD")
            and not (r["service"] == "identity" and r["path"].endswith("/auth/tokens"))
        ]

    def state(self) -> dict[str, list[Any]]:
        """What tests make and must remove (``admin.state``)."""
        return {k: list(v) for k, v in self._call("GET", "/_emu/state").items()}

    def assert_clean(self, baseline: Mapping[str, Iterable[Any]]) -> None:
        """AssertionError naming everything :meth:`state` has that ``baseline`` had not."""
        left = leaked(self.state(), baseline)
        if left:
            raise AssertionError(f"OpenStack emulator left with: {left}")

    # -- faults -------------------------------------------------------------------------------

    def fault(
        self,
        service: str,
        method: str,
        path_regex: str,
        status: int = 500,
        body: Any = None,
        times: int = 1,
        latency: float = 0.0,
        kind: str = "error",
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Answer the next ``times`` matching calls (0 = all) of ``service`` (or "*") and
        ``method`` (or "*") whose path ``path_regex`` is found in (``re.search`` on e.g.
        ``/network/v2.0/ports``) with a fault: ``kind`` "error" (``status``, ``body`` or the
        service's error body, ``headers``), "conflict" (409, Octavia's immutable text) or
        "latency" (``latency`` s, then served)."""
        spec = {
            "service": service,
            "method": method,
            "path_regex": path_regex,
            "status": status,
            "body": body,
            "times": times,
            "latency": latency,
            "kind": kind,
            "headers": dict(headers or {}),
        }
        if kind == "conflict" and status == 500:
            spec["status"] = 409
        return dict(self._call("POST", "/_emu/faults", spec))

    def faults(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/_emu/faults"))

    def clear_faults(self) -> None:
        self._call("DELETE", "/_emu/faults")

    def settle(self) -> list[str]:
        """Finish every pending Octavia change now; the balancers' ids."""
        return list(self._call("POST", "/_emu/settle")["settled"])

    def expire_tokens(self) -> int:
        """Every token issued so far expires now (the next call with one gets a 401)."""
        return int(self._call("POST", "/_emu/expire-tokens")["expired"])


@dataclass(eq=False)
class Emulator(EmulatorProcess):
    """A running emulator process."""

    base_url: str
    ca_file: str = ""  # the CA of an HTTPS emulator's certificate ("" for HTTP)
    admin: EmulatorAdmin = field(init=False)
    _config: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.admin = EmulatorAdmin(self.base_url, self.ca_file)

    @property
    def url(self) -> str:
        return self.base_url

    @property
    def auth_url(self) -> str:
        return f"{self.base_url}/identity/v3"

    @property
    def config(self) -> dict[str, Any]:
        if not self._config:
            self._config = self.admin.config()
        return self._config

    def cloud_conf(
        self,
        overrides: Mapping[str, Mapping[str, str | None]] | None = None,
        **sections: Mapping[str, str | None],
    ) -> str:
        """OCCM's ``cloud.conf`` for the default user and project; ``{"Section": {"key":
        "value"}}`` (a value of None drops the key) merge over the defaults."""
        conf = self.config
        base: dict[str, dict[str, str | None]] = {
            "Global": {
                "auth-url": self.auth_url,
                "username": conf["user"],
                "password": conf["password"],
                "user-domain-name": conf["domain"],
                "tenant-name": conf["project"],
                "tenant-domain-name": conf["domain"],
                "region": conf["region"],
            },
            "LoadBalancer": {"floating-network-id": conf["public_network_id"]},
            "Route": {"router-id": conf["router_id"]},
        }
        if self.ca_file:
            base["Global"]["ca-file"] = self.ca_file
        for name, extra in {**(overrides or {}), **sections}.items():
            base.setdefault(name, {}).update(extra)
        lines: list[str] = []
        for name, values in base.items():
            lines.append(f"[{name}]")
            lines += [f"{k} = {v}" for k, v in values.items() if v is not None]
            lines.append("")
        return "\n".join(lines)

    # -- the shape every emulator shares (kccm.emulators.CloudEmulator) ---------------------

    def call_counts(self) -> dict[str, int]:
        """Logged calls per ``"<service> <METHOD> <path>"``."""
        found = Counter(f"{r['service']} {r['method']} {r['path']}" for r in self.admin.requests())
        return dict(found)

    def clear_faults(self) -> None:
        self.admin.clear_faults()

    def state(self) -> dict[str, list[str]]:
        return {kind: [str(item) for item in items] for kind, items in self.admin.state().items()}

    def assert_clean(self, baseline: Mapping[str, Iterable[str]]) -> None:
        self.admin.assert_clean(baseline)

    def cleanup(self) -> None:
        if self.ca_file:
            shutil.rmtree(Path(self.ca_file).parent, ignore_errors=True)


def _implements(emulator: Emulator) -> CloudEmulator:
    """Never called: mypy checks that :class:`Emulator` has the shape every emulator has."""
    return emulator


def start_emulator(
    *,
    lb_active_delay: float = 0.05,
    token_ttl: float = 3600.0,
    host: str = "127.0.0.1",
    log_path: str | os.PathLike[str] | None = None,
    tls: ServingTls | None = None,
) -> Emulator:
    """The emulator on a port of ``host`` it chooses; HTTPS with ``tls``'s certificate (e.g.
    :func:`kccm.testing.certs.emulator_tls`) when given."""
    args = python_module(
        "kccm.emulators.openstack",
        *("--port", "0", "--host", host),
        *("--lb-active-delay", str(lb_active_delay), "--token-ttl", str(token_ttl)),
    )
    ca_file = _certificates(tls, args) if tls is not None else ""
    process, ready = spawn(
        args, name="the OpenStack emulator", error=EmulatorError, log_path=log_path, env=child_env()
    )
    return Emulator(process=process, base_url=str(ready["url"]), ca_file=ca_file)


def _certificates(tls: ServingTls, args: list[str]) -> str:
    """Write ``tls`` into a fresh directory, add the server's options to ``args``; the CA
    file's path."""
    directory = Path(tempfile.mkdtemp(prefix="kccm-openstack-emulator-"))
    ca_file, cert_file, key_file = tls.write(directory)
    args += ["--cert-file", cert_file, "--key-file", key_file]
    return ca_file


@contextlib.contextmanager
def openstack_emulator(lb_active_delay: float = 0.05, **opts: Any) -> Iterator[Emulator]:
    """A running emulator for the block (``opts``: ``token_ttl``, ``host``, ``log_path``,
    ``tls``)."""
    emulator = start_emulator(lb_active_delay=lb_active_delay, **opts)
    try:
        yield emulator
    finally:
        emulator.stop()
