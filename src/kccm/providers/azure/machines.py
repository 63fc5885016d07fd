"""Azure machines (availability-set VMs and scale set VMs) as upstream reads them.

Pure functions over ARM's JSON, each after upstream v1.36.5:

- providerIDs (``GetInstanceIDByNodeName`` in ``pkg/provider/azure_standard.go`` and
  ``azure_vmss.go``): ``azure://`` + the machine's resource ID with its resource group in lower
  case (``ConvertResourceGroupNameToLower``, ``azure_wrap.go``):
  ``azure:///subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>``
  and ``.../virtualMachineScaleSets/<ss>/virtualMachines/<instanceId>``;
- a providerID that is not ``azure:///subscriptions/.../resourceGroups/.../providers/
  Microsoft.Compute/...`` belongs to an unmanaged node (``IsNodeUnmanagedByProviderID``);
- the node name of a scale set VM is its ``osProfile.computerName`` in lower case, made of the
  scale set's ``computerNamePrefix`` (else its name) and six base-36 characters of the
  instance ID (``getScaleSetVMInstanceID``, ``getNodeIdentityByNodeName``);
- the power state is the ``PowerState/<state>`` status of the instance view
  (``vmutil.GetVMPowerState``), ``unknown`` without one; a machine is shut down when its
  provisioning state is ``Succeeded`` and it is ``stopped``, ``deallocated`` or
  ``deallocating`` (``InstanceShutdownByProviderID``, ``azure_instances_v1.go``);
- the zone (``GetZoneByNodeName``): ``<location>-<zone>`` when the machine is zonal
  (``makeZone``), else its platform fault domain (``0`` for a VM without an instance view);
  the region is the location, both in lower case;
- the instance type: ``hardwareProfile.vmSize`` for a VM, ``sku.name`` for a scale set VM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.cloudprovider import CloudProviderError

__all__ = [
    "PROVIDER_NAME",
    "Machine",
    "ProviderRef",
    "is_managed_provider_id",
    "lower_resource_group",
    "machine_from_vm",
    "machine_from_vmss_vm",
    "parse_provider_id",
    "power_state",
    "scale_set_instance_id",
]

PROVIDER_NAME = "azure"
SHUT_DOWN_STATES = ("stopped", "deallocated", "deallocating")
_MANAGED = re.compile(
    r"^azure:///subscriptions/(?:.*)/resourceGroups/(?:.*)/providers/Microsoft.Compute/(?:.*)"
)
_RESOURCE_GROUP = re.compile(r".*/subscriptions/(?:.*)/resourceGroups/(.+)/providers/(?:.*)")
_VMSS_VM = re.compile(
    r"^azure:///subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft.Compute/"
    r"virtualMachineScaleSets/([^/]+)/virtualMachines/([^/]+)$",
    re.IGNORECASE,
)
_VM = re.compile(
    r"^azure:///subscriptions/([^/]+)/resourceGroups/([^/]+)/providers/Microsoft.Compute/"
    r"virtualMachines/([^/]+)$",
    re.IGNORECASE,
)


def is_managed_provider_id(provider_id: str) -> bool:
    """``!IsNodeUnmanagedByProviderID``: the providerID names an Azure compute resource."""
    return _MANAGED.match(provider_id) is not None


def lower_resource_group(resource_id: str) -> str:
    """``ConvertResourceGroupNameToLower``: the resource group of an ID in lower case."""
    found = _RESOURCE_GROUP.match(resource_id)
    if found is None:
        raise CloudProviderError(f"{resource_id!r} isn't in Azure resource ID format")
    group = found.group(1)
    return resource_id.replace(group, group.lower(), 1)


@dataclass(frozen=True)
class ProviderRef:
    """What a managed providerID names: a VM, or a scale set VM."""

    subscription: str
    resource_group: str
    name: str
    """The VM's name, or the scale set's."""
    instance_id: str = ""
    """The scale set VM's instance ID (``""`` for a VM)."""

    @property
    def is_scale_set(self) -> bool:
        return bool(self.instance_id)


def parse_provider_id(provider_id: str) -> ProviderRef | None:
    """The machine a managed providerID names; ``None`` when it names neither form. A scale set
    VM's instance ID may be written ``<scaleset>_<id>`` (``GetNodeNameByProviderID``)."""
    found = _VMSS_VM.match(provider_id)
    if found is not None:
        sub, group, scale_set, instance = found.groups()
        if instance.lower().startswith(scale_set.lower()):
            instance = instance.rpartition("_")[2]
        return ProviderRef(sub, group.lower(), scale_set, instance)
    found = _VM.match(provider_id)
    if found is not None:
        sub, group, name = found.groups()
        return ProviderRef(sub, group.lower(), name)
    return None


def scale_set_instance_id(node_name: str) -> str | None:
    """``getScaleSetVMInstanceID``: the instance ID in a scale set VM's computer name (its last
    six characters, base 36), ``None`` when the name cannot be one."""
    if len(node_name) < 6:
        return None
    try:
        return str(int(node_name[-6:], 36))
    except ValueError:
        return None


def power_state(instance_view: Mapping[str, Any] | None) -> str:
    """``GetVMPowerState``: ``running``, ``deallocated``... (``unknown`` when not reported)."""
    for status in (instance_view or {}).get("statuses") or ():
        code = str((status or {}).get("code") or "")
        if code.lower().startswith("powerstate/"):
            return code[len("PowerState/") :]
    return "unknown"


@dataclass(frozen=True)
class Machine:
    """One VM or scale set VM, reduced to what the provider reads."""

    id: str
    name: str
    node_name: str
    resource_group: str
    location: str
    size: str
    zones: tuple[str, ...] = ()
    power: str = "unknown"
    provisioning_state: str = ""
    fault_domain: int | None = None
    nics: tuple[tuple[str, bool], ...] = ()
    """``(NIC resource ID, primary)`` in the machine's order."""
    scale_set: str = ""
    instance_id: str = ""
    in_flex_scale_set: bool = False
    computer_name: str = ""
    """``osProfile.computerName`` in lower case (a Flex VM's node name)."""
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def provider_id(self) -> str:
        return f"{PROVIDER_NAME}://{lower_resource_group(self.id)}"

    @property
    def is_shut_down(self) -> bool:
        return self.provisioning_state.lower() == "succeeded" and (
            self.power.lower() in SHUT_DOWN_STATES
        )

    @property
    def deleting(self) -> bool:
        return self.provisioning_state.lower() == "deleting"

    def zone(self) -> str:
        """``GetZoneByNodeName``'s failure domain (see the module doc)."""
        if self.zones:
            try:
                number = int(self.zones[0])
            except ValueError as err:
                raise CloudProviderError(
                    f"failed to parse zone {list(self.zones)!r} of {self.name}"
                ) from err
            return f"{self.location.lower()}-{number}"
        if self.fault_domain is not None:
            return str(self.fault_domain)
        if self.scale_set:
            raise CloudProviderError(f"failed to get zone info of {self.name}")
        return "0"

    def primary_nic(self) -> str:
        """``getPrimaryInterfaceID``: the only NIC, else the one marked primary."""
        if len(self.nics) == 1:
            return self.nics[0][0]
        for nic_id, primary in self.nics:
            if primary:
                return nic_id
        raise CloudProviderError(f"failed to find a primary nic for the vm. vmname={self.name!r}")


def _nics(props: Mapping[str, Any]) -> tuple[tuple[str, bool], ...]:
    refs = ((props.get("networkProfile") or {}).get("networkInterfaces")) or ()
    return tuple(
        (str(ref.get("id") or ""), bool((ref.get("properties") or {}).get("primary")))
        for ref in refs
        if isinstance(ref, Mapping)
    )


def _fault_domain(props: Mapping[str, Any]) -> int | None:
    view = props.get("instanceView")
    if not isinstance(view, Mapping) or view.get("platformFaultDomain") is None:
        return None
    return int(view["platformFaultDomain"])


def _group_of(resource_id: str) -> str:
    found = _RESOURCE_GROUP.match(resource_id)
    return found.group(1).lower() if found else ""


def machine_from_vm(vm: Mapping[str, Any]) -> Machine:
    """A VM (``Microsoft.Compute/virtualMachines``); its node name is its name. A VM without an
    instance view has fault domain 0 (``GetZoneByNodeName``)."""
    props = vm.get("properties") or {}
    view = props.get("instanceView")
    return Machine(
        id=str(vm.get("id") or ""),
        name=str(vm.get("name") or ""),
        node_name=str(vm.get("name") or ""),
        resource_group=_group_of(str(vm.get("id") or "")),
        location=str(vm.get("location") or ""),
        size=str((props.get("hardwareProfile") or {}).get("vmSize") or ""),
        zones=tuple(str(z) for z in vm.get("zones") or ()),
        power=power_state(view if isinstance(view, Mapping) else None),
        provisioning_state=str(props.get("provisioningState") or ""),
        fault_domain=_fault_domain(props) if isinstance(view, Mapping) else 0,
        nics=_nics(props),
        in_flex_scale_set=bool(props.get("virtualMachineScaleSet")),
        computer_name=computer_name(vm),
        tags=dict(vm.get("tags") or {}),
    )


def computer_name(vm: Mapping[str, Any]) -> str:
    """``osProfile.computerName`` in lower case (``""`` when ARM gave none)."""
    return str(
        ((vm.get("properties") or {}).get("osProfile") or {}).get("computerName") or ""
    ).lower()


def machine_from_vmss_vm(vm: Mapping[str, Any], scale_set: str) -> Machine:
    """A scale set VM (Uniform); its node name is its computer name in lower case."""
    props = vm.get("properties") or {}
    view = props.get("instanceView")
    return Machine(
        id=str(vm.get("id") or ""),
        name=str(vm.get("name") or ""),
        node_name=computer_name(vm),
        resource_group=_group_of(str(vm.get("id") or "")),
        location=str(vm.get("location") or ""),
        size=str((vm.get("sku") or {}).get("name") or ""),
        zones=tuple(str(z) for z in vm.get("zones") or ()),
        power=power_state(view if isinstance(view, Mapping) else None),
        provisioning_state=str(props.get("provisioningState") or ""),
        fault_domain=_fault_domain(props),
        nics=_nics(props),
        scale_set=scale_set,
        instance_id=str(vm.get("instanceId") or ""),
        tags=dict(vm.get("tags") or {}),
    )


def scale_set_prefix(scale_set: Mapping[str, Any]) -> str:
    """The computer name prefix of a scale set's VMs (its name when it sets none)."""
    profile = (scale_set.get("properties") or {}).get("virtualMachineProfile") or {}
    prefix = (profile.get("osProfile") or {}).get("computerNamePrefix")
    return str(prefix or scale_set.get("name") or "")


def is_uniform(scale_set: Mapping[str, Any]) -> bool:
    """``OrchestrationMode`` unset or ``Uniform`` (the VMSS cache keeps only those)."""
    mode = (scale_set.get("properties") or {}).get("orchestrationMode")
    return mode is None or str(mode) == "Uniform"


def names(machines: Sequence[Machine]) -> dict[str, Machine]:
    """Machines by node name (lower case)."""
    return {m.node_name.lower(): m for m in machines if m.node_name}
