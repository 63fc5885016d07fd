"""Microsoft.Network's security groups (rules inline, Azure's six default rules beside them),
route tables (routes inline) and virtual networks (subnets inline).

Checks ARM makes that a client can trip over: a rule's priority in 100-4096 and unique per
direction (``SecurityRuleConflict``), a virtual appliance route with its next hop, a subnet's
security group and route table existing, a subnet in use by an IP configuration kept. On read,
security groups and route tables list the subnets (and NICs) that use them. Shapes:
azure-rest-api-specs ``networkSecurityGroup.json``, ``routeTable.json``,
``virtualNetwork.json``, as recorded in cloud-provider-azure v1.36.5 ``pkg/azclient``.
"""

from __future__ import annotations

from kccm.emulators.azure.addresses import ip_configurations
from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.network import check_ref
from kccm.emulators.azure.world import Obj, World

__all__ = [
    "check_delete_vnet",
    "prepare_nsg",
    "prepare_route_table",
    "prepare_vnet",
    "render_nsg",
    "render_route_table",
]

NIC_TYPE = "Microsoft.Network/networkInterfaces"
VNET_TYPE = "Microsoft.Network/virtualNetworks"

DEFAULT_RULES = (
    ("AllowVnetInBound", 65000, "Inbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
    ("AllowAzureLoadBalancerInBound", 65001, "Inbound", "Allow", "AzureLoadBalancer", "*"),
    ("DenyAllInBound", 65500, "Inbound", "Deny", "*", "*"),
    ("AllowVnetOutBound", 65000, "Outbound", "Allow", "VirtualNetwork", "VirtualNetwork"),
    ("AllowInternetOutBound", 65001, "Outbound", "Allow", "*", "Internet"),
    ("DenyAllOutBound", 65500, "Outbound", "Deny", "*", "*"),
)


def _default_rules(obj: Obj) -> list[Obj]:
    return [
        {
            "name": name,
            "id": f"{obj['id']}/defaultSecurityRules/{name}",
            "etag": obj["etag"],
            "type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
            "properties": {
                "provisioningState": "Succeeded",
                "description": f"Default rule {name}",
                "protocol": "*",
                "sourcePortRange": "*",
                "destinationPortRange": "*",
                "sourceAddressPrefix": source,
                "destinationAddressPrefix": destination,
                "access": access,
                "priority": priority,
                "direction": direction,
                "sourcePortRanges": [],
                "destinationPortRanges": [],
                "sourceAddressPrefixes": [],
                "destinationAddressPrefixes": [],
            },
        }
        for name, priority, direction, access, source, destination in DEFAULT_RULES
    ]


def prepare_nsg(world: World, obj: Obj, old: Obj | None) -> None:
    seen: dict[tuple[str, int], str] = {}
    for rule in obj["properties"]["securityRules"]:
        props = rule["properties"]
        priority = int(props.get("priority") or 0)
        if not 100 <= priority <= 4096:
            raise ArmError(
                400,
                "SecurityRuleInvalidPriority",
                f"Security rule has invalid Priority. Value provided: {priority} "
                "Allowed values: 100-4096.",
            )
        key = (str(props.get("direction", "")).lower(), priority)
        if key in seen:
            raise ArmError(
                400,
                "SecurityRuleConflict",
                f"Security rule {rule['name']} conflicts with rule {seen[key]}. Rules cannot "
                "have the same Priority and Direction. To learn more, see aka.ms/nsgrules.",
            )
        seen[key] = rule["name"]
        for listed in (
            "sourcePortRanges",
            "destinationPortRanges",
            "sourceAddressPrefixes",
            "destinationAddressPrefixes",
        ):
            props.setdefault(listed, [])
    for back in ("networkInterfaces", "subnets"):
        obj["properties"].pop(back, None)
    obj["properties"]["defaultSecurityRules"] = _default_rules(obj)


def _subnets_using(world: World, key: str, target: str) -> list[dict[str, str]]:
    wanted = target.lower()
    found = []
    for vnet in world.of_type(VNET_TYPE):
        for subnet in vnet["properties"].get("subnets") or []:
            if str((subnet["properties"].get(key) or {}).get("id", "")).lower() == wanted:
                found.append({"id": str(subnet["id"])})
    return found


def render_nsg(world: World, obj: Obj, expand: bool) -> None:
    wanted = str(obj["id"]).lower()
    nics = [
        {"id": str(nic["id"])}
        for nic in world.of_type(NIC_TYPE)
        if str((nic["properties"].get("networkSecurityGroup") or {}).get("id", "")).lower()
        == wanted
    ]
    if nics:
        obj["properties"]["networkInterfaces"] = nics
    subnets = _subnets_using(world, "networkSecurityGroup", obj["id"])
    if subnets:
        obj["properties"]["subnets"] = subnets


def prepare_route_table(world: World, obj: Obj, old: Obj | None) -> None:
    obj["properties"].setdefault("disableBgpRoutePropagation", False)
    obj["properties"].pop("subnets", None)
    for route in obj["properties"]["routes"]:
        props = route["properties"]
        if not props.get("addressPrefix") or not props.get("nextHopType"):
            raise ArmError(
                400,
                "InvalidRequestFormat",
                f"Route {route['id']} needs an addressPrefix and a nextHopType.",
            )
        if props["nextHopType"] == "VirtualAppliance" and not props.get("nextHopIpAddress"):
            raise ArmError(
                400,
                "VirtualApplianceNextHopIpAddressMissing",
                f"Route {route['id']} has next hop type VirtualAppliance but no next hop IP "
                "address.",
            )
        props.setdefault("hasBgpOverride", False)


def render_route_table(world: World, obj: Obj, expand: bool) -> None:
    subnets = _subnets_using(world, "routeTable", obj["id"])
    if subnets:
        obj["properties"]["subnets"] = subnets


def _used_subnets(world: World) -> dict[str, str]:
    """Subnet id (lower) -> the first IP configuration in it."""
    used: dict[str, str] = {}
    for ipc_id, props in ip_configurations(world):
        subnet = str((props.get("subnet") or {}).get("id", "")).lower()
        if subnet:
            used.setdefault(subnet, ipc_id)
    return used


def _in_use(subnet_id: str, user: str) -> ArmError:
    name = subnet_id.rsplit("/", 1)[-1]
    return ArmError(
        400,
        "InUseSubnetCannotBeDeleted",
        f"Subnet {name} is in use by {user} and cannot be deleted. In order to delete the "
        "subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.",
    )


def prepare_vnet(world: World, obj: Obj, old: Obj | None) -> None:
    obj["properties"].setdefault("addressSpace", {"addressPrefixes": []})
    obj["properties"].setdefault("virtualNetworkPeerings", [])
    obj["properties"].setdefault("enableDdosProtection", False)
    obj["properties"].setdefault("privateEndpointVNetPolicies", "Disabled")
    for subnet in obj["properties"]["subnets"]:
        props = subnet["properties"]
        for key in ("networkSecurityGroup", "routeTable", "natGateway"):
            found = check_ref(world, props.get(key), str(subnet["id"]))
            if found is None:
                props.pop(key, None)
            else:
                props[key] = found
        props.pop("ipConfigurations", None)
        props.setdefault("delegations", [])
        props.setdefault("privateEndpointNetworkPolicies", "Disabled")
        props.setdefault("privateLinkServiceNetworkPolicies", "Enabled")
    if old is not None:
        kept = {str(s["id"]).lower() for s in obj["properties"]["subnets"]}
        for subnet, user in _used_subnets(world).items():
            if subnet.startswith(str(old["id"]).lower() + "/") and subnet not in kept:
                raise _in_use(subnet, user)


def check_delete_vnet(world: World, obj: Obj) -> None:
    for subnet, user in _used_subnets(world).items():
        if subnet.startswith(str(obj["id"]).lower() + "/"):
            raise _in_use(subnet, user)
