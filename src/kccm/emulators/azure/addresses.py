"""Private addresses in subnets and the IP configurations that hold them.

Azure keeps a subnet's first four addresses and its last one for itself; a NIC's first dynamic
address in ``10.240.0.0/16`` is therefore ``10.240.0.4``. Which addresses are taken is read
from what holds them (NICs, scale-set instances, internal balancer frontends) every time, so a
deletion frees its addresses with nothing to keep in step.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.ids import resolve
from kccm.emulators.azure.world import Obj, World

__all__ = [
    "allocate_private_ip",
    "check_private_ip",
    "ip_configurations",
    "subnet_prefix",
    "vmss_instance_nics",
    "vmss_public_ips",
]

NIC_TYPE = "Microsoft.Network/networkInterfaces"
LB_TYPE = "Microsoft.Network/loadBalancers"
VMSS_VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"


def subnet_prefix(world: World, subnet_id: str, version: str = "IPv4") -> str:
    """The subnet's prefix of the family (``IPv4``/``IPv6``; a dual-stack subnet lists both
    in ``addressPrefixes``), or its first when it has none of that family."""
    subnet = resolve(world, subnet_id)
    if subnet is None:
        return ""
    props = subnet.get("properties") or {}
    prefixes = [str(p) for p in props.get("addressPrefixes") or [props.get("addressPrefix", "")]]
    wanted = 6 if version == "IPv6" else 4
    for prefix in prefixes:
        try:
            if ipaddress.ip_network(prefix, strict=False).version == wanted:
                return prefix
        except ValueError:
            continue
    return prefixes[0] if prefixes else ""


def vmss_instance_nics(world: World, vm: Obj) -> list[Obj]:
    """The NICs of a scale-set instance, as the network resource provider shows them: made
    from the instance's applied network profile and the addresses it was given."""
    props = vm.get("properties") or {}
    configs = (props.get("networkProfileConfiguration") or {}).get(
        "networkInterfaceConfigurations"
    ) or []
    addresses: dict[str, str] = vm.get("_ips") or {}
    nics: list[Obj] = []
    for config in configs:
        nic_id = f"{vm['id']}/networkInterfaces/{config['name']}"
        cprops = config.get("properties") or {}
        ip_configs: list[Obj] = []
        for ipc in cprops.get("ipConfigurations") or []:
            iprops = ipc.get("properties") or {}
            key = f"{config['name']}/{ipc['name']}".lower()
            ip_props: Obj = {
                "provisioningState": "Succeeded",
                "privateIPAddress": addresses.get(key, ""),
                "privateIPAllocationMethod": "Dynamic",
                "privateIPAddressVersion": iprops.get("privateIPAddressVersion", "IPv4"),
                "primary": bool(iprops.get("primary", len(ip_configs) == 0)),
            }
            if iprops.get("subnet"):
                ip_props["subnet"] = {"id": iprops["subnet"]["id"]}
            public = iprops.get("publicIPAddressConfiguration")
            if public and key in (vm.get("_pips") or {}):
                ipc_id = f"{nic_id}/ipConfigurations/{ipc['name']}"
                ip_props["publicIPAddress"] = {"id": f"{ipc_id}/publicIPAddresses/{public['name']}"}
            # a NIC's IP configuration has no inbound NAT pools (the scale set model's do):
            # networkInterface.json (2018-10-01, 2025-05-01) names NAT rules only
            ip_props["loadBalancerBackendAddressPools"] = [
                {"id": p["id"]} for p in iprops.get("loadBalancerBackendAddressPools") or []
            ]
            ip_configs.append(
                {
                    "name": ipc["name"],
                    "id": f"{nic_id}/ipConfigurations/{ipc['name']}",
                    "etag": vm.get("_nic_etag", 'W/"1"'),
                    "properties": ip_props,
                }
            )
        nic_props: Obj = {
            "provisioningState": "Succeeded",
            "ipConfigurations": ip_configs,
            "primary": bool(cprops.get("primary", not nics)),
            "enableAcceleratedNetworking": bool(cprops.get("enableAcceleratedNetworking")),
            "enableIPForwarding": bool(cprops.get("enableIPForwarding")),
            "virtualMachine": {"id": vm["id"]},
            "macAddress": vm.get("_mac", "00-0D-3A-00-00-00"),
        }
        if cprops.get("networkSecurityGroup"):
            nic_props["networkSecurityGroup"] = {"id": cprops["networkSecurityGroup"]["id"]}
        nics.append(
            {
                "name": config["name"],
                "id": nic_id,
                "etag": vm.get("_nic_etag", 'W/"1"'),
                "type": NIC_TYPE,
                "location": vm.get("location", world.location),
                "properties": nic_props,
            }
        )
    return nics


def vmss_public_ips(world: World, vm: Obj) -> list[Obj]:
    """The public IPs a scale-set instance's IP configurations were given (their
    ``publicIPAddressConfiguration``), as the network resource provider shows them."""
    found: list[Obj] = []
    for nic in vmss_instance_nics(world, vm):
        for ipc in nic["properties"]["ipConfigurations"]:
            ref = ipc["properties"].get("publicIPAddress")
            if not ref:
                continue
            key = f"{nic['name']}/{ipc['name']}".lower()
            found.append(
                {
                    "name": ref["id"].rsplit("/", 1)[1],
                    "id": ref["id"],
                    "etag": nic["etag"],
                    "location": nic["location"],
                    "properties": {
                        "provisioningState": "Succeeded",
                        "ipAddress": vm["_pips"][key],
                        "publicIPAddressVersion": ipc["properties"]["privateIPAddressVersion"],
                        "publicIPAllocationMethod": "Dynamic",
                        "idleTimeoutInMinutes": 4,
                        "ipConfiguration": {"id": ipc["id"]},
                    },
                }
            )
    return found


def ip_configurations(world: World) -> Iterator[tuple[str, Obj]]:
    """Every NIC IP configuration (standalone NICs and scale-set instances): its id and
    properties."""
    for nic in world.of_type(NIC_TYPE):
        for ipc in (nic.get("properties") or {}).get("ipConfigurations") or []:
            yield str(ipc["id"]), ipc.get("properties") or {}
    for vm in world.of_type(VMSS_VM_TYPE):
        for nic in vmss_instance_nics(world, vm):
            for ipc in nic["properties"]["ipConfigurations"]:
                yield str(ipc["id"]), ipc["properties"]


def _taken(world: World, subnet_id: str, skip: str) -> set[str]:
    """Addresses held in ``subnet_id`` by anything but ``skip`` (an id prefix)."""
    wanted = subnet_id.lower()
    skip = skip.lower()
    taken: set[str] = set()
    for ipc_id, props in ip_configurations(world):
        subnet = (props.get("subnet") or {}).get("id", "")
        if subnet.lower() == wanted and not ipc_id.lower().startswith(skip):
            taken.add(str(props.get("privateIPAddress") or ""))
    for lb in world.of_type(LB_TYPE):
        if str(lb["id"]).lower().startswith(skip):
            continue
        for fe in (lb.get("properties") or {}).get("frontendIPConfigurations") or []:
            fprops = fe.get("properties") or {}
            if (fprops.get("subnet") or {}).get("id", "").lower() == wanted:
                taken.add(str(fprops.get("privateIPAddress") or ""))
    return taken


def allocate_private_ip(
    world: World,
    subnet_id: str,
    *,
    skip: str,
    also: set[str] | None = None,
    version: str = "IPv4",
) -> str:
    """The lowest free address of the subnet's prefix of the family (none of ``also``
    either)."""
    prefix = subnet_prefix(world, subnet_id, version)
    network = ipaddress.ip_network(prefix, strict=False)
    family = socket.AF_INET6 if network.version == 6 else socket.AF_INET
    taken = set()
    for text in _taken(world, subnet_id, skip) | (also or set()):
        try:
            taken.add(int.from_bytes(socket.inet_pton(family, text), "big"))
        except OSError:
            continue
    base = int(network.network_address)
    for offset in range(4, min(network.num_addresses - 1, 1 << 20)):
        if base + offset not in taken:
            return str(network.network_address + offset)
    raise ArmError(
        400,
        "SubnetIsFull",
        f"Subnet {subnet_id} with address prefix {prefix} does not have enough capacity.",
    )


def check_private_ip(world: World, subnet_id: str, address: str, *, skip: str, owner: str) -> None:
    """ARM's 400 when a static address lies outside the subnet or is taken."""
    version = "IPv6" if ":" in address else "IPv4"
    prefix = subnet_prefix(world, subnet_id, version)
    try:
        inside = ipaddress.ip_address(address) in ipaddress.ip_network(prefix, strict=False)
    except ValueError:
        inside = False
    if not inside:
        raise ArmError(
            400,
            "PrivateIPAddressNotInSubnet",
            f"IP configuration {owner} is referencing private IP address {address} which is not "
            f"in the subnet {subnet_id} address prefix {prefix}.",
        )
    if address in _taken(world, subnet_id, skip):
        raise ArmError(
            400,
            "PrivateIPAddressInUse",
            f"IP configuration {owner} is using the private IP address {address} which is "
            "already allocated to another resource.",
        )
