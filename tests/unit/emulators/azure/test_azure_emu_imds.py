"""The instance metadata service: the header and version IMDS insists on, the instance and
load-balancer documents upstream reads, managed-identity tokens ARM takes, absolute-form
requests (a client using it as its HTTP proxy) and a listener per VM."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from azure_api import COMPUTE, NET, Api, imds_client

from kccm.emulators.azure.seed import add_vm, add_vmss

HEADERS = {"Metadata": "true"}
INSTANCE = "/metadata/instance?api-version=2021-10-01&format=json"


async def get(
    client: TestClient[Any, Any], path: str, headers: dict[str, str] = HEADERS
) -> tuple[int, Any]:
    async with client.get(path, headers=headers) as response:
        return response.status, await response.json()


@pytest.mark.parametrize(
    ("path", "headers", "message"),
    [
        pytest.param(INSTANCE, {}, "Required metadata header not specified", id="no-header"),
        pytest.param(
            "/metadata/instance", HEADERS, "api-version was not specified", id="no-version"
        ),
    ],
)
async def test_imds_refuses_what_imds_refuses(
    api: Api, path: str, headers: dict[str, str], message: str
) -> None:
    client = await imds_client(api)
    status, body = await get(client, path, headers)
    assert status == 400
    assert message in body["error"]


async def test_the_instance_document_of_a_vm(api: Api) -> None:
    vm = add_vm(api.world, {"name": "node-0", "zone": "2", "public_ip": True})
    api.world.imds_vm = vm["id"]
    status, body = await get(await imds_client(api), INSTANCE)
    assert status == 200
    compute = body["compute"]
    assert (compute["name"], compute["zone"], compute["vmSize"]) == (
        "node-0",
        "2",
        "Standard_D2s_v3",
    )
    assert compute["resourceId"] == vm["id"]
    assert compute["resourceGroupName"] == "kccm-rg"
    address = body["network"]["interface"][0]["ipv4"]["ipAddress"][0]
    assert address["privateIpAddress"] == "10.240.0.4"
    assert address["publicIpAddress"]
    assert body["network"]["interface"][0]["ipv4"]["subnet"] == [
        {"address": "10.240.0.0", "prefix": "16"}
    ]


async def test_the_instance_document_of_a_scale_set_instance(api: Api) -> None:
    vmss = add_vmss(api.world, {"name": "pool0", "capacity": 2})
    api.world.imds_vm = vmss["instances"][1]["id"]
    _, body = await get(await imds_client(api), INSTANCE)
    assert body["compute"]["vmScaleSetName"] == "pool0"
    assert body["compute"]["name"] == "pool0_1"


async def test_the_load_balancer_document_names_the_public_frontends(api: Api) -> None:
    vm = add_vm(api.world, {"name": "node-0"})
    api.world.imds_vm = vm["id"]
    pip = await api.ok(
        "PUT",
        f"{NET}/publicIPAddresses/a",
        {"location": "eastus", "sku": {"name": "Standard"}, "properties": {}},
    )
    lb = f"{NET}/loadBalancers/kubernetes"
    await api.ok(
        "PUT",
        lb,
        {
            "location": "eastus",
            "sku": {"name": "Standard"},
            "properties": {
                "frontendIPConfigurations": [
                    {"name": "fe", "properties": {"publicIPAddress": {"id": pip["id"]}}}
                ],
                "backendAddressPools": [{"name": "kubernetes"}],
            },
        },
    )
    nic = await api.ok("GET", f"{NET}/networkInterfaces/node-0-nic")
    nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"] = [
        {"id": f"{lb}/backendAddressPools/kubernetes"}
    ]
    await api.ok("PUT", f"{NET}/networkInterfaces/node-0-nic", nic)
    _, body = await get(
        await imds_client(api), "/metadata/loadbalancer?api-version=2020-10-01&format=json"
    )
    assert body["loadbalancer"]["publicIpAddresses"] == [
        {"frontendIpAddress": pip["properties"]["ipAddress"], "privateIpAddress": "10.240.0.4"}
    ]


async def test_a_managed_identity_token_opens_arm(api: Api) -> None:
    client = await imds_client(api)
    status, body = await get(
        client,
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/",
    )
    assert status == 200
    assert body["token_type"] == "Bearer"
    assert (
        await api.call("GET", f"{COMPUTE}/virtualMachines", token=body["access_token"])
    ).status == 200


async def test_an_absolute_form_request_is_routed_on_its_path(api: Api) -> None:
    vm = add_vm(api.world, {"name": "node-0"})
    api.world.imds_vm = vm["id"]
    client = await imds_client(api)
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        f"GET http://169.254.169.254{INSTANCE} HTTP/1.1\r\nHost: 169.254.169.254\r\n"
        "Metadata: True\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert json.loads(payload)["compute"]["name"] == "node-0"


async def test_a_vm_can_have_a_metadata_service_of_its_own(api: Api) -> None:
    first = add_vm(api.world, {"name": "node-0"})
    second = add_vm(api.world, {"name": "node-1"})
    api.world.imds_vm = first["id"]
    made = await api.client.post("/_emu/imds-listeners", json={"id": second["id"]})
    url = (await made.json())["url"]
    async with api.client.session.get(f"{url}{INSTANCE}", headers=HEADERS) as response:
        assert (await response.json())["compute"]["name"] == "node-1"


async def test_imds_calls_can_be_faulted(api: Api) -> None:
    from kccm.emulators.azure.faults import add_fault

    vm = add_vm(api.world, {"name": "node-0"})
    api.world.imds_vm = vm["id"]
    add_fault(
        api.world,
        {"path_regex": "^/metadata/instance$", "status": 503, "code": "ServiceUnavailable"},
    )
    client = await imds_client(api)
    assert (await get(client, INSTANCE))[0] == 503
    assert (await get(client, INSTANCE))[0] == 200
