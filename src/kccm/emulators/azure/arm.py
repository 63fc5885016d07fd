"""ARM's front door: every call under ``/subscriptions/`` is parsed here (case-insensitively,
as ARM does) and answered: resource providers (``GET providers/Microsoft.Compute`` with its
zone map), resource groups, lists with ``nextLink`` pages, GET/PUT/PATCH/DELETE of top-level
resources, the operations a long-running call hands out to poll, and below a resource what
:mod:`kccm.emulators.azure.arm_sub` serves (children, scale-set instances, actions).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from kccm.emulators.azure import arm_sub
from kccm.emulators.azure.errors import ArmError, group_not_found, not_found
from kccm.emulators.azure.kinds import KINDS, Kind, kind_of_type
from kccm.emulators.azure.rest import API_VERSIONS, WORLD, check_api_version, json_body, reply
from kccm.emulators.azure.store import (
    begin_delete,
    begin_put,
    build,
    check_preconditions,
    lro_headers,
    operation_body,
    page,
    public,
    render,
    settle,
)
from kccm.emulators.azure.world import Obj, World

__all__ = ["merge_patch", "provider_body", "routes"]

routes = web.RouteTableDef()

LOCATION_NAMES = {
    "eastus": "East US",
    "eastus2": "East US 2",
    "westus": "West US",
    "westus2": "West US 2",
    "westus3": "West US 3",
    "centralus": "Central US",
    "northeurope": "North Europe",
    "westeurope": "West Europe",
}
PROVIDER_TYPES = {
    "microsoft.compute": ("virtualMachines", "virtualMachineScaleSets", "availabilitySets"),
    "microsoft.network": (
        "loadBalancers",
        "publicIPAddresses",
        "networkInterfaces",
        "networkSecurityGroups",
        "routeTables",
        "virtualNetworks",
    ),
}


def provider_body(world: World, namespace: str, zones: list[str]) -> dict[str, Any]:
    """A registered resource provider with its types, as ARM's ``providers/{namespace}``
    answers (the zone map is what upstream reads)."""
    canonical = "Microsoft.Compute" if namespace.lower() == "microsoft.compute" else namespace
    if namespace.lower() == "microsoft.network":
        canonical = "Microsoft.Network"
    display = LOCATION_NAMES.get(world.location, world.location)
    versions = sorted(API_VERSIONS.get(namespace.lower(), frozenset()), reverse=True)
    types = []
    for type_ in PROVIDER_TYPES.get(namespace.lower(), ()):
        entry: dict[str, Any] = {
            "resourceType": type_,
            "locations": [display],
            "apiVersions": versions,
            "capabilities": "SupportsTags, SupportsLocation",
        }
        if zones:
            entry["zoneMappings"] = [{"location": display, "zones": list(zones)}]
        types.append(entry)
    return {
        "id": f"/subscriptions/{world.subscription}/providers/{canonical}",
        "namespace": canonical,
        "authorizations": [],
        "registrationState": "Registered",
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": types,
    }


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 merge of ``patch`` onto ``target`` (what ARM's PATCH does)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def expand_instance_view(request: web.Request) -> bool:
    return "instanceview" in request.query.get("$expand", "").lower()


@routes.route("*", "/subscriptions/{tail:.*}")
async def arm(request: web.Request) -> web.StreamResponse:
    world = request.app[WORLD]
    settle(world)
    segs = [s for s in request.path.strip("/").split("/") if s != ""]
    low = [s.lower() for s in segs]
    if len(segs) < 2 or low[1] != world.subscription.lower():
        sub = segs[1] if len(segs) > 1 else ""
        raise ArmError(404, "SubscriptionNotFound", f"The subscription '{sub}' could not be found.")
    if len(segs) >= 3 and low[2] == "providers":
        return await _subscription_level(request, segs)
    if len(segs) == 4 and low[2] == "resourcegroups" and request.method in ("PUT", "DELETE"):
        return await _group_write(request, segs[3])
    if len(segs) >= 4 and low[2] == "resourcegroups":
        return await _group_level(request, segs)
    if len(segs) == 4 and low[2] == "operationresults":
        _method(request, "GET")
        return _group_deletion(request, segs[3])
    raise _no_route(request)


async def _group_write(request: web.Request, group: str) -> web.Response:
    """A resource group made (201, or 200 when it exists), or deleted with everything in it
    (202 and a ``Location`` to poll, as ARM answers)."""
    world = request.app[WORLD]
    api = check_api_version(request, "Microsoft.Resources", "resourceGroups")
    if request.method == "PUT":
        body = await json_body(request)
        existed = world.has_group(group)
        world.add_group(group)
        found = _group_body(world, group)
        if body.get("tags"):
            found["tags"] = body["tags"]
        return reply(found, 200 if existed else 201)
    if not world.has_group(group):
        raise group_not_found(group)
    prefix = world.group_prefix(world.groups[group.lower()]).lower() + "/"
    for key in [k for k in world.resources if k.startswith(prefix)]:
        gone = world.drop(key)
        kind = kind_of_type(str((gone or {}).get("type", "")))
        if gone is not None and kind is not None:
            kind.deleted(world, gone)
    del world.groups[group.lower()]
    location = f"{world.base_url}/subscriptions/{world.subscription}/operationresults/"
    return reply(None, 202, headers={"Location": f"{location}{group}?api-version={api}"})


def _group_deletion(request: web.Request, token: str) -> web.Response:
    """A resource group's deletion is done once it is asked after."""
    return reply(None, 200)


def _no_route(request: web.Request) -> ArmError:
    return ArmError(
        404,
        "NoRegisteredProviderFound",
        f"No registered resource provider found for path '{request.path}'.",
    )


def _method(request: web.Request, *allowed: str) -> None:
    if request.method not in allowed:
        raise ArmError(
            405,
            "MethodNotAllowed",
            f"The requested resource does not support http method '{request.method}'.",
        )


async def _subscription_level(request: web.Request, segs: list[str]) -> web.StreamResponse:
    world = request.app[WORLD]
    low = [s.lower() for s in segs]
    namespace = segs[3] if len(segs) > 3 else ""
    if len(segs) == 3:
        _method(request, "GET")
        check_api_version(request, "Microsoft.Resources", "providers")
        found = [provider_body(world, ns, world.zones) for ns in PROVIDER_TYPES]
        return reply(page(request, found))
    if len(segs) == 4:
        _method(request, "GET")
        check_api_version(request, "Microsoft.Resources", "providers")
        if low[3] not in PROVIDER_TYPES:
            raise ArmError(
                404,
                "InvalidResourceNamespace",
                f"The resource namespace '{namespace}' is invalid.",
            )
        return reply(provider_body(world, namespace, world.zones))
    if len(segs) == 8 and low[4] == "locations" and low[6] in ("operations", "operationresults"):
        _method(request, "GET")
        check_api_version(request, namespace, "locations/operations")
        return _poll(request, segs[7], results=low[6] == "operationresults")
    if len(segs) == 5:
        kind = KINDS.get((low[3], low[4]))
        if kind is None:
            raise _no_route(request)
        _method(request, "GET")
        check_api_version(request, kind.namespace, kind.type)
        items = sorted(world.of_type(kind.full_type), key=lambda o: str(o["id"]).lower())
        return reply(page(request, [render(world, o) for o in items]))
    raise _no_route(request)


def _poll(request: web.Request, op_id: str, *, results: bool) -> web.Response:
    world = request.app[WORLD]
    op = world.operations.get(op_id)
    if op is None:
        raise ArmError(404, "OperationNotFound", f"The operation '{op_id}' could not be found.")
    api = request.query.get("api-version", "")
    if not results:
        headers = (
            {}
            if op.status != "InProgress"
            else {"Retry-After": lro_headers(world, op, api, location=False)["Retry-After"]}
        )
        return reply(operation_body(world, op), headers=headers)
    if op.status == "InProgress":
        headers = lro_headers(world, op, api, location=True)
        return reply(
            None,
            202,
            headers={"Location": headers["Location"], "Retry-After": headers["Retry-After"]},
        )
    if op.error:
        raise ArmError(
            409 if op.status == "Canceled" else 400, op.error["code"], op.error["message"]
        )
    current = world.get(op.resource_id)
    if op.kind == "delete" or current is None:
        return reply(None, 204)
    return reply(render(world, current))


async def _group_level(request: web.Request, segs: list[str]) -> web.StreamResponse:
    world = request.app[WORLD]
    low = [s.lower() for s in segs]
    group = segs[3]
    if not world.has_group(group):
        raise group_not_found(group)
    if len(segs) == 4:
        _method(request, "GET")
        check_api_version(request, "Microsoft.Resources", "resourceGroups")
        return reply(_group_body(world, group))
    if len(segs) < 7 or low[4] != "providers":
        raise _no_route(request)
    kind = KINDS.get((low[5], low[6]))
    if kind is None and low[5] in PROVIDER_TYPES:
        return _unmodelled(request, segs)
    if kind is None:
        raise ArmError(
            404,
            "InvalidResourceType",
            f"The resource type '{segs[6]}' could not be found in the namespace '{segs[5]}'.",
        )
    rest = segs[7:]
    if arm_sub.network_versions(kind, rest):
        api = check_api_version(request, "Microsoft.Network", "networkInterfaces")
    else:
        api = check_api_version(request, kind.namespace, kind.type)
    if not rest:
        _method(request, "GET")
        return _list(request, kind, group)
    if len(rest) == 1:
        return await _resource(request, kind, group, rest[0], api)
    return await arm_sub.handle(request, kind, group, rest, api)


def _unmodelled(request: web.Request, segs: list[str]) -> web.Response:
    """A type of Compute or Network the emulator does not model (private link services, NAT
    gateways, disks, ...): none exist, so a list is empty and a GET is ARM's 404; a write is
    refused, naming the emulator's limit."""
    world = request.app[WORLD]
    check_api_version(request, segs[5], segs[6])
    if request.method == "GET" and len(segs) == 7:
        return reply(page(request, []))
    if request.method == "GET":
        raise not_found(f"{segs[5]}/{segs[6]}", segs[7], world.groups[segs[3].lower()])
    if request.method == "DELETE":
        return reply(None, 204)
    raise ArmError(
        400,
        "InvalidResourceType",
        f"The emulator does not model the resource type '{segs[5]}/{segs[6]}'.",
    )


def _group_body(world: World, group: str) -> Obj:
    name = world.groups[group.lower()]
    return {
        "id": world.group_prefix(name),
        "name": name,
        "type": "Microsoft.Resources/resourceGroups",
        "location": world.location,
        "properties": {"provisioningState": "Succeeded"},
    }


def _list(request: web.Request, kind: Kind, group: str) -> web.Response:
    world = request.app[WORLD]
    expand = expand_instance_view(request)
    items = list(world.of_type(kind.full_type, world.groups[group.lower()]))
    items = _scale_set_filter(items, request.query.get("$filter", ""))
    items.sort(key=lambda o: str(o["name"]).lower())
    return reply(page(request, [render(world, o, expand) for o in items]))


def _scale_set_filter(items: list[Obj], flt: str) -> list[Obj]:
    """``'virtualMachineScaleSet/id' eq '<id>'`` (upstream's Flex lists; ``notexists``: the
    VMs in no scale set); any other filter is not applied."""
    match = re.fullmatch(r"\s*'virtualMachineScaleSet/id'\s+eq\s+'([^']*)'\s*", flt, re.IGNORECASE)
    if match is None:
        return items
    wanted = match.group(1).lower()

    def owner(obj: Obj) -> str:
        return str((obj["properties"].get("virtualMachineScaleSet") or {}).get("id", "")).lower()

    if wanted == "notexists":
        return [o for o in items if not owner(o)]
    return [o for o in items if owner(o) == wanted]


async def _resource(
    request: web.Request, kind: Kind, group: str, name: str, api: str
) -> web.StreamResponse:
    world = request.app[WORLD]
    resource_id = world.resource_id(world.groups[group.lower()], kind.namespace, kind.type, name)
    current = world.get(resource_id)
    if request.method == "GET":
        if current is None:
            raise not_found(kind.full_type, name, world.groups[group.lower()])
        body = render(world, current, expand_instance_view(request))
        return reply(body, headers={"ETag": str(current["etag"])})
    if request.method in ("PUT", "PATCH"):
        return await _put(request, kind, group, name, current, api)
    if request.method == "DELETE":
        if current is None:
            return reply(None, 204)
        check_preconditions(request, current, kind.compute)
        kind.check_delete(world, current)
        if not kind.lro:
            world.drop(current["id"])
            kind.deleted(world, current)
            return reply(None, 200)
        op = begin_delete(world, kind, current)
        headers = lro_headers(world, op, api, location=True)
        return reply(None, 202, headers=headers)
    raise ArmError(405, "MethodNotAllowed", f"Method '{request.method}' is not allowed here.")


async def _put(
    request: web.Request, kind: Kind, group: str, name: str, current: Obj | None, api: str
) -> web.Response:
    world = request.app[WORLD]
    body = await json_body(request)
    check_preconditions(request, current, kind.compute)
    if request.method == "PATCH":
        if current is None:
            raise not_found(kind.full_type, name, world.groups[group.lower()])
        body = merge_patch(public(current), body)
    elif current is not None and kind.put_updates:
        # Compute's PUT on an existing VM or scale set updates what it names; the rest keeps
        # its value (upstream's ensureVMSSInPool PUTs only the network profile)
        body = merge_patch(public(current), body)
    obj = build(world, kind, group, name, body, current)
    if not kind.lro or kind.sync_put:
        if kind.lro:
            obj["properties"]["provisioningState"] = "Succeeded"
        world.put(obj)
        kind.finish(world, obj)
        status = 201 if current is None and kind.lro else 200
        return reply(render(world, obj), status, headers={"ETag": str(obj["etag"])})
    op = begin_put(world, kind, obj, created=current is None)
    headers = {**lro_headers(world, op, api, location=False), "ETag": str(obj["etag"])}
    return reply(render(world, obj), 201 if current is None else 200, headers=headers)
