"""What ARM serves below a resource: inline children with endpoints of their own (subnets,
routes, security rules, backend pools; frontends, probes and rules read-only), a VM's
instance view and power actions, a scale set's instances (GET/PUT/DELETE, instance view,
actions), their NICs (the network resource provider's ``microsoft.Compute/
virtualMachineScaleSets/{ss}/virtualMachines/{i}/networkInterfaces`` paths, at its versions)
and the scale set's ``manualupgrade``, ``delete`` and power actions.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kccm.emulators.azure import compute
from kccm.emulators.azure.addresses import vmss_instance_nics, vmss_public_ips
from kccm.emulators.azure.errors import ArmError, child_not_found, not_found
from kccm.emulators.azure.kinds import Kind, kind_of_type
from kccm.emulators.azure.rest import WORLD, json_body, reply
from kccm.emulators.azure.store import (
    begin_delete,
    begin_put,
    build,
    check_preconditions,
    lro_headers,
    page,
    public,
    render,
)
from kccm.emulators.azure.world import Obj, World

__all__ = ["handle", "network_versions"]

POWER_ACTIONS = {
    "start": "running",
    "restart": "running",
    "poweroff": "stopped",
    "deallocate": "deallocated",
}


def network_versions(kind: Kind, rest: list[str]) -> bool:
    """Whether the path is one the network resource provider serves below a scale set."""
    low = [r.lower() for r in rest]
    return kind.type == "virtualMachineScaleSets" and (
        "networkinterfaces" in low or "publicipaddresses" in low
    )


def _expand(request: web.Request) -> bool:
    return "instanceview" in request.query.get("$expand", "").lower()


def _no_route(request: web.Request) -> ArmError:
    return ArmError(
        404,
        "NoRegisteredProviderFound",
        f"No registered resource provider found for path '{request.path}'.",
    )


def _only(request: web.Request, method: str) -> None:
    if request.method != method:
        raise ArmError(
            405,
            "MethodNotAllowed",
            f"The requested resource does not support http method '{request.method}'.",
        )


async def handle(
    request: web.Request, kind: Kind, group: str, rest: list[str], api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    canonical = world.groups[group.lower()]
    parent = world.get(world.resource_id(canonical, kind.namespace, kind.type, rest[0]))
    if parent is None:
        raise not_found(kind.full_type, rest[0], canonical)
    if kind.type == "virtualMachines":
        return await _vm_sub(request, kind, parent, rest[1:], api)
    if kind.type == "virtualMachineScaleSets":
        return await _vmss_sub(request, parent, rest[1:], api)
    prop = kind.child_prop(rest[1])
    if prop is None or len(rest) > 3:
        raise _no_route(request)
    if len(rest) == 2:
        _only(request, "GET")
        return reply(page(request, render(world, parent)["properties"].get(prop) or []))
    return await _child(request, kind, parent, prop, rest[2], api)


async def _child(
    request: web.Request, kind: Kind, parent: Obj, prop: str, name: str, api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    child_id = f"{parent['id']}/{prop}/{name}"
    items = render(world, parent)["properties"].get(prop) or []
    current = next((c for c in items if str(c["name"]).lower() == name.lower()), None)
    if request.method == "GET":
        if current is None:
            raise child_not_found(child_id)
        return reply(current, headers={"ETag": str(current["etag"])})
    if prop not in kind.writable_children:
        raise ArmError(405, "MethodNotAllowed", f"{prop} cannot be changed on their own.")
    if request.method == "DELETE" and current is None:
        return reply(None, 204)
    if request.method not in ("PUT", "DELETE"):
        raise ArmError(405, "MethodNotAllowed", f"Method '{request.method}' is not allowed here.")
    check_preconditions(request, current, kind.compute)
    body = public(parent)
    kept = [c for c in body["properties"].get(prop) or [] if str(c["name"]).lower() != name.lower()]
    if request.method == "PUT":
        sent = await json_body(request)
        kept.append(
            {
                "name": current["name"] if current else name,
                "properties": sent.get("properties") or {},
            }
        )
    body["properties"][prop] = kept
    group = str(parent["id"]).split("/")[4]
    obj = build(world, kind, group, str(parent["name"]), body, parent)
    op = begin_put(world, kind, obj, created=False)
    if request.method == "DELETE":
        return reply(None, 202, headers=lro_headers(world, op, api, location=True))
    made = next(
        c for c in render(world, obj)["properties"][prop] if c["name"].lower() == name.lower()
    )
    headers = {**lro_headers(world, op, api, location=False), "ETag": str(made["etag"])}
    return reply(made, 200 if current else 201, headers=headers)


async def _power(request: web.Request, world: World, targets: list[Obj], api: str) -> web.Response:
    """A power action on VMs or instances (202 with an operation to poll)."""
    action = request.path.rstrip("/").rsplit("/", 1)[-1].lower()
    ops = []
    for vm in targets:
        vm["_power"] = POWER_ACTIONS[action]
        vm_kind = kind_of_type(str(vm["type"]))
        assert vm_kind is not None
        ops.append(begin_put(world, vm_kind, vm, created=False))
    if not ops:
        return reply(None, 200)
    return reply(None, 202, headers=lro_headers(world, ops[-1], api, location=True))


async def _vm_sub(
    request: web.Request, kind: Kind, vm: Obj, rest: list[str], api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    if rest == ["instanceView"] or [r.lower() for r in rest] == ["instanceview"]:
        _only(request, "GET")
        return reply(compute.instance_view(vm))
    if len(rest) == 1 and rest[0].lower() in POWER_ACTIONS:
        _only(request, "POST")
        return await _power(request, world, [vm], api)
    raise _no_route(request)


async def _instance_ids(request: web.Request) -> list[str] | None:
    body = await json_body(request) if request.can_read_body else {}
    ids = body.get("instanceIds")
    return [str(i) for i in ids] if isinstance(ids, list) else None


async def _vmss_sub(
    request: web.Request, vmss: Obj, rest: list[str], api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    low = [r.lower() for r in rest]
    instances = compute.instances_of(world, vmss)
    if low == ["virtualmachines"]:
        _only(request, "GET")
        expand = _expand(request)
        return reply(page(request, [render(world, vm, expand) for vm in instances]))
    if low == ["networkinterfaces"]:
        _only(request, "GET")
        return reply(page(request, [n for vm in instances for n in vmss_instance_nics(world, vm)]))
    if low == ["publicipaddresses"]:
        _only(request, "GET")
        return reply(page(request, [p for vm in instances for p in vmss_public_ips(world, vm)]))
    if len(low) == 1 and low[0] in ("manualupgrade", "delete", *POWER_ACTIONS):
        _only(request, "POST")
        return await _vmss_action(request, vmss, instances, low[0], api)
    if len(low) >= 2 and low[0] == "virtualmachines":
        if not rest[1].isdigit():
            raise ArmError(
                400,
                "InvalidParameter",
                "Virtual Machine Scale Set VM instanceId must be a number.",
                target="instanceId",
            )
        vm = next((v for v in instances if v["instanceId"] == rest[1]), None)
        if vm is None:
            raise not_found(
                "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
                f"{vmss['name']}/{rest[1]}",
                str(vmss["id"]).split("/")[4],
            )
        return await _instance(request, vmss, vm, rest[2:], api)
    raise _no_route(request)


async def _vmss_action(
    request: web.Request, vmss: Obj, instances: list[Obj], action: str, api: str
) -> web.Response:
    world = request.app[WORLD]
    wanted = await _instance_ids(request)
    chosen = [vm for vm in instances if wanted is None or vm["instanceId"] in wanted]
    if action in POWER_ACTIONS:
        return await _power(request, world, chosen, api)
    vmss_kind = kind_of_type(str(vmss["type"]))
    assert vmss_kind is not None
    if action == "manualupgrade":
        compute.apply_model(world, vmss, [vm["instanceId"] for vm in chosen])
    else:
        for vm in chosen:
            compute.vmss_vm_deleted(world, vm)
    op = begin_put(world, vmss_kind, vmss, created=False)
    return reply(None, 202, headers=lro_headers(world, op, api, location=True))


async def _instance(
    request: web.Request, vmss: Obj, vm: Obj, rest: list[str], api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    low = [r.lower() for r in rest]
    vm_kind = kind_of_type(str(vm["type"]))
    assert vm_kind is not None
    if not rest:
        return await _instance_call(request, vm_kind, vm, api)
    if low == ["instanceview"]:
        _only(request, "GET")
        return reply(compute.instance_view(vm))
    if len(low) == 1 and low[0] in POWER_ACTIONS:
        _only(request, "POST")
        return await _power(request, world, [vm], api)
    if low[0] == "networkinterfaces":
        _only(request, "GET")
        return _instance_nics(request, vm, rest[1:])
    raise _no_route(request)


async def _instance_call(request: web.Request, vm_kind: Kind, vm: Obj, api: str) -> web.Response:
    world = request.app[WORLD]
    if request.method == "GET":
        return reply(render(world, vm, _expand(request)), headers={"ETag": str(vm["etag"])})
    check_preconditions(request, vm, compute=True)
    if request.method == "DELETE":
        op = begin_delete(world, vm_kind, vm)
        return reply(None, 202, headers=lro_headers(world, op, api, location=True))
    if request.method not in ("PUT", "PATCH"):
        raise ArmError(405, "MethodNotAllowed", f"Method '{request.method}' is not allowed here.")
    compute.prepare_vmss_vm(world, vm, await json_body(request))
    vm["etag"] = world.compute_etag()
    op = begin_put(world, vm_kind, vm, created=False)
    headers = {**lro_headers(world, op, api, location=False), "ETag": str(vm["etag"])}
    return reply(render(world, vm), headers=headers)


def _instance_nics(request: web.Request, vm: Obj, rest: list[str]) -> web.Response:
    world = request.app[WORLD]
    nics = vmss_instance_nics(world, vm)
    if not rest:
        return reply(page(request, nics))
    nic = next((n for n in nics if n["name"].lower() == rest[0].lower()), None)
    if nic is None:
        raise child_not_found(f"{vm['id']}/networkInterfaces/{rest[0]}")
    if len(rest) == 1:
        return reply(nic, headers={"ETag": str(nic["etag"])})
    configs: list[Any] = nic["properties"]["ipConfigurations"]
    if rest[1].lower() != "ipconfigurations":
        raise _no_route(request)
    if len(rest) == 2:
        return reply(page(request, configs))
    found = next((c for c in configs if c["name"].lower() == rest[2].lower()), None)
    if found is None:
        raise child_not_found(f"{nic['id']}/ipConfigurations/{rest[2]}")
    if len(rest) == 3:
        return reply(found)
    if len(rest) in (4, 5) and rest[3].lower() == "publicipaddresses":
        return _instance_public_ips(request, vm, str(found["id"]), rest[4:])
    raise _no_route(request)


def _instance_public_ips(
    request: web.Request, vm: Obj, ipc_id: str, rest: list[str]
) -> web.Response:
    """``.../ipConfigurations/{ipc}/publicIPAddresses[/{name}]`` of a scale-set instance."""
    world = request.app[WORLD]
    mine = [
        p for p in vmss_public_ips(world, vm) if p["id"].lower().startswith(ipc_id.lower() + "/")
    ]
    if not rest:
        return reply(page(request, mine))
    found = next((p for p in mine if p["name"].lower() == rest[0].lower()), None)
    if found is None:
        raise child_not_found(f"{ipc_id}/publicIPAddresses/{rest[0]}")
    return reply(found, headers={"ETag": str(found["etag"])})
