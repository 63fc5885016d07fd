"""Managed identities: user-assigned identities (``Microsoft.ManagedIdentity/
userAssignedIdentities``, kept beside the resources: ARM does not serve them here and leak
checks ignore them), the ``identity`` block of a VM or scale-set instance as ARM renders it, and
which identity the metadata service's token endpoint signs in as.

The token endpoint as IMDS answers it: with ``client_id``, ``object_id`` or ``msi_res_id``
(``mi_res_id``) the user-assigned identity of the VM so named; without, the VM's
system-assigned identity, else its only user-assigned one; anything else is 400
``invalid_request`` "Identity not found".
"""

from __future__ import annotations

from typing import Any

from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.world import DEFAULTS, Obj, World, new_guid

__all__ = ["add_identity", "assign_identity", "select_identity"]

IDENTITY_TYPE = "Microsoft.ManagedIdentity/userAssignedIdentities"


def add_identity(world: World, name: str, resource_group: str = "") -> Obj:
    """A user-assigned identity: ``{id, name, clientId, principalId, tenantId}``."""
    group = resource_group or DEFAULTS["resource_group"]
    rid = world.resource_id(group, "Microsoft.ManagedIdentity", "userAssignedIdentities", name)
    found = world.identities.get(rid.lower())
    if found is None:
        found = {
            "id": rid,
            "name": name,
            "type": IDENTITY_TYPE,
            "clientId": new_guid(),
            "principalId": new_guid(),
            "tenantId": DEFAULTS["tenant"],
        }
        world.identities[rid.lower()] = found
    return dict(found)


def assign_identity(world: World, vm_id: str, system: bool, user: list[str]) -> Obj:
    """The VM's (or instance's) ``identity`` block set to ``system`` and the ``user``
    identities (resource ids); the block as ARM renders it."""
    vm = world.get(vm_id)
    if vm is None:
        raise ArmError(404, "ResourceNotFound", f"no VM {vm_id!r}")
    users = {}
    for rid in user:
        identity = world.identities.get(rid.lower())
        if identity is None:
            raise ArmError(400, "InvalidParameter", f"no user-assigned identity {rid!r}")
        users[identity["id"]] = {
            "principalId": identity["principalId"],
            "clientId": identity["clientId"],
        }
    kinds = [k for k, on in (("SystemAssigned", system), ("UserAssigned", bool(users))) if on]
    block: Obj = {"type": ", ".join(kinds) or "None"}
    if system:
        vm.setdefault("_system_identity", {"clientId": new_guid(), "principalId": new_guid()})
        block.update(principalId=vm["_system_identity"]["principalId"], tenantId=DEFAULTS["tenant"])
    else:
        vm.pop("_system_identity", None)
    if users:
        block["userAssignedIdentities"] = users
    vm["identity"] = block
    return dict(block)


def _not_found() -> ValueError:
    return ValueError("Identity not found")


def select_identity(vm: Obj, query: Any) -> str:
    """The client id the token is issued to; ValueError with IMDS's description."""
    users = (vm.get("identity") or {}).get("userAssignedIdentities") or {}
    asked = [
        (key, str(query.get(param)))
        for param, key in (
            ("client_id", "clientId"),
            ("object_id", "principalId"),
            ("msi_res_id", "id"),
            ("mi_res_id", "id"),
        )
        if query.get(param)
    ]
    if asked:
        key, value = asked[0]
        for rid, identity in users.items():
            have = rid if key == "id" else identity.get(key, "")
            if str(have).lower() == value.lower():
                return str(identity["clientId"])
        raise _not_found()
    system = vm.get("_system_identity")
    if system is not None:
        return str(system["clientId"])
    if len(users) == 1:
        return str(next(iter(users.values()))["clientId"])
    if users:
        raise ValueError(
            "Multiple user assigned identities exist, please specify the clientId / resourceId "
            "of the identity in the token request"
        )
    raise _not_found()
