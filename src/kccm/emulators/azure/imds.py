"""The instance metadata service (plain HTTP on a port of its own, laid out as
``169.254.169.254`` is): ``/metadata/instance``, ``/metadata/loadbalancer`` and
``/metadata/identity/oauth2/token`` (managed identity: the VM's identities, see
:mod:`kccm.emulators.azure.identities`), each refusing a call without the
``Metadata: true`` header or an ``api-version`` as IMDS does. It answers for one VM or
scale-set instance: the one a test chose (``PUT /_emu/imds`` on the ARM port), or on a
listener of its own per VM (``POST /_emu/imds-listeners``), as one IMDS per node is. A client
pointed at it as an HTTP proxy (Go's default transport with ``HTTP_PROXY``, upstream's way to
169.254.169.254) sends absolute-form targets, routed on their path. Shapes as
cloud-provider-azure v1.36.5 ``pkg/provider/azure_instance_metadata.go`` reads them.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web

from kccm.emulators.azure.addresses import subnet_prefix, vmss_instance_nics, vmss_public_ips
from kccm.emulators.azure.faults import fault_middleware
from kccm.emulators.azure.identities import select_identity
from kccm.emulators.azure.log import log_middleware
from kccm.emulators.azure.rest import WORLD, reply
from kccm.emulators.azure.world import Obj, World

__all__ = ["build_imds_app", "instance_metadata", "loadbalancer_metadata"]

routes = web.RouteTableDef()
IMDS_VM = web.AppKey("imds_vm", str)
VMSS_VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"


def _bad(message: str, status: int = 400) -> web.Response:
    return reply({"error": f"{message} For more information refer to aka.ms/azureimds"}, status)


def _refused(request: web.Request) -> web.Response | None:
    if request.headers.get("Metadata", "").lower() != "true":
        return _bad("Bad request. Required metadata header not specified.")
    if not request.query.get("api-version"):
        return _bad("Bad request. api-version was not specified in the request.")
    return None


def _vm(request: web.Request) -> Obj | None:
    """The VM this listener answers for: its own, or the one the test chose last."""
    world = request.app[WORLD]
    chosen = request.app[IMDS_VM] or world.imds_vm
    return world.get(chosen) if chosen else None


def _nics(world: World, vm: Obj) -> list[Obj]:
    if vm["type"] == VMSS_VM_TYPE:
        return vmss_instance_nics(world, vm)
    found = []
    for item in (vm["properties"].get("networkProfile") or {}).get("networkInterfaces") or []:
        nic = world.get(str(item["id"]))
        if nic is not None:
            found.append(nic)
    return found


def _interface(world: World, nic: Obj, publics: dict[str, str]) -> dict[str, Any]:
    families: dict[str, dict[str, list[dict[str, str]]]] = {
        "ipv4": {"ipAddress": [], "subnet": []},
        "ipv6": {"ipAddress": []},
    }
    for ipc in nic["properties"].get("ipConfigurations") or []:
        props = ipc.get("properties") or {}
        family = "ipv6" if props.get("privateIPAddressVersion") == "IPv6" else "ipv4"
        pip_id = str((props.get("publicIPAddress") or {}).get("id", ""))
        pip = world.get(pip_id)
        public = publics.get(pip_id.lower(), "")
        if pip is not None:
            public = str(pip["properties"].get("ipAddress") or "")
        families[family]["ipAddress"].append(
            {
                "privateIpAddress": str(props.get("privateIPAddress") or ""),
                "publicIpAddress": public,
            }
        )
        prefix = subnet_prefix(world, str((props.get("subnet") or {}).get("id", "")))
        if family == "ipv4" and prefix:
            net = ipaddress.ip_network(prefix, strict=False)
            subnet = {"address": str(net.network_address), "prefix": str(net.prefixlen)}
            if subnet not in families["ipv4"]["subnet"]:
                families["ipv4"]["subnet"].append(subnet)
    mac = str(nic["properties"].get("macAddress", "")).replace("-", "")
    return {**families, "macAddress": mac}


def instance_metadata(world: World, vm: Obj) -> dict[str, Any]:
    parts = str(vm["id"]).split("/")
    scale_set = parts[8] if vm["type"] == VMSS_VM_TYPE else ""
    props = vm["properties"]
    size = (props.get("hardwareProfile") or {}).get("vmSize") or (vm.get("sku") or {}).get("name")
    publics = {}
    if vm["type"] == VMSS_VM_TYPE:
        publics = {
            str(p["id"]).lower(): str(p["properties"]["ipAddress"])
            for p in vmss_public_ips(world, vm)
        }
    return {
        "compute": {
            "azEnvironment": "AzureStackCloud",
            "location": vm["location"],
            "name": vm["name"],
            "osType": "Linux",
            "platformFaultDomain": str(vm.get("_fault_domain", 0)),
            "platformUpdateDomain": str(vm.get("_update_domain", 0)),
            "resourceGroupName": parts[4],
            "resourceId": vm["id"],
            "subscriptionId": world.subscription,
            "tagsList": [{"name": k, "value": v} for k, v in (vm.get("tags") or {}).items()],
            "vmId": props.get("vmId", ""),
            "vmScaleSetName": scale_set,
            "vmSize": size or "",
            "zone": (vm.get("zones") or [""])[0],
        },
        "network": {"interface": [_interface(world, nic, publics) for nic in _nics(world, vm)]},
    }


def loadbalancer_metadata(world: World, vm: Obj) -> dict[str, Any]:
    """The public frontends of the balancers whose pools hold one of the VM's addresses."""
    pools: dict[str, str] = {}
    for nic in _nics(world, vm):
        for ipc in nic["properties"].get("ipConfigurations") or []:
            props = ipc.get("properties") or {}
            for pool in props.get("loadBalancerBackendAddressPools") or []:
                pools[str(pool["id"]).lower()] = str(props.get("privateIPAddress") or "")
    found = []
    for lb in world.of_type("Microsoft.Network/loadBalancers"):
        private = next(
            (
                address
                for pool in lb["properties"].get("backendAddressPools") or []
                if (address := pools.get(str(pool["id"]).lower()))
            ),
            None,
        )
        if private is None:
            continue
        for fe in lb["properties"].get("frontendIPConfigurations") or []:
            pip = world.get(str((fe["properties"].get("publicIPAddress") or {}).get("id", "")))
            if pip is not None and pip["properties"].get("ipAddress"):
                found.append(
                    {
                        "frontendIpAddress": pip["properties"]["ipAddress"],
                        "privateIpAddress": private,
                    }
                )
    return {"loadbalancer": {"publicIpAddresses": found, "inboundRules": [], "outboundRules": []}}


@routes.get("/metadata/instance")
async def get_instance(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    refused = _refused(request)
    vm = _vm(request)
    if refused is not None or vm is None:
        return refused or _bad("Not found. No virtual machine is chosen.", 404)
    return reply(instance_metadata(world, vm))


@routes.get("/metadata/loadbalancer")
async def get_loadbalancer(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    refused = _refused(request)
    vm = _vm(request)
    if refused is not None or vm is None:
        return refused or _bad("Not found. No virtual machine is chosen.", 404)
    return reply(loadbalancer_metadata(world, vm))


@routes.get("/metadata/identity/oauth2/token")
async def get_identity_token(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    refused = _refused(request)
    if refused is not None:
        return refused
    resource = request.query.get("resource", "")
    if not resource:
        return reply(
            {
                "error": "invalid_request",
                "error_description": "Required query variable 'resource' is missing",
            },
            400,
        )
    vm = _vm(request)
    if vm is None:  # a metadata service bound to no VM: whichever identity is asked for
        client_id = request.query.get("client_id") or "kccm-managed-identity"
    else:
        try:
            client_id = select_identity(vm, request.query)
        except ValueError as exc:
            return reply({"error": "invalid_request", "error_description": str(exc)}, 400)
    token = world.issue_token(client_id, "managed-identity")
    ttl = int(token.expires - token.issued)
    return reply(
        {
            "access_token": token.value,
            "client_id": client_id,
            "expires_in": str(ttl),
            "expires_on": str(int(token.expires)),
            "ext_expires_in": str(ttl),
            "not_before": str(int(token.issued)),
            "resource": resource,
            "token_type": "Bearer",
        }
    )


def build_imds_app(world: World, vm_id: str = "") -> web.Application:
    """The metadata service's application, for ``vm_id`` or (without one) the VM the test
    chose (its calls are logged as service ``imds``, and faulted like any other)."""
    app = web.Application(middlewares=[log_middleware, fault_middleware])
    app[WORLD] = world
    app[IMDS_VM] = vm_id
    app.router.add_routes(routes)
    return app
