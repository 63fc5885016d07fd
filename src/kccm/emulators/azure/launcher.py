"""Start the Azure emulator as a subprocess and steer it.

``with azure_emulator(tls=emulator_tls()) as emu:`` runs ``python -m kccm.emulators.azure`` on
loopback ports of its own choosing (see :mod:`kccm.emulators.process`) and yields an
:class:`AzureEmulator`: ``emu.url`` (ARM, and sign-in at ``{url}/adfs``), ``emu.imds_url``,
``emu.ca_file``, ``emu.cloud_files(dir)`` for upstream's ``azure.json`` and environment file,
and ``emu.admin`` (:class:`AzureAdmin`) for seeding, power states, faults, the request log and
leak checks.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kccm.emulators import CloudEmulator
from kccm.emulators.azure.cloudfiles import CloudFiles, write_cloud_files
from kccm.emulators.control import (
    ControlError,
    ControlledEmulator,
    EmulatorControl,
    running,
    start_python_emulator,
)
from kccm.emulators.process import ServingTls

__all__ = ["AzureAdmin", "AzureEmulator", "AzureEmulatorError", "azure_emulator", "start_azure"]


class AzureEmulatorError(ControlError):
    """The emulator could not be started or steered."""


@dataclass
class AzureAdmin(EmulatorControl):
    """The ``/_emu`` test API of a running emulator (blocking calls): the shared part
    (:class:`kccm.emulators.control.EmulatorControl`: ``config``, ``set_config`` of
    ``lro_delay``, ``page_size``, ``token_ttl``, ``zones`` or ``extra_api_versions``,
    ``requests``, ``last_seq``, ``state``, ``assert_clean``, ``faults``, ``clear_faults``,
    ``expire_tokens``) and Azure's own."""

    error = AzureEmulatorError
    title = "Azure emulator"

    # -- the world ------------------------------------------------------------------------

    def add_client(
        self,
        client_id: str,
        secret: str = "",
        federated_subjects: Iterable[str] = (),
        certificates: Iterable[str] = (),
    ) -> None:
        """A client that signs in with ``secret``, a federated token whose subject is one of
        ``federated_subjects`` (any when none), or an assertion signed by the key of one of
        ``certificates`` (PEM). Registering an existing client again adds to it."""
        body = {
            "client_id": client_id,
            "secret": secret,
            "federated_subjects": list(federated_subjects),
            "certificates": list(certificates),
        }
        self._call("POST", "/_emu/clients", body)

    def add_identity(self, name: str, resource_group: str = "") -> dict[str, Any]:
        """A user-assigned managed identity: ``{id, name, clientId, principalId, tenantId}``."""
        body = {"name": name, "resource_group": resource_group}
        return dict(self._call("POST", "/_emu/identities", body))

    def assign_identity(
        self, vm_id: str, system: bool = True, user: Iterable[str] = ()
    ) -> dict[str, Any]:
        """The VM's managed identities (``user``: identity resource ids); its ``identity``."""
        body = {"id": vm_id, "system": system, "user": list(user)}
        return dict(self._call("PUT", "/_emu/vm-identity", body))

    def add_resource_group(self, name: str) -> None:
        self._call("POST", "/_emu/resource-groups", {"name": name})

    def add_vm(self, name: str, **spec: Any) -> dict[str, Any]:
        """A VM with its NIC (see :func:`kccm.emulators.azure.seed.add_vm` for ``spec``)."""
        return dict(self._call("POST", "/_emu/vms", {"name": name, **spec}))

    def add_vms(self, specs: Iterable[Mapping[str, Any]]) -> list[str]:
        """Many VMs in one call (each spec as :meth:`add_vm` takes it, with its ``name``):
        their ids."""
        body = {"vms": [dict(spec) for spec in specs]}
        return [str(i) for i in self._call("POST", "/_emu/vms/bulk", body)["ids"]]

    def add_vmss(self, name: str, **spec: Any) -> dict[str, Any]:
        """A scale set with its instances (``instances`` in the answer)."""
        return dict(self._call("POST", "/_emu/vmss", {"name": name, **spec}))

    def set_power(self, vm_id: str, state: str) -> dict[str, Any]:
        """``running``, ``stopped``, ``deallocated`` (or a transition) for a VM or instance."""
        return dict(self._call("PUT", "/_emu/power", {"id": vm_id, "state": state}))

    def delete_vm(self, vm_id: str) -> None:
        """A seeded VM (with its NIC and public IP), scale-set instance or scale set gone."""
        self._call("POST", "/_emu/delete-vm", {"id": vm_id})

    def set_imds_vm(self, vm_id: str) -> None:
        """The VM the shared metadata service (``imds_url``) answers for."""
        self._call("PUT", "/_emu/imds", {"id": vm_id})

    def imds_for(self, vm_id: str) -> str:
        """The URL of a metadata service of the VM's own (a new port, one per node)."""
        return str(self._call("POST", "/_emu/imds-listeners", {"id": vm_id})["url"])

    def resource(self, resource_id: str) -> dict[str, Any]:
        """The resource as ARM renders it (instance view included), not logged."""
        query = urllib.parse.urlencode({"id": resource_id})
        return dict(self._call("GET", f"/_emu/resource?{query}"))

    # -- observation --------------------------------------------------------------------------

    def mutating(self, since: int = 0) -> list[dict[str, Any]]:
        """The ARM writes after ``since`` (every ARM call but GET)."""
        return [r for r in self.requests(since) if r["service"] == "arm" and r["method"] != "GET"]

    # -- faults -------------------------------------------------------------------------------

    def fault(
        self, path_regex: str, *, method: str = "*", kind: str = "error", **spec: Any
    ) -> dict[str, Any]:
        """Answer the next ``times`` (default 1; 0 = all) calls of ``method`` whose path
        ``path_regex`` is found in with a fault (see :mod:`kccm.emulators.azure.faults`:
        ``kind`` error/throttle/precondition/expire_token/latency; ``status``, ``code``,
        ``message``, ``retry_after``, ``latency``, ``headers``)."""
        body = {"path_regex": path_regex, "method": method, "kind": kind, **spec}
        return dict(self._call("POST", "/_emu/faults", body))

    def settle(self) -> int:
        """Every pending operation completes now; how many did."""
        return int(self._call("POST", "/_emu/settle")["settled"])

    def tokens(self) -> list[dict[str, Any]]:
        """The tokens issued, oldest first: ``{client_id, source, expires}``; ``source`` is
        ``secret``, ``certificate``, ``federated`` or ``managed-identity``."""
        return list(self._call("GET", "/_emu/tokens"))


@dataclass(eq=False)
class AzureEmulator(ControlledEmulator[AzureAdmin]):
    """A running emulator process (``ca_file``: the CA of the HTTPS ARM port, "" for HTTP)."""

    imds_url: str = field(kw_only=True)

    def control(self, base_url: str, ca_file: str) -> AzureAdmin:
        return AzureAdmin(base_url, ca_file)

    def cloud_files(self, directory: str | os.PathLike[str], **overrides: Any) -> CloudFiles:
        """Upstream's ``azure.json`` (``overrides`` win; None drops a key) and environment
        file written into ``directory``, and the environment to run a client with."""
        return write_cloud_files(Path(directory), self.config, self.ca_file, **overrides)


def _implements(emulator: AzureEmulator) -> CloudEmulator:
    """Never called: mypy checks that :class:`AzureEmulator` has the shape."""
    return emulator


def start_azure(
    *,
    lro_delay: float = 0.0,
    page_size: int = 100,
    token_ttl: float = 3600.0,
    host: str = "127.0.0.1",
    log_path: str | os.PathLike[str] | None = None,
    tls: ServingTls | None = None,
) -> AzureEmulator:
    """The emulator on ports of ``host`` it chooses; ARM over HTTPS with ``tls``'s
    certificate (e.g. :func:`kccm.testing.certs.emulator_tls`) when given."""
    started = start_python_emulator(
        "kccm.emulators.azure",
        [
            *("--port", "0", "--imds-port", "0", "--host", host),
            *("--lro-delay", str(lro_delay), "--page-size", str(page_size)),
            *("--token-ttl", str(token_ttl)),
        ],
        name="the Azure emulator",
        error=AzureEmulatorError,
        tls=tls,
        log_path=log_path,
    )
    return AzureEmulator(
        process=started.process,
        base_url=str(started.ready["url"]),
        imds_url=str(started.ready["imds_url"]),
        ca_file=started.ca_file,
    )


def azure_emulator(**opts: Any) -> contextlib.AbstractContextManager[AzureEmulator]:
    """A running emulator for the block (``opts``: ``lro_delay``, ``page_size``,
    ``token_ttl``, ``host``, ``log_path``, ``tls``)."""
    return running(start_azure, **opts)
