"""Start the OpenStack emulator as a subprocess and steer it.

``with openstack_emulator(lb_active_delay=0.05) as emu:`` runs ``python -m
kccm.emulators.openstack`` on a loopback port of its own choosing (see
:mod:`kccm.emulators.process`) and yields an :class:`Emulator`: ``emu.auth_url`` for
clients, ``emu.cloud_conf()`` for an OCCM-style ``cloud.conf``, ``emu.admin``
(:class:`EmulatorAdmin`) for servers, faults, the request log and leak checks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kccm.emulators import CloudEmulator
from kccm.emulators.control import (
    ControlError,
    ControlledEmulator,
    EmulatorControl,
    running,
    start_python_emulator,
)
from kccm.emulators.process import ServingTls

__all__ = ["Emulator", "EmulatorAdmin", "EmulatorError", "openstack_emulator", "start_emulator"]


class EmulatorError(ControlError):
    """The emulator could not be started or steered."""


@dataclass
class EmulatorAdmin(EmulatorControl):
    """The ``/_emu`` test API of a running emulator (blocking calls): the shared part
    (:class:`kccm.emulators.control.EmulatorControl`: ``config``, ``set_config`` of
    ``lb_active_delay``, ``token_ttl``, ``max_routes``, ``octavia_version`` (``"2.11"``) or
    ``disabled_extensions`` (Neutron aliases), ``requests``, ``last_seq``, ``state``,
    ``assert_clean``, ``faults``, ``clear_faults``, ``expire_tokens``) and OpenStack's own."""

    error = EmulatorError
    title = "OpenStack emulator"

    # -- the world ------------------------------------------------------------------------

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

    def mutating(self, since: int = 0) -> list[dict[str, Any]]:
        """The writes after ``since``: every call but GET/HEAD, less Keystone token POSTs."""
        return [
            r
            for r in self.requests(since)
            if r["method"] not in ("GET", "HEAD")
            and not (r["service"] == "identity" and r["path"].endswith("/auth/tokens"))
        ]

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

    def settle(self) -> list[str]:
        """Finish every pending Octavia change now; the balancers' ids."""
        return list(self._call("POST", "/_emu/settle")["settled"])


@dataclass(eq=False)
class Emulator(ControlledEmulator[EmulatorAdmin]):
    """A running emulator process (``ca_file``: the CA of its HTTPS certificate, "" for
    HTTP)."""

    def control(self, base_url: str, ca_file: str) -> EmulatorAdmin:
        return EmulatorAdmin(base_url, ca_file)

    @property
    def auth_url(self) -> str:
        return f"{self.base_url}/identity/v3"

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
    started = start_python_emulator(
        "kccm.emulators.openstack",
        [
            *("--port", "0", "--host", host),
            *("--lb-active-delay", str(lb_active_delay), "--token-ttl", str(token_ttl)),
        ],
        name="the OpenStack emulator",
        error=EmulatorError,
        tls=tls,
        log_path=log_path,
    )
    return Emulator(
        process=started.process, base_url=str(started.ready["url"]), ca_file=started.ca_file
    )


def openstack_emulator(
    lb_active_delay: float = 0.05, **opts: Any
) -> contextlib.AbstractContextManager[Emulator]:
    """A running emulator for the block (``opts``: ``token_ttl``, ``host``, ``log_path``,
    ``tls``)."""
    return running(start_emulator, lb_active_delay=lb_active_delay, **opts)
