"""The emulator's own test API under ``/_emu/`` (no token; never logged, never faulted):

- ``GET /_emu/config``; ``PATCH /_emu/config`` sets ``lro_delay``, ``page_size``,
  ``token_ttl``, ``zones`` and ``extra_api_versions``; ``POST /_emu/clients`` registers a
  client (``client_id``, ``secret``, ``federated_subjects``, ``certificates``: PEM);
  ``POST /_emu/identities`` (``name``, ``resource_group``: a user-assigned identity); ``PUT
  /_emu/vm-identity`` (``id``, ``system``, ``user``: the VM's identities); ``POST
  /_emu/resource-groups``;
- ``POST /_emu/vms`` (``/_emu/vms/bulk``: many) and ``POST /_emu/vmss`` seed (see
  :mod:`kccm.emulators.azure.seed`);
  ``PUT /_emu/power`` (``id``, ``state``); ``POST /_emu/delete-vm`` (``id``); ``PUT
  /_emu/imds`` (``id``: the VM the metadata service answers for); ``POST
  /_emu/imds-listeners`` (``id``: a metadata service of that VM's own, on a new port);
- ``GET /_emu/resource?id=`` (a resource as ARM renders it, without a logged call);
- the request log, faults and token expiry as every emulator serves them
  (:mod:`kccm.emulators.control_routes`); ``GET /_emu/tokens`` (who signed in, how); ``POST
  /_emu/settle`` (pending operations complete now); ``GET /_emu/state`` (what a test may have
  left behind).
"""

from __future__ import annotations

import socket
import urllib.parse
from typing import Any

from aiohttp import web

from kccm.emulators.azure import seed
from kccm.emulators.azure.addresses import ip_configurations
from kccm.emulators.azure.assertions import register_certificates
from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.faults import add_fault
from kccm.emulators.azure.identities import add_identity, assign_identity
from kccm.emulators.azure.imds import build_imds_app
from kccm.emulators.azure.rest import WORLD, json_body, reply
from kccm.emulators.azure.store import render, settle, settle_all
from kccm.emulators.azure.world import DEFAULTS, World
from kccm.emulators.control_routes import control_routes

__all__ = ["IMDS_LISTENERS", "config", "routes", "state"]

IMDS_LISTENERS = web.AppKey("imds_listeners", list[web.AppRunner])

STATE_TYPES = {
    "loadBalancers": "Microsoft.Network/loadBalancers",
    "publicIPAddresses": "Microsoft.Network/publicIPAddresses",
    "networkInterfaces": "Microsoft.Network/networkInterfaces",
    "networkSecurityGroups": "Microsoft.Network/networkSecurityGroups",
    "routeTables": "Microsoft.Network/routeTables",
    "virtualNetworks": "Microsoft.Network/virtualNetworks",
    "virtualMachines": "Microsoft.Compute/virtualMachines",
    "availabilitySets": "Microsoft.Compute/availabilitySets",
    "virtualMachineScaleSets": "Microsoft.Compute/virtualMachineScaleSets",
    "scaleSetInstances": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
}


def config(world: World) -> dict[str, Any]:
    return {
        **DEFAULTS,
        "base_url": world.base_url,
        "imds_url": world.imds_url,
        "subscription": world.subscription,
        "location": world.location,
        "zones": list(world.zones),
        "lro_delay": world.lro_delay,
        "page_size": world.page_size,
        "token_ttl": world.token_ttl,
        "extra_api_versions": sorted(world.extra_api_versions),
    }


routes = control_routes(WORLD, config, add_fault, json_body)


@routes.patch("/_emu/config")
async def set_config(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    if "lro_delay" in body:
        world.lro_delay = float(body["lro_delay"])
    if "page_size" in body:
        world.page_size = max(1, int(body["page_size"]))
    if "token_ttl" in body:
        world.token_ttl = float(body["token_ttl"])
    if "zones" in body:
        world.zones = [str(z) for z in body["zones"]]
    if "extra_api_versions" in body:
        world.extra_api_versions = {str(v) for v in body["extra_api_versions"]}
    return reply(config(world))


@routes.post("/_emu/clients")
async def post_client(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    client_id = str(body["client_id"])
    if body.get("secret") or client_id not in world.clients:
        world.clients[client_id] = str(body.get("secret", ""))
    if body.get("federated_subjects"):
        world.federated_subjects[client_id] = {str(s) for s in body["federated_subjects"]}
    register_certificates(world, client_id, [str(c) for c in body.get("certificates") or ()])
    return reply({"client_id": client_id}, 201)


@routes.post("/_emu/identities")
async def post_identity(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    return reply(add_identity(world, str(body["name"]), str(body.get("resource_group", ""))), 201)


@routes.put("/_emu/vm-identity")
async def put_vm_identity(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    user = [str(u) for u in body.get("user") or ()]
    return reply(assign_identity(world, str(body["id"]), bool(body.get("system")), user))


@routes.post("/_emu/resource-groups")
async def post_group(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    world.add_group(str(body["name"]))
    return reply({"name": body["name"]}, 201)


@routes.post("/_emu/vms")
async def post_vm(request: web.Request) -> web.Response:
    return reply(seed.add_vm(request.app[WORLD], await json_body(request)), 201)


@routes.post("/_emu/vms/bulk")
async def post_vms(request: web.Request) -> web.Response:
    """Many VMs in one call (``{"vms": [spec, ...]}``): their ids."""
    world, body = request.app[WORLD], await json_body(request)
    return reply({"ids": [seed.add_vm(world, spec)["id"] for spec in body.get("vms") or []]}, 201)


@routes.post("/_emu/vmss")
async def post_vmss(request: web.Request) -> web.Response:
    return reply(seed.add_vmss(request.app[WORLD], await json_body(request)), 201)


@routes.put("/_emu/power")
async def put_power(request: web.Request) -> web.Response:
    body = await json_body(request)
    return reply(seed.set_power(request.app[WORLD], str(body["id"]), str(body["state"])))


@routes.post("/_emu/delete-vm")
async def post_delete_vm(request: web.Request) -> web.Response:
    body = await json_body(request)
    seed.delete_vm(request.app[WORLD], str(body["id"]))
    return web.Response(status=204)


@routes.put("/_emu/imds")
async def put_imds(request: web.Request) -> web.Response:
    world, body = request.app[WORLD], await json_body(request)
    if world.get(str(body["id"])) is None:
        raise ArmError(404, "ResourceNotFound", f"No VM {body['id']}.")
    world.imds_vm = str(body["id"])
    return reply({"id": world.imds_vm})


@routes.post("/_emu/imds-listeners")
async def post_imds_listener(request: web.Request) -> web.Response:
    """A metadata service of its own for one VM, on a new plain-HTTP port: its URL."""
    world, body = request.app[WORLD], await json_body(request)
    vm_id = str(body["id"])
    if world.get(vm_id) is None:
        raise ArmError(404, "ResourceNotFound", f"No VM {vm_id}.")
    host = urllib.parse.urlsplit(world.imds_url).hostname or "127.0.0.1"
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, 0))
    sock.listen(128)
    sock.setblocking(False)
    runner = web.AppRunner(build_imds_app(world, vm_id), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    request.app[IMDS_LISTENERS].append(runner)
    shown = f"[{host}]" if ":" in host else host
    return reply({"url": f"http://{shown}:{sock.getsockname()[1]}", "id": vm_id}, 201)


@routes.get("/_emu/resource")
async def get_resource(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    settle(world)
    found = world.get(request.query.get("id", ""))
    if found is None:
        raise ArmError(404, "ResourceNotFound", f"No resource {request.query.get('id')}.")
    return reply(render(world, found, True))


@routes.get("/_emu/tokens")
async def get_tokens(request: web.Request) -> web.Response:
    """The tokens issued, oldest first: client, how it signed in, when it expires (never the
    token itself)."""
    tokens = request.app[WORLD].tokens.values()
    return reply(
        [{"client_id": t.client_id, "source": t.source, "expires": t.expires} for t in tokens]
    )


@routes.post("/_emu/settle")
async def post_settle(request: web.Request) -> web.Response:
    return reply({"settled": settle_all(request.app[WORLD])})


def _children(world: World, type_: str, prop: str) -> list[str]:
    return sorted(
        f"{obj['name']}/{item['name']}"
        for obj in world.of_type(type_)
        for item in obj["properties"].get(prop) or []
    )


def _network_configs(vmss: Any) -> list[Any]:
    profile = vmss["properties"].get("virtualMachineProfile") or {}
    return list((profile.get("networkProfile") or {}).get("networkInterfaceConfigurations") or [])


def state(world: World) -> dict[str, list[str]]:
    """What tests make and must remove: every resource by type, and the parts a provider
    changes inside seeded ones (security rules, routes, subnets, pool memberships of IP
    configurations and of scale-set models), and operations still pending."""
    found = {
        label: sorted(str(o["id"]) for o in world.of_type(type_))
        for label, type_ in STATE_TYPES.items()
    }
    found["securityRules"] = _children(world, STATE_TYPES["networkSecurityGroups"], "securityRules")
    found["routes"] = sorted(
        f"{rt['name']}/{r['name']}: {r['properties'].get('addressPrefix')} -> "
        f"{r['properties'].get('nextHopIpAddress', r['properties'].get('nextHopType'))}"
        for rt in world.of_type(STATE_TYPES["routeTables"])
        for r in rt["properties"].get("routes") or []
    )
    found["subnets"] = _children(world, STATE_TYPES["virtualNetworks"], "subnets")
    found["poolMembers"] = sorted(
        f"{ipc_id} -> {pool['id']}"
        for ipc_id, props in ip_configurations(world)
        for pool in props.get("loadBalancerBackendAddressPools") or []
    )
    found["scaleSetModelPools"] = sorted(
        f"{vmss['id']} -> {pool['id']}"
        for vmss in world.of_type(STATE_TYPES["virtualMachineScaleSets"])
        for config in _network_configs(vmss)
        for ipc in (config.get("properties") or {}).get("ipConfigurations") or []
        for pool in (ipc.get("properties") or {}).get("loadBalancerBackendAddressPools") or []
    )
    found["pendingOperations"] = sorted(
        op.id for op in world.pending.values() if op.status == "InProgress"
    )
    return found


@routes.get("/_emu/state")
async def get_state(request: web.Request) -> web.Response:
    """The state once the operations whose time has come completed (as an ARM call sees it)."""
    settle(request.app[WORLD])
    return reply(state(request.app[WORLD]))
