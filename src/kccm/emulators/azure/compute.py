"""Microsoft.Compute: virtual machines (in availability sets or zones, with their instance view
and power state), availability sets, and Uniform scale sets with their instances.

A scale set's PUT/PATCH changes its model; its instances keep the network profile they were
given (``networkProfileConfiguration``) until ``manualupgrade`` applies the model (``Manual``
upgrade policy) or at once (``Automatic``/``Rolling``), and ``latestModelApplied`` says which
it is. An instance's own PUT changes only its profile, as upstream's pool membership does.
Instances get their private addresses when they are made; their NICs are rendered from the
profile (:func:`kccm.emulators.azure.addresses.vmss_instance_nics`). Shapes: azure-rest-api-specs
``specification/compute/resource-manager/Microsoft.Compute/ComputeRP`` (virtualMachine.json,
virtualMachineScaleSet.json), as recorded in cloud-provider-azure v1.36.5
``pkg/azclient/{virtualmachineclient,virtualmachinescalesetclient,virtualmachinescalesetvmclient}``.
"""

from __future__ import annotations

import copy
import json

from kccm.emulators.azure.addresses import allocate_private_ip
from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.network import check_ref
from kccm.emulators.azure.world import Obj, World, iso_at, new_guid

__all__ = [
    "POWER_STATES",
    "VMSS_VM_TYPE",
    "apply_model",
    "drop_instance",
    "instance_view",
    "instances_of",
    "new_instance",
    "parent_vmss",
    "prepare_availability_set",
    "prepare_vm",
    "prepare_vmss",
    "prepare_vmss_vm",
    "reconcile_capacity",
    "render_availability_set",
    "render_vm",
    "render_vmss_vm",
    "vmss_vm_deleted",
]

VM_TYPE = "Microsoft.Compute/virtualMachines"
VMSS_VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
POWER_STATES = {
    "running": "VM running",
    "deallocated": "VM deallocated",
    "stopped": "VM stopped",
    "starting": "VM starting",
    "stopping": "VM stopping",
    "deallocating": "VM deallocating",
}


def _refs(world: World, items: object, source: str) -> list[Obj]:
    found: list[Obj] = []
    for item in items if isinstance(items, list) else []:
        reference = check_ref(world, item, source)
        if reference is not None:
            extra = item.get("properties") if isinstance(item, dict) else None
            found.append({**reference, **({"properties": extra} if extra else {})})
    return found


def prepare_vm(world: World, obj: Obj, old: Obj | None) -> None:
    props = obj["properties"]
    old_props = (old or {}).get("properties") or {}
    if not (props.get("hardwareProfile") or {}).get("vmSize"):
        raise ArmError(
            400,
            "InvalidParameter",
            "Required parameter 'hardwareProfile.vmSize' is missing (null).",
        )
    profile = props.setdefault("networkProfile", {})
    profile["networkInterfaces"] = _refs(world, profile.get("networkInterfaces"), obj["id"])
    for key in ("availabilitySet", "virtualMachineScaleSet"):
        found = check_ref(world, props.get(key), str(obj["id"]))
        if found is None:
            props.pop(key, None)
        else:
            props[key] = found
    props["vmId"] = old_props.get("vmId") or new_guid()
    props["timeCreated"] = old_props.get("timeCreated") or iso_at(world.clock())
    props.setdefault("osProfile", {}).setdefault("computerName", obj["name"])
    props.setdefault("storageProfile", {}).setdefault("osDisk", {"osType": "Linux"})
    props.pop("instanceView", None)
    obj.setdefault("_power", "running")


def instance_view(vm: Obj) -> Obj:
    power = str(vm.get("_power", "running"))
    provisioning = str(vm["properties"]["provisioningState"]).lower()
    computer = ((vm.get("properties") or {}).get("osProfile") or {}).get("computerName")
    view: Obj = {
        "computerName": computer or vm["name"],
        "osName": "ubuntu",
        "osVersion": "22.04",
        "platformUpdateDomain": int(vm.get("_update_domain", 0)),
        "platformFaultDomain": int(vm.get("_fault_domain", 0)),
        "vmAgent": {
            "vmAgentVersion": "2.7.41491.1149",
            "statuses": [
                {
                    "code": "ProvisioningState/succeeded",
                    "level": "Info",
                    "displayStatus": "Ready",
                    "message": "GuestAgent is running and processing the extensions.",
                }
            ],
        },
        "disks": [],
        "hyperVGeneration": "V1",
        "statuses": [
            {
                "code": f"ProvisioningState/{provisioning}",
                "level": "Info",
                "displayStatus": f"Provisioning {provisioning}",
            },
            {"code": f"PowerState/{power}", "level": "Info", "displayStatus": POWER_STATES[power]},
        ],
    }
    if vm.get("_placement_group"):
        view["placementGroupId"] = vm["_placement_group"]
    return view


def render_vm(world: World, obj: Obj, expand: bool) -> None:
    if expand:
        obj["properties"]["instanceView"] = instance_view(obj)


def prepare_availability_set(world: World, obj: Obj, old: Obj | None) -> None:
    obj.setdefault("sku", {"name": "Aligned"})
    obj["properties"].setdefault("platformFaultDomainCount", 2)
    obj["properties"].setdefault("platformUpdateDomainCount", 5)
    obj["properties"].pop("virtualMachines", None)


def render_availability_set(world: World, obj: Obj, expand: bool) -> None:
    """Its VMs; no ``etag`` and no ``provisioningState``: availabilitySet.json (2025-04-01)
    defines neither and Azure answers without them (upstream's recordings, v1.36.5)."""
    obj.pop("etag", None)
    obj["properties"].pop("provisioningState", None)
    wanted = str(obj["id"]).lower()
    obj["properties"]["virtualMachines"] = [
        {"id": vm["id"]}
        for vm in world.of_type(VM_TYPE)
        if str((vm["properties"].get("availabilitySet") or {}).get("id", "")).lower() == wanted
    ]


# -- scale sets ----------------------------------------------------------------------------


def _check_network_profile(world: World, profile: Obj, source: str) -> None:
    for config in profile.get("networkInterfaceConfigurations") or []:
        for ipc in (config.get("properties") or {}).get("ipConfigurations") or []:
            iprops = ipc.setdefault("properties", {})
            for key in ("subnet",):
                found = check_ref(world, iprops.get(key), source)
                if found is not None:
                    iprops[key] = found
            for key in ("loadBalancerBackendAddressPools", "loadBalancerInboundNatPools"):
                iprops[key] = _refs(world, iprops.get(key), source)


def prepare_vmss(world: World, obj: Obj, old: Obj | None) -> None:
    sku = obj.get("sku") or {}
    if not sku.get("name"):
        raise ArmError(400, "InvalidParameter", "Required parameter 'sku' is missing (null).")
    sku.setdefault("tier", "Standard")
    sku.setdefault("capacity", 0)
    props = obj["properties"]
    old_props = (old or {}).get("properties") or {}
    profile = props.setdefault("virtualMachineProfile", {})
    _check_network_profile(world, profile.setdefault("networkProfile", {}), str(obj["id"]))
    props.setdefault("orchestrationMode", "Uniform")
    props.setdefault("upgradePolicy", {"mode": "Manual"})
    props.setdefault("overprovision", False)
    props.setdefault("singlePlacementGroup", True)
    props.setdefault("platformFaultDomainCount", 5)
    props.setdefault("doNotRunExtensionsOnOverprovisionedVMs", False)
    props["uniqueId"] = old_props.get("uniqueId") or new_guid()
    props["timeCreated"] = old_props.get("timeCreated") or iso_at(world.clock())
    obj.setdefault("_next", 0)


def instances_of(world: World, vmss: Obj) -> list[Obj]:
    prefix = f"{str(vmss['id']).lower()}/virtualmachines/"
    found = [
        vm
        for key, vm in world.by_type.get(VMSS_VM_TYPE.lower(), {}).items()
        if key.startswith(prefix)
    ]
    return sorted(found, key=lambda vm: int(vm["instanceId"]))


def _address(world: World, vm: Obj) -> None:
    """Private addresses for the instance's IP configurations that have none."""
    addresses: dict[str, str] = vm.setdefault("_ips", {})
    profile = vm["properties"].get("networkProfileConfiguration") or {}
    for config in profile.get("networkInterfaceConfigurations") or []:
        for ipc in (config.get("properties") or {}).get("ipConfigurations") or []:
            key = f"{config['name']}/{ipc['name']}".lower()
            subnet = ((ipc.get("properties") or {}).get("subnet") or {}).get("id", "")
            version = (ipc.get("properties") or {}).get("privateIPAddressVersion", "IPv4")
            if key not in addresses and subnet:
                addresses[key] = allocate_private_ip(
                    world, subnet, skip=str(vm["id"]) + "/", version=version
                )
            publics: dict[str, str] = vm.setdefault("_pips", {})
            wants_public = (ipc.get("properties") or {}).get("publicIPAddressConfiguration")
            if wants_public and key not in publics:
                publics[key] = world.allocate_public_ip(version)


def new_instance(world: World, vmss: Obj, index: int, **extra: object) -> Obj:
    profile = vmss["properties"]["virtualMachineProfile"]
    prefix = (profile.get("osProfile") or {}).get("computerNamePrefix") or vmss["name"]
    zones = vmss.get("zones") or []
    configs = copy.deepcopy(profile.get("networkProfile") or {})
    vm: Obj = {
        "name": f"{vmss['name']}_{index}",
        "id": f"{vmss['id']}/virtualMachines/{index}",
        "type": VMSS_VM_TYPE,
        "location": vmss["location"],
        "instanceId": str(index),
        "sku": {"name": vmss["sku"]["name"], "tier": vmss["sku"].get("tier", "Standard")},
        "etag": world.compute_etag(),
        "properties": {
            "latestModelApplied": True,
            "modelDefinitionApplied": "VirtualMachineScaleSet",
            "networkProfileConfiguration": {
                "networkInterfaceConfigurations": configs.get("networkInterfaceConfigurations")
                or []
            },
            "provisioningState": "Succeeded",
            "hardwareProfile": {"vmSize": vmss["sku"]["name"]},
            "resilientVMDeletionStatus": "Disabled",
            "vmId": new_guid(),
            "osProfile": {"computerName": f"{prefix}{_base36(index):0>6}"},
            "storageProfile": {"osDisk": {"osType": "Linux"}},
            "timeCreated": iso_at(world.clock()),
        },
        "_power": "running",
        "_fault_domain": index % 5,
        "_placement_group": vmss["properties"]["uniqueId"],
        "_nic_etag": world.network_etag(),
        "_mac": f"00-0D-3A-{index >> 16 & 255:02X}-{index >> 8 & 255:02X}-{index & 255:02X}",
        **extra,
    }
    if zones:
        vm["zones"] = [zones[index % len(zones)]]
    _set_nic_ids(vm)
    _address(world, vm)
    return world.put(vm)


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if not number:
            return text


def _set_nic_ids(vm: Obj) -> None:
    configs = vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"]
    vm["properties"]["networkProfile"] = {
        "networkInterfaces": [{"id": f"{vm['id']}/networkInterfaces/{c['name']}"} for c in configs]
    }


def reconcile_capacity(world: World, vmss: Obj) -> None:
    """Instances made or removed until there are ``sku.capacity``; an automatic upgrade
    policy applies the model to every instance."""
    current = instances_of(world, vmss)
    wanted = int(vmss["sku"].get("capacity") or 0)
    while len(current) < wanted:
        current.append(new_instance(world, vmss, int(vmss["_next"])))
        vmss["_next"] = int(vmss["_next"]) + 1
    for vm in current[wanted:]:
        drop_instance(world, vm)
    mode = str((vmss["properties"].get("upgradePolicy") or {}).get("mode", "Manual"))
    if mode.lower() in ("automatic", "rolling"):
        apply_model(world, vmss, [vm["instanceId"] for vm in current[:wanted]])


def apply_model(world: World, vmss: Obj, instance_ids: list[str]) -> None:
    """``manualupgrade``: the scale set's network profile copied onto the instances."""
    wanted = {str(i) for i in instance_ids}
    profile = vmss["properties"]["virtualMachineProfile"].get("networkProfile") or {}
    for vm in instances_of(world, vmss):
        if vm["instanceId"] in wanted:
            vm["properties"]["networkProfileConfiguration"] = {
                "networkInterfaceConfigurations": copy.deepcopy(
                    profile.get("networkInterfaceConfigurations") or []
                )
            }
            vm["etag"] = world.compute_etag()
            vm["_nic_etag"] = world.network_etag()
            _set_nic_ids(vm)
            _address(world, vm)


def drop_instance(world: World, vm: Obj) -> None:
    """The instance gone, its public IPs free (its scale set's capacity unchanged)."""
    world.drop(vm["id"])
    for address in (vm.get("_pips") or {}).values():
        world.release_public_ip(address)


def vmss_vm_deleted(world: World, vm: Obj) -> None:
    """A deleted instance leaves its scale set one smaller, and its public IPs free."""
    drop_instance(world, vm)
    vmss = parent_vmss(world, vm)
    if vmss is not None:
        vmss["sku"]["capacity"] = max(0, int(vmss["sku"].get("capacity") or 0) - 1)


def prepare_vmss_vm(world: World, vm: Obj, body: Obj) -> None:
    """An instance's PUT: its network profile (checked) and tags; nothing else changes."""
    props = body.get("properties") or {}
    wanted = props.get("networkProfileConfiguration")
    if isinstance(wanted, dict):
        profile = {
            "networkInterfaceConfigurations": copy.deepcopy(
                wanted.get("networkInterfaceConfigurations") or []
            )
        }
        _check_network_profile(world, profile, str(vm["id"]))
        vm["properties"]["networkProfileConfiguration"] = profile
        _set_nic_ids(vm)
        _address(world, vm)
        vm["_nic_etag"] = world.network_etag()
    if "tags" in body:
        vm["tags"] = dict(body.get("tags") or {})


def parent_vmss(world: World, vm: Obj) -> Obj | None:
    return world.get(str(vm["id"]).rsplit("/virtualMachines/", 1)[0])


def render_vmss_vm(world: World, vm: Obj, expand: bool) -> None:
    vmss = parent_vmss(world, vm)
    if vmss is not None:
        model = (vmss["properties"]["virtualMachineProfile"].get("networkProfile") or {}).get(
            "networkInterfaceConfigurations"
        ) or []
        applied = (
            vm["properties"]["networkProfileConfiguration"].get("networkInterfaceConfigurations")
            or []
        )
        vm["properties"]["latestModelApplied"] = _same(model, applied)
    if expand:
        vm["properties"]["instanceView"] = instance_view(vm)


def _same(left: object, right: object) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)
