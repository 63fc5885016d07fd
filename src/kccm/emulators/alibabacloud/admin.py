"""The Alibaba Cloud emulator's ``/_emu`` test API: the shared routes
(:func:`kccm.emulators.control_routes.control_routes`: config, request log, faults, token
expiry) and its own: seeding instances and route tables, an instance's status, the instance the
metadata service answers for, the state a leak check compares, for the SLB: a balancer with
its listeners and groups as one JSON, its removal whatever its protection, EIPs bound to it and
the health of a member; for the NLB: the same views and removals and how many reads a job
answers ``Processing``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aiohttp import web

from kccm.emulators.alibabacloud.ecs import render_instance
from kccm.emulators.alibabacloud.nlb import render_nlb
from kccm.emulators.alibabacloud.nlb_groups import render_group, render_server
from kccm.emulators.alibabacloud.nlb_listeners import render_nlb_listener
from kccm.emulators.alibabacloud.slb import render_balancer
from kccm.emulators.alibabacloud.slb_listeners import render_listener
from kccm.emulators.alibabacloud.slbmodel import Certificate, Eip
from kccm.emulators.alibabacloud.world import Fault, Instance, RouteEntry, RouteTable, World
from kccm.emulators.control_routes import control_routes

__all__ = ["WORLD", "admin_routes"]

WORLD = web.AppKey("world", World)


def _reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


async def _json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as err:
        raise web.HTTPBadRequest(text=f"not JSON: {err}") from err
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="a JSON object is expected")
    return body


def _config(world: World) -> dict[str, Any]:
    return {"region": world.region, "keys": dict(world.keys), "role": world.role}


def _add_fault(world: World, body: dict[str, Any]) -> Fault:
    fields = {f.name for f in dataclasses.fields(Fault)}
    fault = Fault(**{k: v for k, v in body.items() if k in fields})
    world.fault_list.append(fault)
    return fault


def _instance(world: World, body: dict[str, Any]) -> Instance:
    fields = {f.name for f in dataclasses.fields(Instance)}
    spec = {k: v for k, v in body.items() if k in fields}
    spec.setdefault("id", world.new_id("i"))
    spec.setdefault("region", world.region)
    spec.setdefault("zone", f"{world.region}-h")
    spec.setdefault("eni", world.new_id("eni"))
    return Instance(**spec)


def _balancer_view(world: World, lb_id: str) -> dict[str, Any]:
    found = world.slb.balancers.get(lb_id)
    if found is None:
        raise web.HTTPNotFound(text="no such balancer")
    groups = [g for g in world.slb.vgroups.values() if g.lb == lb_id]
    return {
        **render_balancer(found),
        "Listeners": [render_listener(lb_id, item) for _, item in sorted(found.listeners.items())],
        "VServerGroups": [
            {
                "VServerGroupId": g.id,
                "VServerGroupName": g.name,
                "BackendServers": [m.render() for m in g.members],
            }
            for g in groups
        ],
    }


def slb_routes(routes: web.RouteTableDef) -> None:
    @routes.get("/_emu/balancers/{id}")
    async def get_balancer(request: web.Request) -> web.Response:
        return _reply(_balancer_view(request.app[WORLD], request.match_info["id"]))

    @routes.delete("/_emu/balancers/{id}")
    async def delete_balancer(request: web.Request) -> web.Response:
        world, lb_id = request.app[WORLD], request.match_info["id"]
        if world.slb.balancers.pop(lb_id, None) is not None:
            for table in (world.slb.vgroups, world.slb.domains):
                for gone in [k for k, v in table.items() if v.lb == lb_id]:
                    del table[gone]
        return web.Response(status=204)

    @routes.post("/_emu/eips")
    async def add_eip(request: web.Request) -> web.Response:
        world, body = request.app[WORLD], await _json(request)
        eip = Eip(world.new_id("eip"), str(body["ip"]), world.region, str(body.get("lb") or ""))
        world.slb.eips[eip.id] = eip
        return _reply({"id": eip.id}, 201)

    @routes.delete("/_emu/eips/{id}")
    async def delete_eip(request: web.Request) -> web.Response:
        request.app[WORLD].slb.eips.pop(request.match_info["id"], None)
        return web.Response(status=204)

    @routes.post("/_emu/certificates")
    async def add_certificate(request: web.Request) -> web.Response:
        world, body = request.app[WORLD], await _json(request)
        cert = Certificate(
            str(body.get("id") or world.new_id("cert")),
            world.region,
            name=str(body.get("name") or ""),
            common_name=str(body.get("common_name") or ""),
            expire_ms=int(body.get("expire_ms") or 0),
            created_ms=int(body.get("created_ms") or 0),
        )
        world.slb.certificates[cert.id] = cert
        return _reply({"id": cert.id}, 201)

    @routes.delete("/_emu/certificates/{id}")
    async def delete_certificate(request: web.Request) -> web.Response:
        request.app[WORLD].slb.certificates.pop(request.match_info["id"], None)
        return web.Response(status=204)

    @routes.put("/_emu/health/{server}")
    async def set_health(request: web.Request) -> web.Response:
        status = str((await _json(request))["status"])
        request.app[WORLD].slb.health[request.match_info["server"]] = status
        return web.Response(status=204)


def _nlb_view(world: World, lb_id: str) -> dict[str, Any]:
    found = world.nlb.balancers.get(lb_id)
    if found is None:
        raise web.HTTPNotFound(text="no such NLB")
    listeners = [i for _, i in sorted(world.nlb.listeners.items()) if i.lb == lb_id]
    groups = [
        world.nlb.groups[g] for g in sorted({i.group for i in listeners}) if g in world.nlb.groups
    ]
    return {
        **render_nlb(found),
        "Listeners": [render_nlb_listener(i, found.region) for i in listeners],
        "ServerGroups": [
            {
                **render_group(world, g),
                "Servers": [render_server(world, g, m) for m in g.servers],
            }
            for g in groups
        ],
    }


def nlb_routes(routes: web.RouteTableDef) -> None:
    @routes.get("/_emu/nlb/{id}")
    async def get_nlb(request: web.Request) -> web.Response:
        return _reply(_nlb_view(request.app[WORLD], request.match_info["id"]))

    @routes.delete("/_emu/nlb/{id}")
    async def delete_nlb(request: web.Request) -> web.Response:
        world, lb_id = request.app[WORLD], request.match_info["id"]
        world.nlb.balancers.pop(lb_id, None)
        for gone in [k for k, v in world.nlb.listeners.items() if v.lb == lb_id]:
            del world.nlb.listeners[gone]
        return web.Response(status=204)

    @routes.delete("/_emu/nlb-server-groups/{id}")
    async def delete_server_group(request: web.Request) -> web.Response:
        world, group_id = request.app[WORLD], request.match_info["id"]
        world.nlb.groups.pop(group_id, None)
        for gone in [k for k, v in world.nlb.listeners.items() if v.group == group_id]:
            del world.nlb.listeners[gone]
        return web.Response(status=204)

    @routes.put("/_emu/nlb-job-reads")
    async def set_job_reads(request: web.Request) -> web.Response:
        request.app[WORLD].nlb.job_reads = int((await _json(request))["reads"])
        return web.Response(status=204)


def admin_routes() -> web.RouteTableDef:
    routes = control_routes(WORLD, _config, _add_fault, _json)

    @routes.post("/_emu/instances")
    async def add_instance(request: web.Request) -> web.Response:
        world = request.app[WORLD]
        instance = _instance(world, await _json(request))
        world.instances[instance.id] = instance
        return _reply(render_instance(instance), 201)

    @routes.get("/_emu/instances/{id}")
    async def get_instance(request: web.Request) -> web.Response:
        instance = request.app[WORLD].instances.get(request.match_info["id"])
        if instance is None:
            raise web.HTTPNotFound(text="no such instance")
        return _reply(dataclasses.asdict(instance))

    @routes.put("/_emu/instances/{id}/status")
    async def set_status(request: web.Request) -> web.Response:
        instance = request.app[WORLD].instances.get(request.match_info["id"])
        if instance is None:
            raise web.HTTPNotFound(text="no such instance")
        instance.status = str((await _json(request))["status"])
        return _reply(dataclasses.asdict(instance))

    @routes.delete("/_emu/instances/{id}")
    async def delete_instance(request: web.Request) -> web.Response:
        world, gone = request.app[WORLD], request.match_info["id"]
        world.instances.pop(gone, None)
        for group in world.slb.vgroups.values():  # a released instance leaves its groups
            group.members = [m for m in group.members if m.server_id != gone]
        for server_group in world.nlb.groups.values():
            server_group.servers = [m for m in server_group.servers if m.server_id != gone]
        return web.Response(status=204)

    @routes.post("/_emu/route-tables")
    async def add_route_table(request: web.Request) -> web.Response:
        world, body = request.app[WORLD], await _json(request)
        table = RouteTable(
            str(body.get("id") or world.new_id("vtb")),
            str(body["vpc"]),
            str(body.get("region") or world.region),
        )
        for entry in body.get("entries") or ():
            table.entries.append(
                RouteEntry(world.new_id("rte"), str(entry["cidr"]), str(entry["next_hop"]))
            )
        world.route_tables[table.id] = table
        return _reply({"id": table.id}, 201)

    @routes.delete("/_emu/route-tables/{id}")
    async def delete_route_table(request: web.Request) -> web.Response:
        request.app[WORLD].route_tables.pop(request.match_info["id"], None)
        return web.Response(status=204)

    @routes.put("/_emu/metadata-instance")
    async def set_metadata_instance(request: web.Request) -> web.Response:
        request.app[WORLD].metadata_instance = str((await _json(request))["id"])
        return web.Response(status=204)

    slb_routes(routes)
    nlb_routes(routes)

    @routes.get("/_emu/state")
    async def state(request: web.Request) -> web.Response:
        return _reply(request.app[WORLD].state())

    return routes
