"""ARM's common semantics: api-version, 404s, the provider's zone map, ETags and If-Match,
long-running operations and paging."""

from __future__ import annotations

import pytest
from azure_api import NET, RG, SUB, Api

PIP = {"location": "eastus", "sku": {"name": "Standard"}, "properties": {}}


@pytest.mark.parametrize(
    ("path", "version", "status", "code"),
    [
        pytest.param(f"{NET}/loadBalancers", "", 400, "MissingApiVersionParameter", id="missing"),
        pytest.param(
            f"{NET}/loadBalancers", "2099-01-01", 400, "NoRegisteredProviderFound", id="unknown"
        ),
        pytest.param(f"{NET}/loadBalancers", "2018-10-01", 200, "", id="old-network"),
        pytest.param(f"{NET}/loadBalancers", "2026-03-01", 200, "", id="python-sdk-network"),
        pytest.param(
            f"{RG}/providers/Microsoft.Compute/virtualMachines", "2026-04-01", 200, "", id="sdk"
        ),
        pytest.param(
            f"{RG}/providers/Microsoft.Compute/virtualMachines",
            "2025-05-01",
            400,
            "NoRegisteredProviderFound",
            id="network-version-on-compute",
        ),
    ],
)
async def test_api_version(api: Api, path: str, version: str, status: int, code: str) -> None:
    answer = await api.call("GET", path, version=version)
    assert answer.status == status, answer.body
    if code:
        assert answer.body["error"]["code"] == code


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        pytest.param(
            f"{NET}/loadBalancers/nope",
            "ResourceNotFound",
            "The Resource 'Microsoft.Network/loadBalancers/nope' under resource group 'kccm-rg' "
            "was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
            id="resource",
        ),
        pytest.param(
            f"/subscriptions/{SUB}/resourceGroups/other/providers/Microsoft.Network/loadBalancers",
            "ResourceGroupNotFound",
            "Resource group 'other' could not be found.",
            id="group",
        ),
        pytest.param(
            f"{NET}/routeTables/kccm-rt/routes/nope",
            "NotFound",
            f"Resource {NET}/routeTables/kccm-rt/routes/nope not found.",
            id="child",
        ),
    ],
)
async def test_not_found(api: Api, path: str, code: str, message: str) -> None:
    answer = await api.call("GET", path)
    assert answer.status == 404
    assert answer.body == {"error": {"code": code, "message": message}}


async def test_paths_are_case_insensitive(api: Api) -> None:
    found = await api.ok("GET", f"{NET}/ROUTETABLES/KCCM-RT".replace("kccm-rg", "KCCM-RG"))
    assert found["name"] == "kccm-rt"


async def test_the_compute_provider_has_the_zone_map(api: Api) -> None:
    body = await api.ok(
        "GET", f"/subscriptions/{SUB}/providers/Microsoft.Compute", version="2021-04-01"
    )
    vms = next(t for t in body["resourceTypes"] if t["resourceType"] == "virtualMachines")
    assert vms["zoneMappings"] == [{"location": "East US", "zones": ["1", "2", "3"]}]
    assert body["registrationState"] == "Registered"


async def test_a_put_creates_201_then_updates_200_with_a_new_etag(api: Api) -> None:
    made = await api.call("PUT", f"{NET}/publicIPAddresses/a", PIP)
    again = await api.call("PUT", f"{NET}/publicIPAddresses/a", PIP)
    assert (made.status, again.status) == (201, 200)
    assert made.body["etag"].startswith('W/"')
    assert made.body["etag"] != again.body["etag"]
    got = await api.call("GET", f"{NET}/publicIPAddresses/a")
    assert got.headers["ETag"] == again.body["etag"] == got.body["etag"]


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        pytest.param("If-Match", "current", 200, id="if-match-current"),
        pytest.param("If-Match", "*", 200, id="if-match-any"),
        pytest.param("If-Match", 'W/"stale"', 412, id="if-match-stale"),
        pytest.param("If-None-Match", "*", 412, id="if-none-match-exists"),
    ],
)
async def test_preconditions(api: Api, header: str, value: str, status: int) -> None:
    made = await api.ok("PUT", f"{NET}/publicIPAddresses/a", PIP)
    sent = made["etag"] if value == "current" else value
    answer = await api.call("PUT", f"{NET}/publicIPAddresses/a", PIP, headers={header: sent})
    assert answer.status == status, answer.body
    if status == 412:
        assert answer.body["error"]["code"] == "PreconditionFailed"
        assert answer.body["error"]["details"][0]["code"] == "PreconditionFailedEtagMismatch"


async def test_compute_etags_count_and_their_412_names_both(api: Api) -> None:
    api.world.lro_delay = 0
    # a scale set: Compute's availability sets carry no etag (availabilitySet.json, 2025-04-01)
    sets = await api.ok("GET", f"{RG}/providers/Microsoft.Compute/virtualMachineScaleSets")
    assert sets["value"] == []
    path = f"{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/ss1"
    body = {"location": "eastus", "sku": {"name": "Standard_D2s_v3", "capacity": 0}}
    made = await api.ok("PUT", path, body)
    assert made["etag"].strip('"').isdigit()
    answer = await api.call("PUT", path, body, headers={"If-Match": '"999"'})
    assert answer.status == 412
    assert answer.body["error"]["message"] == (
        f'Etag provided in if-match header "999" does not match etag {made["etag"]} of resource.'
    )


async def test_a_slow_put_is_polled_until_it_succeeds(api: Api) -> None:
    api.world.lro_delay = 10
    made = await api.call("PUT", f"{NET}/publicIPAddresses/a", PIP)
    assert made.status == 201
    assert made.headers["Retry-After"] == "10"
    assert made.body["properties"]["provisioningState"] == "Updating"
    assert "ipAddress" not in made.body["properties"]
    poll = made.headers["Azure-AsyncOperation"].removeprefix(api.world.base_url)
    assert (await api.ok("GET", poll))["status"] == "InProgress"
    api.clock.now += 10
    assert (await api.ok("GET", poll))["status"] == "Succeeded"
    got = await api.ok("GET", f"{NET}/publicIPAddresses/a")
    assert got["properties"]["provisioningState"] == "Succeeded"
    assert got["properties"]["ipAddress"]


async def test_a_slow_delete_answers_202_then_204_at_its_location(api: Api) -> None:
    await api.ok("PUT", f"{NET}/publicIPAddresses/a", PIP)
    api.world.lro_delay = 5
    gone = await api.call("DELETE", f"{NET}/publicIPAddresses/a")
    assert gone.status == 202
    assert gone.headers["Azure-AsyncOperation"]
    location = gone.headers["Location"].removeprefix(api.world.base_url)
    assert (await api.call("GET", location)).status == 202
    deleting = await api.ok("GET", f"{NET}/publicIPAddresses/a")
    assert deleting["properties"]["provisioningState"] == "Deleting"
    api.clock.now += 5
    assert (await api.call("GET", location)).status == 204
    assert (await api.call("GET", f"{NET}/publicIPAddresses/a")).status == 404
    assert (await api.call("DELETE", f"{NET}/publicIPAddresses/a")).status == 204


async def test_lists_come_in_pages_linked_by_next_link(api: Api) -> None:
    api.world.page_size = 2
    for name in "abcde":
        await api.ok("PUT", f"{NET}/publicIPAddresses/{name}", PIP)
    names, path = [], f"{NET}/publicIPAddresses"
    while path:
        body = await api.ok("GET", path)
        names += [item["name"] for item in body["value"]]
        path = body.get("nextLink", "").removeprefix(api.world.base_url)
    assert names == list("abcde")


async def test_patch_merges_into_the_resource(api: Api) -> None:
    await api.ok("PUT", f"{NET}/publicIPAddresses/a", {**PIP, "tags": {"a": "1"}})
    found = await api.ok("PATCH", f"{NET}/publicIPAddresses/a", {"tags": {"b": "2"}})
    assert found["tags"] == {"a": "1", "b": "2"}
    assert found["sku"]["name"] == "Standard"


async def test_a_create_needs_a_location(api: Api) -> None:
    answer = await api.call("PUT", f"{NET}/publicIPAddresses/a", {"properties": {}})
    assert (answer.status, answer.body["error"]["code"]) == (400, "LocationRequired")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("GET", f"{NET}/privateLinkServices", 200, id="list-is-empty"),
        pytest.param("GET", f"{NET}/privateLinkServices/pls", 404, id="get-is-not-found"),
        pytest.param("DELETE", f"{NET}/natGateways/nat", 204, id="delete-of-nothing"),
        pytest.param("PUT", f"{NET}/natGateways/nat", 400, id="write-refused"),
    ],
)
async def test_types_the_emulator_does_not_model(
    api: Api, method: str, path: str, status: int
) -> None:
    answer = await api.call(method, path, {"location": "eastus"} if method == "PUT" else None)
    assert answer.status == status
    if status == 200:
        assert answer.body == {"value": []}


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        pytest.param(
            f"{NET}/publicIPAddresses/a",
            PIP,
            "Canceled",
            "CanceledAndSupersededDueToAnotherOperation",
            id="network",
        ),
        pytest.param(
            f"{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/s",
            {
                "location": "eastus",
                "sku": {"name": "Standard_D2s_v3", "capacity": 0},
                "properties": {},
            },
            "Failed",
            "OperationPreempted",
            id="compute",
        ),
    ],
)
async def test_a_newer_operation_supersedes_a_pending_one(
    api: Api, path: str, body: dict[str, object], status: str, code: str
) -> None:
    api.world.lro_delay = 10
    first = await api.call("PUT", path, body)
    await api.ok("PUT", path, body)
    poll = first.headers["Azure-AsyncOperation"].removeprefix(api.world.base_url)
    found = await api.ok("GET", poll)
    assert (found["status"], found["error"]["code"]) == (status, code)


@pytest.mark.parametrize(
    ("method", "header"),
    [
        pytest.param("GET", "x-ms-ratelimit-remaining-subscription-reads", id="read"),
        pytest.param("PUT", "x-ms-ratelimit-remaining-subscription-global-writes", id="write"),
    ],
)
async def test_answers_carry_arms_headers(api: Api, method: str, header: str) -> None:
    answer = await api.call(
        method,
        f"{NET}/publicIPAddresses/a",
        PIP if method == "PUT" else None,
        headers={"x-ms-correlation-request-id": "c0ffee"},
    )
    assert int(answer.headers[header]) > 0
    assert answer.headers["x-ms-request-id"]
    assert answer.headers["x-ms-correlation-request-id"] == "c0ffee"


async def test_a_subscription_wide_list_spans_resource_groups(api: Api) -> None:
    api.world.add_group("other-rg")
    other = NET.replace("kccm-rg", "other-rg")
    await api.ok("PUT", f"{NET}/publicIPAddresses/a", PIP)
    await api.ok("PUT", f"{other}/publicIPAddresses/b", PIP)
    found = await api.ok(
        "GET", f"/subscriptions/{SUB}/providers/Microsoft.Network/publicIPAddresses"
    )
    assert sorted(p["name"] for p in found["value"]) == ["a", "b"]


async def test_a_resource_group_is_made_and_deleted_with_what_it_holds(api: Api) -> None:
    group = f"/subscriptions/{SUB}/resourcegroups/made-rg"
    made = await api.call("PUT", group, {"location": "eastus"}, version="2021-04-01")
    assert made.status == 201
    await api.ok("PUT", f"{NET.replace('kccm-rg', 'made-rg')}/publicIPAddresses/a", PIP)
    gone = await api.call("DELETE", group, version="2021-04-01")
    assert gone.status == 202
    assert (
        await api.call("GET", gone.headers["Location"].removeprefix(api.world.base_url))
    ).status == 200
    assert (await api.call("GET", group, version="2021-04-01")).status == 404
    assert not api.world.public_ips
