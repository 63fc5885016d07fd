"""Microsoft.Network's public IP addresses and network interfaces, and what every network
resource shares: inline children with ids of their own, references checked as ARM checks them
(``InvalidResourceReference``), back-references computed on read.

Shapes: azure-rest-api-specs ``specification/network/resource-manager/Microsoft.Network``
(publicIpAddress.json, networkInterface.json), as the recordings in cloud-provider-azure
v1.36.5's ``pkg/azclient/{publicipaddressclient,interfaceclient}/testdata`` show them.
A dynamic public IP gets its address when first referenced and shows none while unreferenced
(the emulator keeps it reserved, so a re-attached one gets the same address back).
"""

from __future__ import annotations

from typing import Any

from kccm.emulators.azure.addresses import (
    allocate_private_ip,
    check_private_ip,
    ip_configurations,
)
from kccm.emulators.azure.errors import ArmError, invalid_reference
from kccm.emulators.azure.ids import ref, resolve
from kccm.emulators.azure.world import Obj, World

__all__ = [
    "address_dynamic_ip",
    "check_delete_nic",
    "check_delete_public_ip",
    "check_ref",
    "finish_public_ip",
    "normalize_children",
    "prepare_nic",
    "prepare_public_ip",
    "public_ip_users",
    "release_public_ip",
    "render_nic",
    "render_public_ip",
]

PIP_TYPE = "Microsoft.Network/publicIPAddresses"
NIC_TYPE = "Microsoft.Network/networkInterfaces"
LB_TYPE = "Microsoft.Network/loadBalancers"
VM_TYPE = "Microsoft.Compute/virtualMachines"
NIC_DEFAULTS: dict[str, Any] = {
    "hostedWorkloads": [],
    "tapConfigurations": [],
    "disableTcpStateTracking": False,
    "vnetEncryptionSupported": False,
    "allowPort25Out": True,
    "defaultOutboundConnectivityEnabled": False,
    "auxiliaryMode": "None",
    "auxiliarySku": "None",
}


def normalize_children(obj: Obj, prop: str) -> list[Obj]:
    """The inline array ``prop`` with ARM's ids, etags and types on every item."""
    props = obj["properties"]
    items: list[Obj] = []
    for raw in props.get(prop) or []:
        if not isinstance(raw, dict) or not raw.get("name"):
            raise ArmError(
                400, "InvalidRequestFormat", f"Cannot parse the request: {prop} item has no name."
            )
        item = {
            **{k: v for k, v in raw.items() if k in ("zones",)},  # a frontend's zones
            "name": str(raw["name"]),
            "id": f"{obj['id']}/{prop}/{raw['name']}",
            "etag": obj["etag"],
            "type": f"{obj['type']}/{prop}",
            "properties": {**(raw.get("properties") or {}), "provisioningState": "Succeeded"},
        }
        items.append(item)
    props[prop] = items
    return items


def check_ref(world: World, value: Any, source: str) -> dict[str, str] | None:
    """``value``'s reference (``{"id"}``), 400 when it names nothing."""
    found = ref(value)
    if found is not None and resolve(world, found["id"]) is None:
        raise invalid_reference(found["id"], source)
    return found


def _set_ref(world: World, props: Obj, key: str, source: str) -> None:
    found = check_ref(world, props.get(key), source)
    if found is None:
        props.pop(key, None)
    else:
        props[key] = found


# -- public IP addresses ---------------------------------------------------------------------


def prepare_public_ip(world: World, obj: Obj, old: Obj | None) -> None:
    props = obj["properties"]
    old_props = (old or {}).get("properties") or {}
    obj.setdefault("sku", {"name": "Basic", "tier": "Regional"})
    obj["sku"].setdefault("tier", "Regional")
    props.setdefault("publicIPAddressVersion", "IPv4")
    props.setdefault(
        "publicIPAllocationMethod", "Static" if obj["sku"]["name"] == "Standard" else "Dynamic"
    )
    props.setdefault("idleTimeoutInMinutes", 4)
    props.setdefault("ipTags", [])
    props.setdefault("ddosSettings", {"protectionMode": "VirtualNetworkInherited"})
    props.pop("ipConfiguration", None)
    props.pop("ipAddress", None)
    if old_props.get("ipAddress"):
        props["ipAddress"] = old_props["ipAddress"]
    label = (props.get("dnsSettings") or {}).get("domainNameLabel")
    if label:
        props["dnsSettings"] = {
            **props["dnsSettings"],
            "fqdn": f"{label}.{obj['location']}.cloudapp.azure.com",
        }


def finish_public_ip(world: World, obj: Obj) -> None:
    """A static address is allocated once the PUT completes."""
    props = obj["properties"]
    if props["publicIPAllocationMethod"] == "Static" and not props.get("ipAddress"):
        props["ipAddress"] = world.allocate_public_ip(props["publicIPAddressVersion"])


def address_dynamic_ip(world: World, pip_id: str) -> None:
    """A dynamic public IP referenced for the first time gets its address."""
    pip = world.get(pip_id)
    if pip is not None and not pip["properties"].get("ipAddress"):
        version = pip["properties"].get("publicIPAddressVersion", "IPv4")
        pip["properties"]["ipAddress"] = world.allocate_public_ip(version)


def public_ip_users(world: World, pip_id: str) -> list[str]:
    """The ids of the frontends and IP configurations that use the public IP."""
    wanted = pip_id.lower()
    users = [
        ipc_id
        for ipc_id, props in ip_configurations(world)
        if (props.get("publicIPAddress") or {}).get("id", "").lower() == wanted
    ]
    for lb in world.of_type(LB_TYPE):
        for fe in lb["properties"].get("frontendIPConfigurations") or []:
            fe_pip = (fe["properties"].get("publicIPAddress") or {}).get("id", "")
            if fe_pip.lower() == wanted:
                users.append(str(fe["id"]))
    return users


def render_public_ip(world: World, obj: Obj, expand: bool) -> None:
    """Who uses it; a dynamic one nobody uses shows no address (it keeps it reserved)."""
    users = public_ip_users(world, obj["id"])
    if users:
        obj["properties"]["ipConfiguration"] = {"id": users[0]}
    elif obj["properties"].get("publicIPAllocationMethod") == "Dynamic":
        obj["properties"].pop("ipAddress", None)


def check_delete_public_ip(world: World, obj: Obj) -> None:
    users = public_ip_users(world, obj["id"])
    if users:
        raise ArmError(
            400,
            "PublicIPAddressCannotBeDeleted",
            f"Public IP address {obj['id']} can not be deleted since it is still allocated to "
            f"resource {users[0]}. In order to delete the public IP, disassociate/detach the "
            "Public IP address from the resource.  To learn how to do this, see "
            "aka.ms/deletepublicip.",
        )


def release_public_ip(world: World, obj: Obj) -> None:
    world.release_public_ip(obj["properties"].get("ipAddress"))


# -- network interfaces ----------------------------------------------------------------------


def _mac(obj: Obj) -> str:
    digits = f"{abs(hash(str(obj['id']).lower())) % (1 << 24):06X}"
    return "00-0D-3A-" + "-".join(digits[i : i + 2] for i in range(0, 6, 2))


def _prepare_ip_config(
    world: World, nic: Obj, ipc: Obj, old: dict[str, Obj], taken: set[str]
) -> None:
    props = ipc["properties"]
    source = str(nic["id"])
    _set_ref(world, props, "subnet", source)
    _set_ref(world, props, "publicIPAddress", source)
    pools = []
    for item in props.get("loadBalancerBackendAddressPools") or []:
        found = check_ref(world, item, source)
        if found is not None:
            pools.append(found)
    props["loadBalancerBackendAddressPools"] = pools
    props.setdefault("privateIPAddressVersion", "IPv4")
    props.setdefault("privateIPAllocationMethod", "Dynamic")
    if props.get("publicIPAddress"):
        address_dynamic_ip(world, props["publicIPAddress"]["id"])
    subnet = (props.get("subnet") or {}).get("id", "")
    before = (old.get(ipc["name"].lower()) or {}).get("properties") or {}
    if props["privateIPAllocationMethod"] == "Static" and props.get("privateIPAddress"):
        check_private_ip(world, subnet, props["privateIPAddress"], skip=source, owner=ipc["id"])
    elif subnet and (before.get("subnet") or {}).get("id", "").lower() == subnet.lower():
        props["privateIPAddress"] = before.get("privateIPAddress")
    elif subnet:
        props["privateIPAddress"] = allocate_private_ip(
            world, subnet, skip=source, also=taken, version=props["privateIPAddressVersion"]
        )
    taken.add(str(props.get("privateIPAddress") or ""))


def prepare_nic(world: World, obj: Obj, old: Obj | None) -> None:
    props = obj["properties"]
    old_configs = {
        str(c["name"]).lower(): c
        for c in ((old or {}).get("properties") or {}).get("ipConfigurations") or []
    }
    configs = props["ipConfigurations"]
    if not configs:
        raise ArmError(
            400,
            "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",
            f"Network interface {obj['id']} must have at least one IP configuration.",
        )
    taken: set[str] = set()
    for index, ipc in enumerate(configs):
        ipc["properties"].setdefault("primary", index == 0)
        _prepare_ip_config(world, obj, ipc, old_configs, taken)
    _set_ref(world, props, "networkSecurityGroup", str(obj["id"]))
    props.pop("virtualMachine", None)
    props.setdefault("enableAcceleratedNetworking", False)
    props.setdefault("enableIPForwarding", False)
    props.setdefault("dnsSettings", {"dnsServers": [], "appliedDnsServers": []})
    props.setdefault("nicType", "Standard")
    for key, value in NIC_DEFAULTS.items():
        props.setdefault(key, value)
    props["macAddress"] = _mac(obj)
    obj.setdefault("kind", "Regular")


def _owner_vm(world: World, nic_id: str) -> str:
    wanted = nic_id.lower()
    for vm in world.of_type(VM_TYPE):
        profile = (vm.get("properties") or {}).get("networkProfile") or {}
        for nic in profile.get("networkInterfaces") or []:
            if str(nic.get("id", "")).lower() == wanted:
                return str(vm["id"])
    return ""


def render_nic(world: World, obj: Obj, expand: bool) -> None:
    owner = _owner_vm(world, obj["id"])
    if owner:
        obj["properties"]["virtualMachine"] = {"id": owner}
        obj["properties"].setdefault("primary", True)


def check_delete_nic(world: World, obj: Obj) -> None:
    owner = _owner_vm(world, obj["id"])
    if owner:
        raise ArmError(
            400,
            "NicInUse",
            f"Network Interface {obj['id']} is used by existing resource {owner}. In order to "
            "delete the network interface, it must be dissociated from the resource. To learn "
            "more, see aka.ms/deletenic.",
        )
