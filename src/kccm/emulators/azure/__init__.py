"""kccm's Azure emulator: ADFS sign-in, ARM (Microsoft.Compute and Microsoft.Network) with
ETags, long-running operations and paging, and the instance metadata service, with per-call
faults, a request log and leak checks.

Start it with :func:`azure_emulator` (a subprocess ``python -m kccm.emulators.azure``); steer
it with :class:`AzureAdmin`; write upstream's ``azure.json`` and environment file for it with
:meth:`AzureEmulator.cloud_files`. The server modules (``app``, ``adfs``, ``arm*``,
``compute``, ``network*``, ``imds``, ``admin``, ``faults``, ``store``) are imported only by the
server process.
"""

from kccm.emulators.azure.cloudfiles import CloudFiles, azure_json, environment_document
from kccm.emulators.azure.launcher import (
    AzureAdmin,
    AzureEmulator,
    AzureEmulatorError,
    azure_emulator,
    start_azure,
)

__all__ = [
    "AzureAdmin",
    "AzureEmulator",
    "AzureEmulatorError",
    "CloudFiles",
    "azure_emulator",
    "azure_json",
    "environment_document",
    "start_azure",
]
