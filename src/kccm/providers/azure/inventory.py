"""The machines and network interfaces the provider reads from ARM, with short-lived caches.

Reads, each with the ``api-version`` upstream v1.36.5 sends (:mod:`.versions`):

- one VM: ``GET .../virtualMachines/<name>?$expand=instanceView``;
- the VMs of a resource group: ``GET .../virtualMachines?$expand=instanceView``
  (``ListVMInstanceView``);
- the scale sets of a resource group: ``GET .../virtualMachineScaleSets`` (Uniform ones kept,
  as upstream's VMSS cache);
- a scale set's VMs: ``GET .../virtualMachineScaleSets/<ss>/virtualMachines?$expand=
  instanceView`` (``ListVMInstanceView``; without the instance view when
  ``listVmssVirtualMachinesWithoutInstanceView``);
- a NIC: ``GET .../networkInterfaces/<nic>``; a scale set VM's NIC
  ``GET .../virtualMachineScaleSets/<ss>/virtualMachines/<id>/networkInterfaces/<nic>``
  (``2018-10-01``); all NICs of a resource group or of a scale set, for a refresh of many Nodes;
- a public IP: ``GET`` its ID (a scale set VM's: the scale set path, ``2018-10-01``); all
  public IPs of a resource group, and all public IPs of a scale set's VMs
  (``GET .../virtualMachineScaleSets/<ss>/publicIPAddresses``, ``2018-10-01``), for a refresh.

**Deliberate difference**: upstream reads a single VM *without* the instance view (its
track-2 migration, cloud-provider-azure #7833, dropped the ``$expand``), so it never sees an
availability-set VM's power state (never "shut down") nor its fault domain (always ``0``).
kccm asks for the instance view, as upstream did before, and as it does for scale set VMs.

Every answer is kept :attr:`Inventory.ttl` seconds (default 5: one refresh tick), so the
lifecycle and node controllers asking about one Node within a tick cost one read, and a refresh
of every Node costs one list per resource group and per scale set. Concurrent first asks for
one key wait for one read. A 404 is "absent" (``None``); any other error raises, so an ARM
failure is never taken for a deleted machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from kccm.providers.azure.arm import ARMClient
from kccm.providers.azure.arm_errors import ARMNotFound
from kccm.providers.azure.machines import (
    Machine,
    is_uniform,
    machine_from_vm,
    machine_from_vmss_vm,
)
from kccm.providers.azure.versions import ApiVersions

__all__ = ["DEFAULT_TTL", "Inventory", "TTLCache", "address_of"]

T = TypeVar("T")
DEFAULT_TTL = 5.0
SCALE_SET_TTL = 60.0
"""The scale sets of a resource group change rarely (upstream keeps them 10 minutes)."""
COMPUTE = "Microsoft.Compute"
NETWORK = "Microsoft.Network"


class TTLCache:
    """Values by key, each kept ``ttl`` seconds; one fetch at a time per key."""

    def __init__(self, ttl: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._monotonic = monotonic
        self._values: dict[Hashable, tuple[float, Any]] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: Hashable) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: Hashable, fetch: Callable[[], T], *, newer_than: float = 0.0) -> T:
        """The cached value when younger than ``ttl`` and fetched after ``newer_than``
        (a monotonic time), else a fresh one."""
        with self._lock(key):
            now = self._monotonic()
            found = self._values.get(key)
            if found is not None and now - found[0] < self.ttl and found[0] >= newer_than:
                value: T = found[1]
                return value
            value = fetch()
            self._values[key] = (self._monotonic(), value)
            return value

    def now(self) -> float:
        return self._monotonic()

    def forget(self, key: Hashable) -> None:
        with self._guard:
            self._values.pop(key, None)

    def clear(self) -> None:
        with self._guard:
            self._values.clear()


def _id_key(resource_id: str) -> str:
    return resource_id.lower()


class Inventory:
    """ARM reads for machines, NICs and public IPs (see the module doc). Thread-safe."""

    def __init__(
        self,
        arm: ARMClient,
        versions: ApiVersions,
        *,
        ttl: float = DEFAULT_TTL,
        vmss_instance_view: bool = True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.arm = arm
        self.versions = versions
        self.cache = TTLCache(ttl, monotonic)
        self.scale_set_cache = TTLCache(SCALE_SET_TTL, monotonic)
        self.vmss_instance_view = vmss_instance_view

    # -- machines ---------------------------------------------------------------------------

    def vm(self, resource_group: str, name: str) -> Machine | None:
        """One VM, ``None`` when it does not exist or is being deleted (upstream's VM cache)."""

        def fetch() -> Machine | None:
            found = self.arm.find(
                self.arm.resource_id(resource_group, f"{COMPUTE}/virtualMachines", name),
                self.versions.virtual_machines,
                operation="virtualMachines.get",
                params={"$expand": "instanceView"},
            )
            return None if found is None else machine_from_vm(found)

        machine = self.cache.get(("vm", resource_group.lower(), name.lower()), fetch)
        return None if machine is None or machine.deleting else machine

    def vms(self, resource_group: str, *, newer_than: float = 0.0) -> list[Machine]:
        """Every VM of a resource group (an absent group has none)."""

        def fetch() -> list[Machine]:
            try:
                found = self.arm.list(
                    self.arm.collection(resource_group, f"{COMPUTE}/virtualMachines"),
                    self.versions.virtual_machines,
                    operation="virtualMachines.list",
                    params={"$expand": "instanceView"},
                )
            except ARMNotFound:
                return []
            return [machine_from_vm(vm) for vm in found]

        key = ("vms", resource_group.lower())
        return self.cache.get(key, fetch, newer_than=newer_than)

    def scale_sets(self, resource_group: str) -> list[dict[str, Any]]:
        """The Uniform scale sets of a resource group."""

        def fetch() -> list[dict[str, Any]]:
            try:
                found = self.arm.list(
                    self.arm.collection(resource_group, f"{COMPUTE}/virtualMachineScaleSets"),
                    self.versions.virtual_machine_scale_sets,
                    operation="virtualMachineScaleSets.list",
                )
            except ARMNotFound:
                return []
            return [ss for ss in found if is_uniform(ss)]

        return self.scale_set_cache.get(("vmss", resource_group.lower()), fetch)

    def scale_set_vms(
        self, resource_group: str, scale_set: str, *, newer_than: float = 0.0
    ) -> list[Machine] | None:
        """The VMs of a scale set; ``None`` when the scale set does not exist."""

        def fetch() -> list[Machine] | None:
            params = {"$expand": "instanceView"} if self.vmss_instance_view else None
            try:
                found = self.arm.list(
                    self.arm.resource_id(
                        resource_group,
                        f"{COMPUTE}/virtualMachineScaleSets",
                        scale_set,
                        "virtualMachines",
                    ),
                    self.versions.virtual_machine_scale_set_vms,
                    operation="virtualMachineScaleSetVMs.list",
                    params=params,
                )
            except ARMNotFound:
                return None
            return [machine_from_vmss_vm(vm, scale_set) for vm in found]

        key = ("vmssvms", resource_group.lower(), scale_set.lower())
        return self.cache.get(key, fetch, newer_than=newer_than)

    # -- network interfaces -----------------------------------------------------------------

    def nic(self, machine: Machine) -> dict[str, Any]:
        """The machine's primary NIC (:class:`ARMNotFound` when it is gone)."""
        nic_id = machine.primary_nic()
        if machine.scale_set:
            path = nic_id
            version = self.versions.vmss_network_interfaces
            operation = "networkInterfaces.getVirtualMachineScaleSetNetworkInterface"
        else:
            path, version, operation = (
                nic_id,
                self.versions.network_interfaces,
                "networkInterfaces.get",
            )
        return self.cache.get(
            ("nic", _id_key(nic_id)),
            lambda: self.arm.get(path, version, operation=operation),
        )

    def nics(self, resource_group: str) -> dict[str, dict[str, Any]]:
        """Every NIC of a resource group, by lower-case ID."""
        return self._by_id(
            ("nics", resource_group.lower()),
            self.arm.collection(resource_group, f"{NETWORK}/networkInterfaces"),
            self.versions.network_interfaces,
            "networkInterfaces.list",
        )

    def scale_set_nics(self, resource_group: str, scale_set: str) -> dict[str, dict[str, Any]]:
        """Every NIC of a scale set's VMs, by lower-case ID."""
        return self._by_id(
            ("vmssnics", resource_group.lower(), scale_set.lower()),
            self.arm.resource_id(
                resource_group, f"{COMPUTE}/virtualMachineScaleSets", scale_set, "networkInterfaces"
            ),
            self.versions.vmss_network_interfaces,
            "networkInterfaces.listVirtualMachineScaleSetNetworkInterfaces",
        )

    # -- public IPs -------------------------------------------------------------------------

    def public_ip(self, pip_id: str) -> str | None:
        """The address of one public IP (``None``: gone, or no address yet)."""
        scale_set = "/virtualmachinescalesets/" in pip_id.lower()
        version = (
            self.versions.vmss_public_ip_addresses
            if scale_set
            else self.versions.public_ip_addresses
        )
        operation = (
            "publicIPAddresses.getVirtualMachineScaleSetPublicIPAddress"
            if scale_set
            else "publicIPAddresses.get"
        )
        found = self.cache.get(
            ("pip", _id_key(pip_id)),
            lambda: self.arm.find(pip_id, version, operation=operation),
        )
        return address_of(found)

    def public_ips(self, resource_group: str) -> dict[str, dict[str, Any]]:
        """Every public IP of a resource group, by lower-case ID."""
        return self._by_id(
            ("pips", resource_group.lower()),
            self.arm.collection(resource_group, f"{NETWORK}/publicIPAddresses"),
            self.versions.public_ip_addresses,
            "publicIPAddresses.list",
        )

    def scale_set_public_ips(
        self, resource_group: str, scale_set: str
    ) -> dict[str, dict[str, Any]]:
        """Every public IP of a scale set's VMs, by lower-case ID (one list per scale set where
        upstream GETs each instance's, ``getVMSSPublicIPAddress`` in ``azure_vmss.go``)."""
        return self._by_id(
            ("vmsspips", resource_group.lower(), scale_set.lower()),
            self.arm.resource_id(
                resource_group, f"{COMPUTE}/virtualMachineScaleSets", scale_set, "publicIPAddresses"
            ),
            self.versions.vmss_public_ip_addresses,
            "publicIPAddresses.listVirtualMachineScaleSetPublicIPAddresses",
        )

    def _by_id(
        self, key: Hashable, path: str, version: str, operation: str
    ) -> dict[str, dict[str, Any]]:
        def fetch() -> dict[str, dict[str, Any]]:
            try:
                found = self.arm.list(path, version, operation=operation)
            except ARMNotFound:
                return {}
            return {_id_key(str(item.get("id") or "")): item for item in found}

        return self.cache.get(key, fetch)


def address_of(pip: Mapping[str, Any] | None) -> str | None:
    if not pip:
        return None
    address = (pip.get("properties") or {}).get("ipAddress")
    return str(address) if address else None
