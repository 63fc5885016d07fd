"""Managed identities on the metadata service: which identity a VM's token endpoint signs in
as (system-assigned, a user-assigned one named by client id, object id or resource id), and
IMDS's 400 ``Identity not found`` when the VM has no such identity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from azure_api import Api, imds_client

from kccm.emulators.azure.identities import add_identity, assign_identity
from kccm.emulators.azure.seed import add_vm

TOKEN = (
    "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/"
)
Ids = dict[str, dict[str, Any]]  # identity name -> identity; "system" -> the VM's own


def by(field: str, name: str, param: str) -> Callable[[Ids], str]:
    return lambda ids: f"&{param}={ids[name][field]}"


NONE: Callable[[Ids], str] = lambda ids: ""  # noqa: E731


@pytest.mark.parametrize(
    ("system", "users", "query", "expected"),
    [
        pytest.param(True, [], NONE, "system", id="system-assigned"),
        pytest.param(True, ["a"], NONE, "system", id="system-wins-without-an-id"),
        pytest.param(False, ["a"], NONE, "a", id="the-only-user-assigned"),
        pytest.param(True, ["a", "b"], by("clientId", "b", "client_id"), "b", id="by-client-id"),
        pytest.param(True, ["a", "b"], by("principalId", "b", "object_id"), "b",
                     id="by-object-id"),
        pytest.param(True, ["a", "b"], by("id", "a", "msi_res_id"), "a", id="by-resource-id"),
        pytest.param(False, ["a", "b"], NONE, None, id="several-user-assigned-no-id"),
        pytest.param(True, ["a"], by("clientId", "b", "client_id"), None,
                     id="an-identity-of-another-vm"),
        pytest.param(False, [], NONE, None, id="no-identity"),
    ],
)  # fmt: skip
async def test_the_token_is_issued_to_the_identity_asked_for(
    api: Api,
    system: bool,
    users: list[str],
    query: Callable[[Ids], str],
    expected: str | None,
) -> None:
    vm = add_vm(api.world, {"name": "node-0"})
    ids: Ids = {name: add_identity(api.world, name) for name in ("a", "b")}
    assign_identity(api.world, vm["id"], system, [ids[n]["id"] for n in users])
    if system:
        ids["system"] = api.world.get(vm["id"])["_system_identity"]  # type: ignore[index]
    api.world.imds_vm = vm["id"]
    client = await imds_client(api)
    async with client.get(TOKEN + query(ids), headers={"Metadata": "true"}) as response:
        status, body = response.status, await response.json()
    if expected is None:
        assert (status, body["error"]) == (400, "invalid_request"), body
        return
    assert status == 200, body
    assert api.world.tokens[body["access_token"]].client_id == ids[expected]["clientId"]
    assert api.world.tokens[body["access_token"]].source == "managed-identity"


async def test_the_vm_shows_its_identities_as_arm_renders_them(api: Api) -> None:
    vm = add_vm(api.world, {"name": "node-0"})
    uai = add_identity(api.world, "kccm-uai")
    assign_identity(api.world, vm["id"], True, [uai["id"]])
    found = await api.ok("GET", vm["id"] + "?api-version=2025-04-01")
    assert found["identity"]["type"] == "SystemAssigned, UserAssigned"
    assert found["identity"]["userAssignedIdentities"] == {
        uai["id"]: {"principalId": uai["principalId"], "clientId": uai["clientId"]}
    }
