"""Per-call faults: errors with ARM's body, throttling with Retry-After and the
x-ms-ratelimit-remaining headers, preconditions, token expiry, latency; how many calls they
answer; the request log."""

from __future__ import annotations

from typing import Any

import pytest
from azure_api import COMPUTE, NET, Api

from kccm.emulators.azure.faults import add_fault

LIST_LB = f"{NET}/loadBalancers"


@pytest.mark.parametrize(
    ("spec", "path", "status", "code", "headers"),
    [
        pytest.param(
            {"kind": "error", "status": 500, "code": "InternalServerError"},
            LIST_LB,
            500,
            "InternalServerError",
            {},
            id="error",
        ),
        pytest.param(
            {"kind": "throttle", "retry_after": 7},
            LIST_LB,
            429,
            "TooManyRequests",
            {
                "Retry-After": "7",
                "x-ms-ratelimit-remaining-subscription-reads": "0",
                "x-ms-ratelimit-remaining-subscription-global-reads": "0",
            },
            id="throttle-read",
        ),
        pytest.param(
            {"kind": "throttle", "retry_after": 3},
            f"{COMPUTE}/virtualMachines",
            429,
            "TooManyRequests",
            {"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/HighCostGet3Min;0"},
            id="throttle-compute",
        ),
        pytest.param({"kind": "precondition"}, LIST_LB, 412, "PreconditionFailed", {}, id="412"),
        pytest.param(
            {"kind": "expire_token"}, LIST_LB, 401, "ExpiredAuthenticationToken", {}, id="token"
        ),
    ],
)
async def test_a_fault_answers_as_arm_does(
    api: Api, spec: dict[str, Any], path: str, status: int, code: str, headers: dict[str, str]
) -> None:
    add_fault(api.world, {"path_regex": "/(loadBalancers|virtualMachines)$", **spec})
    answer = await api.call("GET", path)
    assert answer.status == status
    assert answer.body["error"]["code"] == code
    for name, value in headers.items():
        assert answer.headers[name] == value
    if spec["kind"] != "expire_token":
        assert (await api.call("GET", path)).status == 200


async def test_a_fault_answers_times_calls_of_its_method(api: Api) -> None:
    add_fault(api.world, {"path_regex": "publicIPAddresses", "method": "PUT", "times": 2})
    body = {"location": "eastus", "properties": {}}
    assert (await api.call("GET", f"{NET}/publicIPAddresses")).status == 200
    statuses = [
        (await api.call("PUT", f"{NET}/publicIPAddresses/a", body)).status for _ in range(3)
    ]
    assert statuses == [500, 500, 201]


async def test_latency_delays_then_serves(api: Api) -> None:
    add_fault(api.world, {"path_regex": "loadBalancers", "kind": "latency", "latency": 0.01})
    assert (await api.call("GET", LIST_LB)).status == 200
    assert api.world.faults == []


async def test_an_unknown_kind_is_refused(api: Api) -> None:
    made = await api.client.post("/_emu/faults", json={"kind": "explode"})
    assert made.status == 400


async def test_the_request_log_names_each_calls_operation_and_version(api: Api) -> None:
    await api.call("GET", f"{NET}/routeTables/kccm-rt/routes", version="2025-05-01")
    await api.call(
        "GET",
        f"{COMPUTE}/virtualMachineScaleSets/x/virtualMachines/0/networkInterfaces",
        version="2018-10-01",
    )
    logged = [
        (r["op"], r["api_version"], r["status"])
        for r in api.world.requests
        if r["service"] == "arm"
    ]
    assert logged == [
        ("GET Microsoft.Network/routeTables/{}/routes", "2025-05-01", 200),
        (
            "GET Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}/networkInterfaces",
            "2018-10-01",
            404,
        ),
    ]
    assert api.world.requests[0]["service"] == "adfs"
