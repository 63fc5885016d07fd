"""Microsoft.Network's load balancers: frontends (a public IP, or a subnet and a private
address), backend pools, probes and load-balancing rules inline, each with its own id.

A rule's frontend, pool and probe must be the balancer's own (``InvalidResourceReference``);
a frontend's public IP and subnet must exist. On read, a pool lists the IP configurations that
joined it (``backendIPConfigurations``: NICs and scale-set instances), and frontends, pools and
probes the rules that use them. A pool in use by a NIC or a scale set cannot be removed by a
PUT; a balancer whose pools a scale set uses cannot be deleted, while deleting one NICs use
drops their references, as ARM does. Shapes: azure-rest-api-specs ``loadBalancer.json``, as
recorded in cloud-provider-azure v1.36.5 ``pkg/azclient/loadbalancerclient/testdata``.
"""

from __future__ import annotations

from kccm.emulators.azure.addresses import allocate_private_ip, check_private_ip, ip_configurations
from kccm.emulators.azure.errors import ArmError, invalid_reference
from kccm.emulators.azure.network import address_dynamic_ip, check_ref
from kccm.emulators.azure.world import Obj, World

__all__ = ["LB_CHILDREN", "check_delete_lb", "deleted_lb", "prepare_lb", "render_lb"]

LB_CHILDREN = (
    "frontendIPConfigurations",
    "backendAddressPools",
    "loadBalancingRules",
    "probes",
    "inboundNatRules",
    "inboundNatPools",
    "outboundRules",
)
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
NIC_TYPE = "Microsoft.Network/networkInterfaces"


def _own(obj: Obj, prop: str) -> set[str]:
    return {str(item["id"]).lower() for item in obj["properties"].get(prop) or []}


def _prepare_frontend(world: World, lb: Obj, fe: Obj, old: dict[str, Obj], taken: set[str]) -> None:
    props = fe["properties"]
    for key in ("publicIPAddress", "subnet", "publicIPPrefix"):
        found = check_ref(world, props.get(key), str(lb["id"]))
        if found is None:
            props.pop(key, None)
        else:
            props[key] = found
    for key in ("loadBalancingRules", "inboundNatRules", "outboundRules", "inboundNatPools"):
        props.pop(key, None)
    if props.get("publicIPAddress"):
        _same_sku(world, lb, props["publicIPAddress"]["id"])
        address_dynamic_ip(world, props["publicIPAddress"]["id"])
        props.pop("privateIPAddress", None)
        props["privateIPAllocationMethod"] = "Dynamic"
        return
    subnet = (props.get("subnet") or {}).get("id", "")
    if not subnet:
        return
    props.setdefault("privateIPAllocationMethod", "Dynamic")
    props.setdefault("privateIPAddressVersion", "IPv4")
    before = (old.get(fe["name"].lower()) or {}).get("properties") or {}
    if props["privateIPAllocationMethod"] == "Static" and props.get("privateIPAddress"):
        check_private_ip(
            world, subnet, props["privateIPAddress"], skip=str(lb["id"]), owner=fe["id"]
        )
    elif (
        before.get("privateIPAddress")
        and (before.get("subnet") or {}).get("id", "").lower() == subnet.lower()
    ):
        props["privateIPAddress"] = before["privateIPAddress"]
    else:
        props["privateIPAddress"] = allocate_private_ip(
            world, subnet, skip=str(lb["id"]), also=taken, version=props["privateIPAddressVersion"]
        )
    taken.add(str(props["privateIPAddress"]))


def _same_sku(world: World, lb: Obj, pip_id: str) -> None:
    """A balancer references public IPs of its own SKU only (``PublicIPAndLBSkuDoNotMatch``)."""
    pip = world.get(pip_id)
    lb_sku = str((lb.get("sku") or {}).get("name", "Basic"))
    pip_sku = str(((pip or {}).get("sku") or {}).get("name", "Basic"))
    if pip is not None and lb_sku.lower() != pip_sku.lower():
        raise ArmError(
            400,
            "PublicIPAndLBSkuDoNotMatch",
            f"{lb_sku} sku load balancer {lb['id']} cannot reference {pip_sku} sku publicIP "
            f"{pip['id']}.",
        )


def _own_ref(lb: Obj, value: object, own: set[str], source: str) -> dict[str, str] | None:
    if not isinstance(value, dict) or not value.get("id"):
        return None
    if str(value["id"]).lower() not in own:
        raise invalid_reference(str(value["id"]), source)
    return {"id": str(value["id"])}


def _prepare_rule(lb: Obj, rule: Obj) -> None:
    props = rule["properties"]
    source = str(rule["id"])
    for key, prop in (
        ("frontendIPConfiguration", "frontendIPConfigurations"),
        ("backendAddressPool", "backendAddressPools"),
        ("probe", "probes"),
    ):
        found = _own_ref(lb, props.get(key), _own(lb, prop), source)
        if found is None:
            props.pop(key, None)
        else:
            props[key] = found
    pools = [
        _own_ref(lb, p, _own(lb, "backendAddressPools"), source)
        for p in props.get("backendAddressPools") or []
    ]
    props["backendAddressPools"] = [p for p in pools if p is not None]
    if "frontendIPConfiguration" not in props:
        raise ArmError(
            400,
            "LoadBalancingRuleMustReferenceFrontendIPConfiguration",
            f"Load balancing rule {source} must reference a frontend IP configuration.",
        )
    props.setdefault("idleTimeoutInMinutes", 4)
    props.setdefault("enableFloatingIP", False)
    props.setdefault("loadDistribution", "Default")
    props.setdefault("disableOutboundSnat", False)
    props.setdefault("enableTcpReset", False)


def prepare_lb(world: World, obj: Obj, old: Obj | None) -> None:
    obj.setdefault("sku", {"name": "Basic", "tier": "Regional"})
    obj["sku"].setdefault("tier", "Regional")
    old_fes = {
        str(f["name"]).lower(): f
        for f in ((old or {}).get("properties") or {}).get("frontendIPConfigurations") or []
    }
    taken: set[str] = set()
    for fe in obj["properties"]["frontendIPConfigurations"]:
        _prepare_frontend(world, obj, fe, old_fes, taken)
    for pool in obj["properties"]["backendAddressPools"]:
        for key in (
            "backendIPConfigurations",
            "loadBalancingRules",
            "outboundRule",
            "outboundRules",
        ):
            pool["properties"].pop(key, None)
        pool["properties"].setdefault("loadBalancerBackendAddresses", [])
    for probe in obj["properties"]["probes"]:
        probe["properties"].pop("loadBalancingRules", None)
        probe["properties"].setdefault("intervalInSeconds", 5)
        probe["properties"].setdefault("numberOfProbes", 2)
        probe["properties"].setdefault("probeThreshold", 1)
    for rule in obj["properties"]["loadBalancingRules"]:
        _prepare_rule(obj, rule)
    if old is not None:
        _check_pools_kept(world, old, obj)


def _pool_users(world: World, pool_ids: set[str]) -> dict[str, str]:
    """Pool id (lower) -> the first IP configuration or scale set using it."""
    users: dict[str, str] = {}
    for ipc_id, props in ip_configurations(world):
        owner = (
            ipc_id.split("/virtualMachines/")[0]
            if "/virtualMachineScaleSets/" in ipc_id
            else ipc_id
        )
        for pool in props.get("loadBalancerBackendAddressPools") or []:
            key = str(pool.get("id", "")).lower()
            if key in pool_ids:
                users.setdefault(key, owner)
    for vmss in world.of_type(VMSS_TYPE):
        profile = (
            (vmss["properties"].get("virtualMachineProfile") or {}).get("networkProfile")
        ) or {}
        for config in profile.get("networkInterfaceConfigurations") or []:
            for ipc in (config.get("properties") or {}).get("ipConfigurations") or []:
                for pool in (ipc.get("properties") or {}).get(
                    "loadBalancerBackendAddressPools"
                ) or []:
                    key = str(pool.get("id", "")).lower()
                    if key in pool_ids:
                        users.setdefault(key, str(vmss["id"]))
    return users


def _in_use_error(lb: Obj, pool: str, user: str) -> ArmError:
    if "/virtualmachinescalesets/" in user.lower():
        return ArmError(
            400,
            "LoadBalancerInUseByVirtualMachineScaleSet",
            f"Cannot delete load balancer {lb['id']} since its child resources {pool} are in use "
            f"by virtual machine scale set {user}.",
        )
    return ArmError(
        400,
        "InUseBackendAddressPoolCannotBeDeleted",
        f"Backend address pool {pool} is in use by {user} and cannot be deleted.",
    )


def _check_pools_kept(world: World, old: Obj, new: Obj) -> None:
    removed = _own(old, "backendAddressPools") - _own(new, "backendAddressPools")
    for pool, user in _pool_users(world, removed).items():
        raise _in_use_error(old, pool, user)


def check_delete_lb(world: World, obj: Obj) -> None:
    """A balancer whose pools a scale set uses is not deleted (upstream parses the scale set
    out of ARM's message, ``errutils.GetVMSSMetadataByRawError``); NICs do not hold it."""
    for pool, user in _pool_users(world, _own(obj, "backendAddressPools")).items():
        if "/virtualmachinescalesets/" in user.lower():
            raise _in_use_error(obj, pool, user)


def deleted_lb(world: World, obj: Obj) -> None:
    """ARM drops the NICs' references to a deleted balancer's pools (upstream's
    ``cleanOrphanedLoadBalancer`` relies on it for availability sets)."""
    prefix = str(obj["id"]).lower() + "/"
    for nic in world.of_type(NIC_TYPE):
        changed = False
        for ipc in nic["properties"].get("ipConfigurations") or []:
            pools = ipc["properties"].get("loadBalancerBackendAddressPools") or []
            kept = [p for p in pools if not str(p.get("id", "")).lower().startswith(prefix)]
            if len(kept) != len(pools):
                ipc["properties"]["loadBalancerBackendAddressPools"] = kept
                changed = True
        if changed:
            nic["etag"] = world.network_etag()
            for child in nic["properties"]["ipConfigurations"]:
                child["etag"] = nic["etag"]


def render_lb(world: World, obj: Obj, expand: bool) -> None:
    props = obj["properties"]
    members: dict[str, list[dict[str, str]]] = {}
    for ipc_id, ipc in ip_configurations(world):
        for pool in ipc.get("loadBalancerBackendAddressPools") or []:
            members.setdefault(str(pool.get("id", "")).lower(), []).append({"id": ipc_id})
    users: dict[str, list[dict[str, str]]] = {}
    for rule in props.get("loadBalancingRules") or []:
        rprops = rule["properties"]
        targets = [rprops.get("frontendIPConfiguration"), rprops.get("probe")]
        targets += [rprops.get("backendAddressPool"), *(rprops.get("backendAddressPools") or [])]
        for target in targets:
            if target:
                users.setdefault(str(target["id"]).lower(), []).append({"id": rule["id"]})
    for prop in ("frontendIPConfigurations", "backendAddressPools", "probes"):
        for item in props.get(prop) or []:
            rules = users.get(str(item["id"]).lower())
            if rules:
                item["properties"]["loadBalancingRules"] = _unique(rules)
    for pool in props.get("backendAddressPools") or []:
        joined = members.get(str(pool["id"]).lower())
        if joined:
            pool["properties"]["backendIPConfigurations"] = joined


def _unique(refs: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for item in refs:
        seen.setdefault(item["id"].lower(), item)
    return list(seen.values())
