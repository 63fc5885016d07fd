"""Per-call fault injection: a rule matches a service (or ``*``), a method (or ``*``) and a
regular expression searched in the request path, and answers ``times`` matching calls
(0 = every one) in one of three ways:

- ``error``: ``status`` with ``body`` (default: the service's own error body, e.g. a 503 in
  Octavia's ``faultstring`` shape) and ``headers`` (e.g. ``Retry-After`` on a 429), after
  ``latency`` seconds;
- ``conflict``: 409 with the service's conflict text; on Octavia the ``ImmutableObject``
  text of the balancer the path belongs to (a "409 storm" with ``times=N``);
- ``latency``: wait ``latency`` seconds, then serve the call as usual.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from kccm.emulators.openstack.errors import EmuError, error_response
from kccm.emulators.openstack.rest import WORLD, Handler, pause, service_of
from kccm.emulators.openstack.world import Fault, World

__all__ = ["add_fault", "fault_middleware", "match_fault"]

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def add_fault(world: World, spec: dict[str, Any]) -> Fault:
    kind = spec.get("kind", "error")
    if kind not in ("error", "conflict", "latency"):
        raise EmuError(400, f"unknown fault kind {kind!r}")
    re.compile(spec.get("path_regex", ""))
    world.fault_seq += 1
    fault = Fault(
        id=world.fault_seq,
        service=spec.get("service", "*"),
        method=str(spec.get("method", "*")).upper(),
        path_regex=spec.get("path_regex", ""),
        status=int(spec.get("status", 409 if kind == "conflict" else 500)),
        body=spec.get("body"),
        times=int(spec.get("times", 1)),
        latency=float(spec.get("latency", 0.0)),
        kind=kind,
        headers={str(k): str(v) for k, v in (spec.get("headers") or {}).items()},
    )
    world.faults.append(fault)
    return fault


def match_fault(world: World, service: str, method: str, path: str) -> Fault | None:
    """The first live rule for the call, counted as used."""
    for fault in world.faults:
        if fault.service not in ("*", service) or fault.method not in ("*", method):
            continue
        if not re.search(fault.path_regex, path):
            continue
        fault.hits += 1
        if fault.times and fault.hits >= fault.times:
            world.faults.remove(fault)
        return fault
    return None


def _lb_of(world: World, path: str) -> str:
    """The balancer an Octavia path is about (the id itself when it is none of ours)."""
    ids = UUID.findall(path)
    for ident in ids:
        if ident in world.loadbalancers:
            return str(ident)
        for store in (world.listeners, world.pools, world.healthmonitors, world.members):
            if ident in store:
                return _owner_lb(world, store[ident])
    return ids[0] if ids else "00000000-0000-0000-0000-000000000000"


def _owner_lb(world: World, obj: dict[str, Any]) -> str:
    """The stored object's balancer: listeners and pools keep it in ``_lb``, members and
    monitors reach it through their pool (``_pool``)."""
    if obj.get("_lb"):
        return str(obj["_lb"])
    pool = world.pools.get(obj.get("_pool") or "")
    return str(pool.get("_lb") or "") if pool else ""


def _conflict_text(world: World, service: str, path: str) -> str:
    if service == "load-balancer":
        return f"Load Balancer {_lb_of(world, path)} is immutable and cannot be updated."
    if service == "compute":
        return "Cannot perform the action while the instance is in this state."
    return "Conflict (injected)."


def _answer(world: World, service: str, fault: Fault, path: str) -> web.Response:
    message = f"Injected fault ({fault.status})"
    if fault.kind == "conflict":
        message = _conflict_text(world, service, path)
    kind = "Conflict" if fault.kind == "conflict" else ""
    error = EmuError(fault.status, message, body=fault.body, kind=kind)
    return error_response(
        service, error, auth_uri=f"{world.base_url}/identity", headers=fault.headers
    )


@web.middleware
async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    world = request.app[WORLD]
    service, _ = service_of(request.path)
    if service == "admin" or not world.faults:
        return await handler(request)
    fault = match_fault(world, service, request.method, request.path)
    if fault is None:
        return await handler(request)
    await pause(fault.latency)
    if fault.kind == "latency":
        return await handler(request)
    return _answer(world, service, fault, request.path)
