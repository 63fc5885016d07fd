"""The default world and what tests seed into it.

The default world, as an AKS-like cluster's resource group holds it before any Service: the
subscription ``DEFAULTS["subscription"]``, resource group ``kccm-rg`` in ``eastus`` (zones 1-3),
the client ``kccm-client``/``kccm-secret``, the virtual network ``kccm-vnet``
(10.240.0.0/16) with the subnet ``kccm-subnet`` (10.240.0.0/16) bound to the security group
``kccm-nsg`` and the route table ``kccm-rt``. Seeded VMs get a NIC ``<vm>-nic`` (and a public
IP ``<vm>-pip`` when asked) in an availability set or a zone; seeded scale sets their instances.
Deleting a seeded VM removes the NIC and public IP seeded with it.
"""

from __future__ import annotations

from typing import Any

from kccm.emulators.azure import compute
from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.kinds import KINDS
from kccm.emulators.azure.store import build, render
from kccm.emulators.azure.world import DEFAULTS, Obj, World

__all__ = [
    "add_vm",
    "add_vmss",
    "create",
    "default_subnet",
    "delete_vm",
    "seed_world",
    "set_power",
]

NETWORK = "microsoft.network"
COMPUTE = "microsoft.compute"


def create(world: World, namespace: str, type_: str, group: str, name: str, body: Obj) -> Obj:
    """A resource made at once, as if its PUT had completed."""
    kind = KINDS[(namespace.lower(), type_.lower())]
    world.add_group(group)
    obj = build(
        world,
        kind,
        group,
        name,
        {"location": world.location, **body},
        world.get(world.resource_id(group, kind.namespace, kind.type, name)),
    )
    obj["properties"]["provisioningState"] = "Succeeded"
    world.put(obj)
    kind.finish(world, obj)
    return obj


def seed_world(world: World) -> World:
    world.clients.setdefault(DEFAULTS["client_id"], DEFAULTS["client_secret"])
    group = DEFAULTS["resource_group"]
    nsg = create(world, NETWORK, "networkSecurityGroups", group, DEFAULTS["nsg"], {})
    table = create(world, NETWORK, "routeTables", group, DEFAULTS["route_table"], {})
    create(
        world,
        NETWORK,
        "virtualNetworks",
        group,
        DEFAULTS["vnet"],
        {
            "properties": {
                "addressSpace": {"addressPrefixes": [DEFAULTS["vnet_cidr"]]},
                "subnets": [
                    {
                        "name": DEFAULTS["subnet"],
                        "properties": {
                            "addressPrefix": DEFAULTS["subnet_cidr"],
                            "networkSecurityGroup": {"id": nsg["id"]},
                            "routeTable": {"id": table["id"]},
                        },
                    }
                ],
            }
        },
    )
    world.baseline = set(world.resources)
    return world


def default_subnet(world: World) -> str:
    vnet = world.resource_id(
        DEFAULTS["resource_group"], "Microsoft.Network", "virtualNetworks", DEFAULTS["vnet"]
    )
    return f"{vnet}/subnets/{DEFAULTS['subnet']}"


def add_vm(world: World, spec: dict[str, Any]) -> Obj:
    """A VM with its NIC (and public IP): ``name``, ``resource_group``, ``size``, ``zone`` or
    ``availability_set``, ``fault_domain``, ``update_domain``, ``power_state``,
    ``public_ip`` (bool), ``public_ip_sku``, ``subnet`` (an id), ``tags``."""
    name = str(spec["name"])
    group = str(spec.get("resource_group") or DEFAULTS["resource_group"])
    power = str(spec.get("power_state", "running"))
    if power not in compute.POWER_STATES:
        raise ArmError(400, "InvalidParameter", f"unknown power state {power!r}")
    ipc: Obj = {"subnet": {"id": spec.get("subnet") or default_subnet(world)}, "primary": True}
    made: list[str] = []
    if spec.get("public_ip"):
        sku = str(spec.get("public_ip_sku") or "Standard")
        pip = create(
            world,
            NETWORK,
            "publicIPAddresses",
            group,
            f"{name}-pip",
            {"sku": {"name": sku}, "properties": {"publicIPAllocationMethod": "Static"}},
        )
        ipc["publicIPAddress"] = {"id": pip["id"]}
        made.append(str(pip["id"]))
    nic = create(
        world,
        NETWORK,
        "networkInterfaces",
        group,
        f"{name}-nic",
        {"properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": ipc}]}},
    )
    made.append(str(nic["id"]))
    props: Obj = {
        "hardwareProfile": {"vmSize": spec.get("size") or "Standard_D2s_v3"},
        "networkProfile": {
            "networkInterfaces": [{"id": nic["id"], "properties": {"primary": True}}]
        },
        "osProfile": {"computerName": name, "adminUsername": "azureuser"},
    }
    body: Obj = {"properties": props, "tags": dict(spec.get("tags") or {})}
    if spec.get("zone"):
        body["zones"] = [str(spec["zone"])]
    elif spec.get("availability_set"):
        aset_id = world.resource_id(
            group, "Microsoft.Compute", "availabilitySets", str(spec["availability_set"])
        )
        aset = world.get(aset_id)
        if aset is None:
            aset = create(world, COMPUTE, "availabilitySets", group, aset_id.rsplit("/", 1)[1], {})
            aset["_seeded"] = True
        props["availabilitySet"] = {"id": aset["id"]}
    vm = create(world, COMPUTE, "virtualMachines", group, name, body)
    vm.update(
        _power=power,
        _fault_domain=int(spec.get("fault_domain", 0)),
        _update_domain=int(spec.get("update_domain", 0)),
        _seeded=made,
    )
    return render(world, vm, True)


def add_vmss(world: World, spec: dict[str, Any]) -> Obj:
    """A Uniform scale set and its instances: ``name``, ``resource_group``, ``capacity``,
    ``size``, ``zones``, ``power_states`` (one per instance), ``subnet``,
    ``computer_name_prefix``, ``upgrade_mode``, ``public_ip`` (an address per instance)."""
    name = str(spec["name"])
    group = str(spec.get("resource_group") or DEFAULTS["resource_group"])
    ipc: Obj = {
        "name": "ipconfig1",
        "properties": {
            "subnet": {"id": spec.get("subnet") or default_subnet(world)},
            "primary": True,
        },
    }
    if spec.get("public_ip"):
        ipc["properties"]["publicIPAddressConfiguration"] = {
            "name": "pub1",
            "properties": {"idleTimeoutInMinutes": 15},
        }
    body: Obj = {
        "sku": {
            "name": spec.get("size") or "Standard_D2s_v3",
            "tier": "Standard",
            "capacity": int(spec.get("capacity", 2)),
        },
        "properties": {
            "upgradePolicy": {"mode": spec.get("upgrade_mode") or "Manual"},
            "virtualMachineProfile": {
                "osProfile": {
                    "computerNamePrefix": spec.get("computer_name_prefix") or name,
                    "adminUsername": "azureuser",
                },
                "networkProfile": {
                    "networkInterfaceConfigurations": [
                        {"name": name, "properties": {"primary": True, "ipConfigurations": [ipc]}}
                    ]
                },
            },
        },
    }
    if spec.get("zones"):
        body["zones"] = [str(z) for z in spec["zones"]]
    vmss = create(world, COMPUTE, "virtualMachineScaleSets", group, name, body)
    for vm, power in zip(
        compute.instances_of(world, vmss), spec.get("power_states") or [], strict=False
    ):
        set_power(world, str(vm["id"]), str(power))
    return {
        **render(world, vmss),
        "instances": [render(world, vm, True) for vm in compute.instances_of(world, vmss)],
    }


VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"


def _vm(world: World, vm_id: str, *types: str) -> Obj:
    vm = world.get(vm_id)
    if vm is None or vm["type"] not in (compute.VM_TYPE, compute.VMSS_VM_TYPE, *types):
        raise ArmError(404, "ResourceNotFound", f"No VM or scale-set instance {vm_id}.")
    return vm


def set_power(world: World, vm_id: str, state: str) -> Obj:
    if state not in compute.POWER_STATES:
        raise ArmError(400, "InvalidParameter", f"unknown power state {state!r}")
    vm = _vm(world, vm_id)
    vm["_power"] = state
    return render(world, vm, True)


def delete_vm(world: World, vm_id: str) -> None:
    """The VM gone with what was seeded with it (a scale-set instance: its set one smaller; a
    scale set: with its instances)."""
    vm = _vm(world, vm_id, VMSS_TYPE)
    world.drop(vm["id"])
    if vm["type"] == VMSS_TYPE:
        for instance in compute.instances_of(world, vm):
            compute.drop_instance(world, instance)
        return
    if vm["type"] == compute.VMSS_VM_TYPE:
        compute.vmss_vm_deleted(world, vm)
        return
    for made in vm.get("_seeded") or []:
        gone = world.drop(made)
        if gone is not None and gone["type"] == "Microsoft.Network/publicIPAddresses":
            world.release_public_ip(gone["properties"].get("ipAddress"))
    _drop_unused_availability_set(world, vm)


def _drop_unused_availability_set(world: World, vm: Obj) -> None:
    """A seeded availability set goes with its last VM."""
    aset = world.get(str((vm["properties"].get("availabilitySet") or {}).get("id", "")))
    if aset is None or not aset.get("_seeded"):
        return
    wanted = str(aset["id"]).lower()
    for other in world.of_type(compute.VM_TYPE):
        if str((other["properties"].get("availabilitySet") or {}).get("id", "")).lower() == wanted:
            return
    world.drop(aset["id"])
