"""The emulator answers what Azure answered: every call cloud-provider-azure v1.36.5 recorded
against Azure for its typed clients (``pkg/azclient/*/testdata/AZURECLOUD.yaml``, digested in
``azure_recorded.json``: load balancers, backend pools, public IPs, NICs, security groups,
route tables, subnets, virtual networks, VMs, availability sets, scale sets and their
instances, the resource providers) is replayed in order against a fresh emulator, and the
status, the error code, the keys of the answer and of its ``properties`` (Azure's must all be
there) and the long-running operation headers are compared with Azure's.

Where the emulator knowingly answers otherwise, the difference is listed in ``KNOWN`` with the
reason; a new difference, or a listed one that went away, fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from azure_api import SUB, Api, start_api

RECORDED = json.loads((Path(__file__).parent / "azure_recorded.json").read_text())["clients"]

# Azure's subscription stamped a createdAt tag on every new resource group (a policy of the
# recording's subscription, not ARM's).
TAGGED = "PUT resourcegroups/aks-cit-{}: top keys missing ['tags']"

KNOWN: dict[str, set[str]] = {
    "availabilitysetclient": {
        TAGGED.format("AvailabilitySet"),
        # a migration preview of the recording's subscription, beyond the 2025-04-01 spec
        *(
            f"{verb} Microsoft.Compute/availabilitySets{tail}: properties missing "
            "['virtualMachineScaleSetMigrationInfo']"
            for verb, tail in (("PUT", "/testResource"), ("GET", "/testResource"), ("GET", ""))
        ),
    },
    "virtualmachineclient": {
        TAGGED.format("VirtualMachine"),
        # Azure answered one update PUT without an operation (its body says Updating, the
        # client polls the resource); the emulator always hands out Azure-AsyncOperation,
        # ARM's other way, which every client follows.
        "PUT Microsoft.Compute/virtualMachines/testResource: operation headers "
        "['azure-asyncoperation'] != []",
    },
    "virtualmachinescalesetclient": {TAGGED.format("VirtualMachineScaleSet")},
    "virtualmachinescalesetvmclient": {TAGGED.format("VirtualMachineScaleSetVM")},
    "interfaceclient": {
        # Azure answered a NIC's DELETE with 200 here and 202 in virtualmachineclient's
        # recording; the emulator answers 202 (with the operation to poll) always.
        "DELETE Microsoft.Network/networkInterfaces/testResource: status 202 != 200",
    },
    "virtualnetworkclient": {
        # Azure answered an update PUT of an existing network with 201; the emulator 200.
        "PUT Microsoft.Network/virtualNetworks/testResource: status 200 != 201",
    },
}


def where(path: str) -> str:
    """The path from its resource provider on (``resourcegroups/<name>`` for a group)."""
    if "/providers/" in path:
        return path.split("/providers/", 1)[1]
    return "resourcegroups/" + path.rsplit("/", 1)[1]


def differences(step: dict[str, Any], status: int, body: Any, headers: Any) -> list[str]:
    found = []
    if status != step["status"]:
        found.append(f"status {status} != {step['status']}")
    if step.get("code"):
        code = body.get("error", {}).get("code") if isinstance(body, dict) else None
        if code != step["code"]:
            found.append(f"error code {code} != {step['code']}")
    if step.get("keys", ["value"]) != ["value"] and isinstance(body, dict):
        item = body["value"][0] if body.get("value") else body
        missing = sorted(set(step["keys"]) - set(item))
        if missing:
            found.append(f"top keys missing {missing}")
        missing = sorted(set(step.get("props", [])) - set(item.get("properties") or {}))
        if missing:
            found.append(f"properties missing {missing}")
    if "lro" in step:
        names = {name.lower() for name in headers}
        got = sorted(h for h in ("azure-asyncoperation", "location") if h in names)
        if got != step["lro"]:
            found.append(f"operation headers {got} != {step['lro']}")
    return found


async def replay(api: Api, steps: list[dict[str, Any]]) -> set[str]:
    seen: set[str] = set()
    for step in steps:
        path = step["path"].replace("{sub}", SUB)
        if step["query"]:
            path += "?" + "&".join(f"{k}={v}" for k, v in step["query"].items())
        body = (
            json.loads(json.dumps(step["body"]).replace("{sub}", SUB)) if "body" in step else None
        )
        answer = await api.call(
            step["method"], path, body, version=step["version"], headers=step.get("headers")
        )
        for what in differences(step, answer.status, answer.body, answer.headers):
            seen.add(f"{step['method']} {where(step['path'])}: {what}")
    return seen


@pytest.mark.parametrize("client", sorted(RECORDED))
async def test_the_emulator_answers_what_azure_answered(client: str) -> None:
    api = await start_api()
    try:
        assert await replay(api, RECORDED[client]) == KNOWN.get(client, set())
    finally:
        await api.close()
