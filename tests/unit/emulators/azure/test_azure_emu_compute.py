"""Microsoft.Compute: VMs with their instance view and power, scale sets, their instances and
the instances' NICs, pool membership through the model or an instance."""

from __future__ import annotations

from typing import Any

import pytest
from azure_api import COMPUTE, NET, Api

from kccm.emulators.azure.seed import add_vm, add_vmss, delete_vm, set_power

VMSS = f"{COMPUTE}/virtualMachineScaleSets/pool0"
VMSS_NIC_V = "2018-10-01"  # the network versions upstream sends on scale-set NIC paths


def power_of(view: dict[str, Any]) -> str:
    return next(s["code"] for s in view["statuses"] if s["code"].startswith("PowerState/"))


@pytest.mark.parametrize("state", ["running", "stopped", "deallocated"])
async def test_a_vms_instance_view_says_its_power_state(api: Api, state: str) -> None:
    add_vm(api.world, {"name": "node-0", "availability_set": "as1", "fault_domain": 1})
    set_power(api.world, f"{COMPUTE}/virtualMachines/node-0", state)
    got = await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0?$expand=instanceView")
    view = got["properties"]["instanceView"]
    assert power_of(view) == f"PowerState/{state}"
    assert view["platformFaultDomain"] == 1
    assert power_of(await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0/instanceView")) == (
        f"PowerState/{state}"
    )
    plain = await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0")
    assert "instanceView" not in plain["properties"]


async def test_a_seeded_vm_has_its_nic_public_ip_and_availability_set(api: Api) -> None:
    add_vm(api.world, {"name": "node-0", "availability_set": "as1", "public_ip": True})
    vm = await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0")
    assert vm["properties"]["availabilitySet"]["id"].endswith("/availabilitySets/as1")
    nic = await api.ok("GET", vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"])
    assert nic["properties"]["virtualMachine"]["id"] == vm["id"]
    pip_id = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"]
    assert (await api.ok("GET", pip_id))["properties"]["ipAddress"]
    aset = await api.ok("GET", f"{COMPUTE}/availabilitySets/as1")
    assert aset["properties"]["virtualMachines"] == [{"id": vm["id"]}]


async def test_a_deleted_vm_takes_what_was_seeded_with_it(api: Api) -> None:
    add_vm(api.world, {"name": "node-0", "public_ip": True})
    delete_vm(api.world, f"{COMPUTE}/virtualMachines/node-0")
    for path in ("virtualMachines/node-0",):
        assert (await api.call("GET", f"{COMPUTE}/{path}")).status == 404
    assert (await api.call("GET", f"{NET}/networkInterfaces/node-0-nic")).status == 404
    assert not api.world.public_ips


async def test_power_actions(api: Api) -> None:
    add_vm(api.world, {"name": "node-0"})
    answer = await api.call("POST", f"{COMPUTE}/virtualMachines/node-0/deallocate")
    assert answer.status == 202
    assert answer.headers["Azure-AsyncOperation"]
    view = await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0/instanceView")
    assert power_of(view) == "PowerState/deallocated"


async def test_vm_list_filters_out_scale_set_vms(api: Api) -> None:
    add_vm(api.world, {"name": "node-0"})
    path = f"{COMPUTE}/virtualMachines?$filter='virtualMachineScaleSet/id' eq 'notexists'"
    found = await api.ok("GET", path)
    assert [v["name"] for v in found["value"]] == ["node-0"]


async def test_scale_set_instances_and_their_nics(api: Api) -> None:
    add_vmss(
        api.world,
        {
            "name": "pool0",
            "capacity": 3,
            "zones": ["1", "2"],
            "power_states": ["running", "deallocated"],
        },
    )
    listed = await api.ok("GET", f"{VMSS}/virtualMachines?$expand=instanceView")
    vms = listed["value"]
    assert [v["instanceId"] for v in vms] == ["0", "1", "2"]
    assert [v["zones"] for v in vms] == [["1"], ["2"], ["1"]]
    assert [v["properties"]["osProfile"]["computerName"] for v in vms] == [
        "pool0000000",
        "pool0000001",
        "pool0000002",
    ]
    assert power_of(vms[1]["properties"]["instanceView"]) == "PowerState/deallocated"
    nics = await api.ok(
        "GET",
        f"{VMSS}/virtualMachines/1/networkInterfaces".replace(
            "Microsoft.Compute", "microsoft.Compute"
        ),
        version=VMSS_NIC_V,
    )
    ipc = nics["value"][0]["properties"]["ipConfigurations"][0]
    assert ipc["properties"]["privateIPAddress"] == "10.240.0.5"
    assert nics["value"][0]["properties"]["virtualMachine"]["id"] == vms[1]["id"]
    one = await api.ok(
        "GET", f"{VMSS}/virtualMachines/1/networkInterfaces/pool0", version=VMSS_NIC_V
    )
    assert one["id"] == nics["value"][0]["id"]
    every = await api.ok("GET", f"{VMSS}/networkInterfaces", version=VMSS_NIC_V)
    assert len(every["value"]) == 3


async def make_pool(api: Api) -> str:
    pip = {"location": "eastus", "sku": {"name": "Standard"}, "properties": {}}
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", pip)
    lb = {
        "location": "eastus",
        "sku": {"name": "Standard"},
        "properties": {
            "frontendIPConfigurations": [
                {"name": "fe", "properties": {"publicIPAddress": {"id": made["id"]}}}
            ],
            "backendAddressPools": [{"name": "kubernetes"}],
        },
    }
    await api.ok("PUT", f"{NET}/loadBalancers/kubernetes", lb)
    return f"{NET}/loadBalancers/kubernetes/backendAddressPools/kubernetes"


async def test_a_model_change_reaches_instances_on_manual_upgrade(api: Api) -> None:
    add_vmss(api.world, {"name": "pool0", "capacity": 2})
    pool = await make_pool(api)
    vmss = await api.ok("GET", VMSS)
    ipc = vmss["properties"]["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"
    ][0]["properties"]["ipConfigurations"][0]
    ipc["properties"]["loadBalancerBackendAddressPools"] = [{"id": pool}]
    await api.ok("PUT", VMSS, vmss, headers={"If-Match": vmss["etag"]})
    before = await api.ok("GET", f"{VMSS}/virtualMachines/0")
    assert before["properties"]["latestModelApplied"] is False
    lb = await api.ok("GET", f"{NET}/loadBalancers/kubernetes")
    assert "backendIPConfigurations" not in lb["properties"]["backendAddressPools"][0]["properties"]
    answer = await api.call("POST", f"{VMSS}/manualupgrade", {"instanceIds": ["0"]})
    assert answer.status == 202
    after = await api.ok("GET", f"{VMSS}/virtualMachines/0")
    assert after["properties"]["latestModelApplied"] is True
    lb = await api.ok("GET", f"{NET}/loadBalancers/kubernetes")
    members = lb["properties"]["backendAddressPools"][0]["properties"]["backendIPConfigurations"]
    assert members == [
        {"id": f"{VMSS}/virtualMachines/0/networkInterfaces/pool0/ipConfigurations/ipconfig1"}
    ]
    gone = await api.call("DELETE", f"{NET}/loadBalancers/kubernetes")
    assert gone.body["error"]["code"] == "LoadBalancerInUseByVirtualMachineScaleSet"


async def test_an_instance_put_changes_its_own_profile(api: Api) -> None:
    add_vmss(api.world, {"name": "pool0", "capacity": 1})
    pool = await make_pool(api)
    vm = await api.ok("GET", f"{VMSS}/virtualMachines/0")
    config = vm["properties"]["networkProfileConfiguration"]["networkInterfaceConfigurations"][0]
    config["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] = [
        {"id": pool}
    ]
    stale = await api.call("PUT", f"{VMSS}/virtualMachines/0", vm, headers={"If-Match": '"0"'})
    assert stale.status == 412
    await api.ok("PUT", f"{VMSS}/virtualMachines/0", vm, headers={"If-Match": vm["etag"]})
    nic = await api.ok(
        "GET", f"{VMSS}/virtualMachines/0/networkInterfaces/pool0", version=VMSS_NIC_V
    )
    assert nic["properties"]["ipConfigurations"][0]["properties"][
        "loadBalancerBackendAddressPools"
    ] == [{"id": pool}]


async def test_a_deleted_instance_shrinks_its_scale_set(api: Api) -> None:
    add_vmss(api.world, {"name": "pool0", "capacity": 2})
    assert (await api.call("DELETE", f"{VMSS}/virtualMachines/1")).status == 202
    assert (await api.call("GET", f"{VMSS}/virtualMachines/1")).status == 404
    assert (await api.ok("GET", VMSS))["sku"]["capacity"] == 1


async def test_a_scale_set_put_grows_it(api: Api) -> None:
    add_vmss(api.world, {"name": "pool0", "capacity": 1})
    vmss = await api.ok("GET", VMSS)
    vmss["sku"]["capacity"] = 3
    await api.ok("PUT", VMSS, vmss)
    assert len((await api.ok("GET", f"{VMSS}/virtualMachines"))["value"]) == 3


@pytest.mark.parametrize(
    ("wanted", "names"),
    [
        pytest.param("notexists", ["node-0"], id="in-no-scale-set"),
        pytest.param("flex", ["flex-0"], id="in-the-flex-set"),
    ],
)
async def test_vm_lists_filter_on_their_scale_set(api: Api, wanted: str, names: list[str]) -> None:
    add_vm(api.world, {"name": "node-0"})
    flex = await api.ok(
        "PUT",
        f"{COMPUTE}/virtualMachineScaleSets/flex",
        {
            "location": "eastus",
            "sku": {"name": "Standard_D2s_v3", "capacity": 0},
            "properties": {"orchestrationMode": "Flexible"},
        },
    )
    nic = await api.ok("GET", f"{NET}/networkInterfaces/node-0-nic")
    await api.ok(
        "PUT",
        f"{NET}/networkInterfaces/flex-0-nic",
        {
            "location": "eastus",
            "properties": {
                "ipConfigurations": [
                    {
                        "name": "ipconfig1",
                        "properties": {
                            "subnet": nic["properties"]["ipConfigurations"][0]["properties"][
                                "subnet"
                            ]
                        },
                    }
                ]
            },
        },
    )
    await api.ok(
        "PUT",
        f"{COMPUTE}/virtualMachines/flex-0",
        {
            "location": "eastus",
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D2s_v3"},
                "virtualMachineScaleSet": {"id": flex["id"]},
                "networkProfile": {
                    "networkInterfaces": [{"id": f"{NET}/networkInterfaces/flex-0-nic"}]
                },
            },
        },
    )
    target = flex["id"] if wanted == "flex" else wanted
    query = f"$expand=instanceView&$filter='virtualMachineScaleSet/id' eq '{target}'"
    found = await api.ok("GET", f"{COMPUTE}/virtualMachines?{query}")
    assert [v["name"] for v in found["value"]] == names


async def test_scale_set_instances_with_public_ips(api: Api) -> None:
    vmss = add_vmss(api.world, {"name": "pool0", "capacity": 2, "public_ip": True})
    nic = await api.ok(
        "GET", f"{VMSS}/virtualMachines/1/networkInterfaces/pool0", version=VMSS_NIC_V
    )
    ref = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"]
    nic_id = f"{VMSS}/virtualMachines/1/networkInterfaces/pool0"
    assert ref == f"{nic_id}/ipConfigurations/ipconfig1/publicIPAddresses/pub1"
    pip = await api.ok("GET", ref, version=VMSS_NIC_V)
    assert pip["properties"]["ipAddress"] in api.world.public_ips
    listed = await api.ok("GET", f"{VMSS}/publicIPAddresses", version=VMSS_NIC_V)
    assert len(listed["value"]) == 2
    assert (await api.call("DELETE", vmss["instances"][0]["id"])).status == 202
    assert len(api.world.public_ips) == 1


async def test_a_partial_put_on_a_scale_set_updates_what_it_names(api: Api) -> None:
    add_vmss(api.world, {"name": "pool0", "capacity": 2})
    pool = await make_pool(api)
    vmss = await api.ok("GET", VMSS)
    configs = vmss["properties"]["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"
    ]
    configs[0]["properties"]["ipConfigurations"][0]["properties"][
        "loadBalancerBackendAddressPools"
    ] = [{"id": pool}]
    partial = {  # what upstream's ensureVMSSInPool sends: no sku, no upgrade policy
        "location": "eastus",
        "etag": vmss["etag"],
        "properties": {
            "virtualMachineProfile": {"networkProfile": {"networkInterfaceConfigurations": configs}}
        },
    }
    updated = await api.ok("PUT", VMSS, partial, headers={"If-Match": vmss["etag"]})
    assert updated["sku"] == vmss["sku"]
    assert updated["properties"]["upgradePolicy"] == vmss["properties"]["upgradePolicy"]
    ipc = updated["properties"]["virtualMachineProfile"]["networkProfile"][
        "networkInterfaceConfigurations"
    ][0]
    assert ipc["properties"]["ipConfigurations"][0]["properties"][
        "loadBalancerBackendAddressPools"
    ] == [{"id": pool}]
    assert len((await api.ok("GET", f"{VMSS}/virtualMachines"))["value"]) == 2
