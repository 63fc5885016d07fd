"""The answers the spec check validates: the emulator driven through every resource kind and
call kccm's provider and upstream v1.36.5 make, at the API versions they send, each answer kept
under a name (``exercise``)."""

from __future__ import annotations

from typing import Any

from azure_api import COMPUTE, NET, Answer, Api

from kccm.emulators.azure.seed import add_vm, add_vmss

LB = f"{NET}/loadBalancers/kubernetes"
ILB = f"{NET}/loadBalancers/kubernetes-internal"
PIP = f"{NET}/publicIPAddresses/kubernetes-a1"
NSG = f"{NET}/networkSecurityGroups/kccm-nsg"
RT = f"{NET}/routeTables/kccm-rt"
VNET = f"{NET}/virtualNetworks/kccm-vnet"
NIC = f"{NET}/networkInterfaces/node-0-nic"
VM = f"{COMPUTE}/virtualMachines/node-0"
VMSS = f"{COMPUTE}/virtualMachineScaleSets/pool0"


def _lb_body(frontend: dict[str, Any], lb: str, probe: dict[str, Any]) -> dict[str, Any]:
    """A balancer as upstream writes one: a frontend, the ``kubernetes`` pool, a probe and a
    rule, all named from the Service (azure_loadbalancer.go, v1.36.5)."""
    rule = {
        "protocol": "Tcp",
        "frontendPort": 80,
        "backendPort": 80,
        "frontendIPConfiguration": {"id": f"{lb}/frontendIPConfigurations/a1"},
        "backendAddressPool": {"id": f"{lb}/backendAddressPools/kubernetes"},
        "probe": {"id": f"{lb}/probes/a1-TCP-80"},
        "enableFloatingIP": True,
        "idleTimeoutInMinutes": 4,
        "loadDistribution": "Default",
        "disableOutboundSnat": False,
        "enableTcpReset": True,
    }
    return {
        "location": "eastus",
        "sku": {"name": "Standard"},
        "tags": {"k8s-azure-cluster-name": "kubernetes"},
        "properties": {
            "frontendIPConfigurations": [{"name": "a1", "properties": frontend}],
            "backendAddressPools": [{"name": "kubernetes"}],
            "probes": [{"name": "a1-TCP-80", "properties": probe}],
            "loadBalancingRules": [{"name": "a1-TCP-80", "properties": rule}],
        },
    }


async def _network(api: Api, got: dict[str, Answer]) -> None:
    pip = {
        "location": "eastus",
        "sku": {"name": "Standard", "tier": "Regional"},
        "tags": {"k8s-azure-service": "default/web"},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
    }
    got["pip PUT"] = await api.call("PUT", PIP, pip)
    got["pip GET"] = await api.call("GET", PIP)
    got["pip list"] = await api.call("GET", f"{NET}/publicIPAddresses")
    tcp = {"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5, "probeThreshold": 2}
    got["lb PUT"] = await api.call(
        "PUT", LB, _lb_body({"publicIPAddress": {"id": pip_id(got)}}, LB, tcp)
    )
    got["lb GET"] = await api.call("GET", LB)
    got["lb pool GET"] = await api.call("GET", f"{LB}/backendAddressPools/kubernetes")
    http = {**tcp, "protocol": "Http", "requestPath": "/healthz", "numberOfProbes": 2}
    subnet = {
        "subnet": {"id": f"{VNET}/subnets/kccm-subnet"},
        "privateIPAllocationMethod": "Dynamic",
    }
    got["internal lb PUT"] = await api.call("PUT", ILB, _lb_body(subnet, ILB, http))
    got["lb list"] = await api.call("GET", f"{NET}/loadBalancers")
    nic = (await api.call("GET", NIC)).body
    nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] = [
        {"id": f"{LB}/backendAddressPools/kubernetes"}
    ]
    got["nic PUT"] = await api.call("PUT", NIC, nic, headers={"If-Match": nic["etag"]})
    got["nic GET"] = await api.call("GET", NIC)
    got["nic list"] = await api.call("GET", f"{NET}/networkInterfaces")
    got["lb GET with members"] = await api.call("GET", LB)
    await _security_and_routes(api, got)


async def _security_and_routes(api: Api, got: dict[str, Answer]) -> None:
    nsg = (await api.call("GET", NSG)).body
    nsg["properties"]["securityRules"] = [
        {
            "name": "k8s-azure-lb_allow_IPv4_1",
            "properties": {
                "protocol": "Tcp",
                "access": "Allow",
                "direction": "Inbound",
                "priority": 500,
                "sourceAddressPrefixes": ["10.0.0.0/8"],
                "sourcePortRange": "*",
                "destinationAddressPrefix": "20.60.0.1",
                "destinationPortRanges": ["80", "443"],
            },
        }
    ]
    got["nsg PUT"] = await api.call("PUT", NSG, nsg, headers={"If-Match": nsg["etag"]})
    got["nsg GET"] = await api.call("GET", NSG)
    got["nsg rule GET"] = await api.call("GET", f"{NSG}/securityRules/k8s-azure-lb_allow_IPv4_1")
    table = (await api.call("GET", RT)).body
    table["properties"]["routes"] = [
        {
            "name": "node-0____10244024",
            "properties": {
                "addressPrefix": "10.244.0.0/24",
                "nextHopType": "VirtualAppliance",
                "nextHopIpAddress": "10.240.0.4",
            },
        }
    ]
    got["route table PUT"] = await api.call("PUT", RT, table, headers={"If-Match": table["etag"]})
    got["route table GET"] = await api.call("GET", RT)
    got["route GET"] = await api.call("GET", f"{RT}/routes/node-0____10244024")
    got["vnet GET"] = await api.call("GET", VNET)
    got["subnet GET"] = await api.call("GET", f"{VNET}/subnets/kccm-subnet")


async def _compute(api: Api, got: dict[str, Answer]) -> None:
    """What kccm and upstream read and write on Microsoft.Compute (azure-surface: 4.2, 4.9,
    4.10): VMs with and without their instance view, lists (with the scale-set filter), the
    availability set, scale sets, their instances and the partial scale set / instance PUTs."""
    got["vm GET"] = await api.call("GET", VM)
    got["vm GET instanceView"] = await api.call("GET", f"{VM}?$expand=instanceView")
    got["vm instanceView GET"] = await api.call("GET", f"{VM}/instanceView")
    got["vm list"] = await api.call("GET", f"{COMPUTE}/virtualMachines")
    flt = "$filter='virtualMachineScaleSet/id' eq 'notexists'"
    got["vm list filtered"] = await api.call("GET", f"{COMPUTE}/virtualMachines?{flt}")
    got["availability set GET"] = await api.call("GET", f"{COMPUTE}/availabilitySets/as1")
    got["vmss GET"] = await api.call("GET", VMSS)
    got["vmss list"] = await api.call("GET", f"{COMPUTE}/virtualMachineScaleSets")
    vms = f"{VMSS}/virtualMachines"
    got["vmss vm list"] = await api.call("GET", f"{vms}?$expand=instanceView")
    got["vmss vm GET"] = await api.call("GET", f"{vms}/0")
    vmss = got["vmss GET"].body
    configs = vmss["properties"]["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"
    ]
    pool = {"id": f"{LB}/backendAddressPools/kubernetes"}
    configs[0]["properties"]["ipConfigurations"][0]["properties"][
        "loadBalancerBackendAddressPools"
    ] = [pool]
    partial = {  # what upstream's ensureVMSSInPool sends
        "location": "eastus",
        "etag": vmss["etag"],
        "properties": {
            "virtualMachineProfile": {"networkProfile": {"networkInterfaceConfigurations": configs}}
        },
    }
    got["vmss PUT"] = await api.call("PUT", VMSS, partial, headers={"If-Match": vmss["etag"]})
    vm = got["vmss vm GET"].body
    instance = {  # the instance joins the pool as upstream's UpdateVMSSVMsInBatch asks
        "location": "eastus",
        "etag": vm["etag"],
        "properties": {"networkProfileConfiguration": {"networkInterfaceConfigurations": configs}},
    }
    got["vmss vm PUT"] = await api.call(
        "PUT", f"{vms}/0", instance, headers={"If-Match": vm["etag"]}
    )


async def _vmss_network(api: Api, got: dict[str, Answer]) -> None:
    """The scale-set NIC and public IP reads upstream makes at 2018-10-01 (armnetwork's
    older pin for them), after an instance joined a pool."""
    old = {"version": "2018-10-01"}
    nic = f"{VMSS}/virtualMachines/0/networkInterfaces/pool0"
    got["vmss nic GET"] = await api.call("GET", nic, **old)
    got["vmss vm nic list"] = await api.call(
        "GET", f"{VMSS}/virtualMachines/0/networkInterfaces", **old
    )
    got["vmss nic list"] = await api.call("GET", f"{VMSS}/networkInterfaces", **old)
    pip = f"{nic}/ipConfigurations/ipconfig1/publicIPAddresses/pub1"
    got["vmss pip GET"] = await api.call("GET", pip, **old)
    got["vmss pip list"] = await api.call("GET", f"{VMSS}/publicIPAddresses", **old)


async def _errors(api: Api, got: dict[str, Answer]) -> None:
    stale = {"If-Match": '"0"'}
    got["network 404"] = await api.call("GET", f"{NET}/loadBalancers/absent")
    got["network 400 api-version"] = await api.call("GET", LB, version="1999-01-01")
    got["network 412"] = await api.call("PUT", NSG, {"location": "eastus"}, headers=stale)
    got["compute 404"] = await api.call("GET", f"{COMPUTE}/virtualMachines/absent")
    got["compute 400 api-version"] = await api.call("GET", VM, version="1999-01-01")
    got["compute 412"] = await api.call("PUT", VMSS, {"location": "eastus"}, headers=stale)


async def _operations(api: Api, got: dict[str, Answer]) -> None:
    """Status bodies of a finished and of a running network operation."""
    api.world.lro_delay = 30.0
    put = await api.call(
        "PUT", PIP, {"location": "eastus", "sku": {"name": "Standard"}, "properties": {}}
    )
    op = put.headers["Azure-AsyncOperation"].split("/subscriptions/", 1)[1]
    got["network operation running"] = await api.call("GET", f"/subscriptions/{op}", version="")
    api.clock.now += 60
    got["network operation done"] = await api.call("GET", f"/subscriptions/{op}", version="")
    api.world.lro_delay = 0.0


def pip_id(got: dict[str, Answer]) -> str:
    return str(got["pip PUT"].body["id"])


async def exercise(api: Api) -> dict[str, Answer]:
    """Every answer the spec check looks at, by name."""
    add_vm(api.world, {"name": "node-0", "availability_set": "as1", "public_ip": True})
    add_vm(api.world, {"name": "node-1", "zone": "1"})
    add_vmss(
        api.world,
        {
            "name": "pool0",
            "capacity": 2,
            "zones": ["1"],
            "public_ip": True,
            "power_states": ["running", "deallocated"],
        },
    )
    got: dict[str, Answer] = {}
    await _network(api, got)
    await _compute(api, got)
    await _vmss_network(api, got)
    await _errors(api, got)
    await _operations(api, got)
    return got
