"""The request log: every call but the emulator's own ``/_emu`` API, with its service
(``adfs``, ``arm``, ``imds``), method, path, query, ``api-version``, its time (``at``, on
the server's clock), the operation it is (the
path's resource types without names: ``GET Microsoft.Network/loadBalancers/{}``, where ``{}``
stands for a name) and the status answered. ARM's answers carry the
``x-ms-ratelimit-remaining-subscription-[global-]reads|writes`` headers (a throttling fault
sets them to 0) and ``x-ms-request-id``/``x-ms-correlation-request-id``, as ARM's do.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from kccm.emulators.azure.rest import WORLD, Handler

__all__ = ["log_middleware", "operation_of", "service_of"]

REMAINING_READS = "11999"
REMAINING_WRITES = "1199"


def service_of(path: str) -> str:
    if path.startswith("/_emu"):
        return "admin"
    if path.startswith("/adfs"):
        return "adfs"
    if path.startswith("/metadata/") and not path.startswith("/metadata/endpoints"):
        return "imds"
    return "arm"


def operation_of(method: str, path: str) -> str:
    """``GET Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines`` for a path: its
    resource types, its names as ``{}``."""
    segs = [s for s in path.strip("/").split("/") if s]
    low = [s.lower() for s in segs]
    if "providers" not in low:
        return f"{method} resourceGroups/{{}}" if "resourcegroups" in low else f"{method} {path}"
    tail = segs[low.index("providers") + 1 :]
    if len(tail) <= 1:
        return f"{method} providers/{''.join(tail)}"
    parts = [tail[0]] + [seg if i % 2 == 0 else "{}" for i, seg in enumerate(tail[1:])]
    return f"{method} {'/'.join(parts)}"


def _entry(request: web.Request, service: str) -> dict[str, Any]:
    world = request.app[WORLD]
    world.seq += 1
    entry: dict[str, Any] = {
        "seq": world.seq,
        "service": service,
        "method": request.method,
        "path": request.path,
        "query": request.query_string,
        "api_version": request.query.get("api-version", ""),
        "op": operation_of(request.method, request.path) if service == "arm" else "",
        "at": world.clock(),
        "status": 0,
    }
    world.requests.append(entry)
    return entry


@web.middleware
async def log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    service = service_of(request.path)
    if service == "admin":
        return await handler(request)
    entry = _entry(request, service)
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        entry["status"] = exc.status
        raise
    entry["status"] = response.status
    if service == "arm":
        reads = request.method in ("GET", "HEAD")
        kind = "reads" if reads else "writes"
        for name in (f"subscription-{kind}", f"subscription-global-{kind}"):
            header = f"x-ms-ratelimit-remaining-{name}"
            response.headers.setdefault(header, REMAINING_READS if reads else REMAINING_WRITES)
        request_id = str(uuid.uuid4())
        response.headers.setdefault("x-ms-request-id", request_id)
        response.headers.setdefault(
            "x-ms-correlation-request-id",
            request.headers.get("x-ms-correlation-request-id", request_id),
        )
    return response
