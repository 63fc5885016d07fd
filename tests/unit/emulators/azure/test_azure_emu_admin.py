"""The emulator's own API: seeding, power, deletion, the leak check's state, settling pending
operations; and upstream's azure.json and environment file."""

from __future__ import annotations

import json
from pathlib import Path

from azure_api import COMPUTE, NET, Api

from kccm.emulators import leaked
from kccm.emulators.azure.admin import config, state
from kccm.emulators.azure.cloudfiles import write_cloud_files
from kccm.emulators.azure.seed import add_vm, add_vmss, delete_vm


async def admin(api: Api, method: str, path: str, body: object = None) -> object:
    async with api.client.request(method, path, json=body) as response:
        assert response.status < 300, await response.text()
        return await response.json() if response.status != 204 else None


async def test_seeding_and_removing_leaves_the_state_as_it_was(api: Api) -> None:
    baseline = state(api.world)
    vm = await admin(
        api, "POST", "/_emu/vms", {"name": "node-0", "public_ip": True, "availability_set": "as1"}
    )
    await admin(api, "POST", "/_emu/vmss", {"name": "pool0", "capacity": 2})
    grown = leaked(state(api.world), baseline)
    assert set(grown) == {
        "virtualMachines",
        "networkInterfaces",
        "publicIPAddresses",
        "availabilitySets",
        "virtualMachineScaleSets",
        "scaleSetInstances",
    }
    assert isinstance(vm, dict)
    await admin(api, "POST", "/_emu/delete-vm", {"id": vm["id"]})
    api.world.drop(f"{COMPUTE}/virtualMachineScaleSets/pool0")
    for instance in list(
        api.world.of_type("Microsoft.Compute/virtualMachineScaleSets/virtualMachines")
    ):
        api.world.drop(instance["id"])
    assert leaked(state(api.world), baseline) == {}


async def test_what_a_provider_changes_inside_seeded_resources_shows_in_the_state(api: Api) -> None:
    baseline = state(api.world)
    route = {
        "properties": {
            "addressPrefix": "10.244.1.0/24",
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": "10.240.0.4",
        }
    }
    await api.ok("PUT", f"{NET}/routeTables/kccm-rt/routes/node-0", route)
    assert leaked(state(api.world), baseline) == {
        "routes": ["kccm-rt/node-0: 10.244.1.0/24 -> 10.240.0.4"]
    }


async def test_power_and_deletion_through_the_admin_api(api: Api) -> None:
    vm = add_vm(api.world, {"name": "node-0"})
    await admin(api, "PUT", "/_emu/power", {"id": vm["id"], "state": "deallocated"})
    view = await api.ok("GET", f"{COMPUTE}/virtualMachines/node-0/instanceView")
    assert view["statuses"][1]["code"] == "PowerState/deallocated"
    delete_vm(api.world, vm["id"])
    assert (await api.call("GET", f"{COMPUTE}/virtualMachines/node-0")).status == 404


async def test_settle_finishes_pending_operations(api: Api) -> None:
    api.world.lro_delay = 600
    await api.ok("PUT", f"{NET}/publicIPAddresses/a", {"location": "eastus", "properties": {}})
    assert state(api.world)["pendingOperations"]
    assert (await admin(api, "POST", "/_emu/settle")) == {"settled": 1}
    assert state(api.world)["pendingOperations"] == []


async def test_a_scale_set_instance_is_deleted_from_its_set(api: Api) -> None:
    vmss = add_vmss(api.world, {"name": "pool0", "capacity": 2})
    delete_vm(api.world, vmss["instances"][0]["id"])
    assert (await api.ok("GET", f"{COMPUTE}/virtualMachineScaleSets/pool0"))["sku"]["capacity"] == 1


def test_upstreams_files_point_at_the_emulator(tmp_path: Path) -> None:
    from kccm.emulators.azure.world import World

    conf = {**config(World(base_url="https://127.0.0.1:4443")), "tenant": "adfs"}
    files = write_cloud_files(tmp_path, conf, "/ca.pem", vmType="vmss", useInstanceMetadata=None)
    found = json.loads(files.azure_json.read_text())
    assert found["cloud"] == "AzureStackCloud"
    assert found["disableAzureStackCloud"] is True
    assert (found["tenantId"], found["vmType"]) == ("adfs", "vmss")
    assert "useInstanceMetadata" not in found
    environment = json.loads(files.environment_file.read_text())
    assert environment["resourceManagerEndpoint"] == "https://127.0.0.1:4443/"
    assert environment["activeDirectoryEndpoint"] == "https://127.0.0.1:4443/"
    assert environment["tokenAudience"] == "https://127.0.0.1:4443"
    assert files.env == {
        "AZURE_ENVIRONMENT_FILEPATH": str(files.environment_file),
        "SSL_CERT_FILE": "/ca.pem",
        "REQUESTS_CA_BUNDLE": "/ca.pem",
    }


async def test_many_vms_are_seeded_in_one_call(api: Api) -> None:
    specs = [{"name": f"node-{i}", "availability_set": "as1"} for i in range(3)]
    made = await admin(api, "POST", "/_emu/vms/bulk", {"vms": specs})
    assert isinstance(made, dict)
    assert [i.rsplit("/", 1)[1] for i in made["ids"]] == [
        "node-0",
        "node-1",
        "node-2",
    ]
    listed = await api.ok("GET", f"{COMPUTE}/virtualMachines")
    assert len(listed["value"]) == 3


async def test_the_state_is_read_after_due_operations_complete(api: Api) -> None:
    api.world.lro_delay = 5
    await api.ok("PUT", f"{NET}/publicIPAddresses/a", {"location": "eastus", "properties": {}})
    await api.call("DELETE", f"{NET}/publicIPAddresses/a")
    api.clock.now += 5
    found = await admin(api, "GET", "/_emu/state")
    assert isinstance(found, dict)
    assert (found["publicIPAddresses"], found["pendingOperations"]) == ([], [])
