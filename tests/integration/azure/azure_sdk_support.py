"""What the Azure SDK checks of the emulator share: an HTTPS emulator, signed in to through its
ADFS endpoint with ``ClientSecretCredential`` (as upstream is pointed at an Azure Stack), the
SDK's clients on it, and the check that a test left the emulator as it found it. Each test
module makes its fixtures from these."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

from kccm.emulators.azure import AzureEmulator

__all__ = ["client_options", "compute_client", "credential", "leaves_nothing", "network_client"]


def credential(emu: AzureEmulator, **kw: Any) -> ClientSecretCredential:
    conf = emu.config
    return ClientSecretCredential(
        tenant_id=conf["tenant"],
        client_id=conf["client_id"],
        client_secret=conf["client_secret"],
        authority=emu.url,
        disable_instance_discovery=True,
        connection_verify=emu.ca_file,
        **kw,
    )


def client_options(emu: AzureEmulator, **kw: Any) -> dict[str, Any]:
    """The SDK pointed at the emulator: its ARM URL, the token's scope, its CA; no pause
    between polls of a long-running operation but the ``Retry-After`` it answers."""
    return {
        "base_url": emu.url,
        "credential_scopes": [f"{emu.url}/.default"],
        "connection_verify": emu.ca_file,
        "polling_interval": 0,
        **kw,
    }


def compute_client(emu: AzureEmulator, **kw: Any) -> ComputeManagementClient:
    return ComputeManagementClient(
        credential(emu), emu.config["subscription"], **client_options(emu, **kw)
    )


def network_client(emu: AzureEmulator, **kw: Any) -> NetworkManagementClient:
    return NetworkManagementClient(
        credential(emu), emu.config["subscription"], **client_options(emu, **kw)
    )


def leaves_nothing(emu: AzureEmulator) -> Iterator[None]:
    """Around a test: the emulator's state, faults and settings as they were before it."""
    baseline = emu.state()
    yield
    emu.clear_faults()
    emu.admin.set_config(lro_delay=0, page_size=100)
    emu.assert_clean(baseline)
