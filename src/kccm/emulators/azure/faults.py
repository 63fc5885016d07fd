"""Per-call fault injection. A rule matches a method (or ``*``) and a regular expression
searched (case-insensitively) in the request path, and answers ``times`` matching calls
(0 = every one) in one of five ways:

- ``error``: ``status`` with ARM's error body (``code``, ``message``) and ``headers``;
- ``throttle``: 429 ``TooManyRequests`` with ``Retry-After: retry_after`` and the
  ``x-ms-ratelimit-remaining-*`` headers at 0 (``subscription-reads`` for a GET, ``-writes``
  otherwise, and Compute's ``x-ms-ratelimit-remaining-resource``), as ARM throttles;
- ``precondition``: 412 ``PreconditionFailed`` (another writer changed the resource);
- ``expire_token``: the caller's token expires now, so ARM answers 401
  ``ExpiredAuthenticationToken``;
- ``latency``: wait ``latency`` seconds, then serve the call as usual.

Any of them may wait ``latency`` seconds first.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from kccm.emulators.azure.errors import ArmError, arm_response
from kccm.emulators.azure.rest import WORLD, Handler, pause
from kccm.emulators.azure.world import Fault, World

__all__ = ["KINDS", "add_fault", "fault_middleware", "match_fault"]

KINDS = ("error", "throttle", "precondition", "expire_token", "latency")
DEFAULT_STATUS = {"error": 500, "throttle": 429, "precondition": 412, "expire_token": 401}
DEFAULT_CODE = {
    "error": "InternalServerError",
    "throttle": "TooManyRequests",
    "precondition": "PreconditionFailed",
}


def add_fault(world: World, spec: dict[str, Any]) -> Fault:
    kind = str(spec.get("kind", "error"))
    if kind not in KINDS:
        raise ArmError(400, "InvalidFault", f"unknown fault kind {kind!r}; one of {KINDS}")
    try:
        re.compile(str(spec.get("path_regex", "")))
    except re.error as exc:
        raise ArmError(400, "InvalidFault", f"path_regex: {exc}") from exc
    world.fault_seq += 1
    fault = Fault(
        id=world.fault_seq,
        method=str(spec.get("method", "*")).upper(),
        path_regex=str(spec.get("path_regex", "")),
        kind=kind,
        status=int(spec.get("status") or DEFAULT_STATUS.get(kind, 200)),
        code=str(spec.get("code") or DEFAULT_CODE.get(kind, "")),
        message=str(spec.get("message") or ""),
        times=int(spec.get("times", 1)),
        latency=float(spec.get("latency", 0.0)),
        retry_after=int(spec.get("retry_after", 1)),
        headers={str(k): str(v) for k, v in (spec.get("headers") or {}).items()},
    )
    world.faults.append(fault)
    return fault


def match_fault(world: World, method: str, path: str) -> Fault | None:
    """The first live rule for the call, counted as used."""
    for fault in world.faults:
        if fault.method not in ("*", method):
            continue
        if not re.search(fault.path_regex, path, re.IGNORECASE):
            continue
        fault.hits += 1
        if fault.times and fault.hits >= fault.times:
            world.faults.remove(fault)
        return fault
    return None


def _throttle_headers(fault: Fault, method: str, path: str) -> dict[str, str]:
    reads = method in ("GET", "HEAD")
    kind = "reads" if reads else "writes"
    headers = {
        "Retry-After": str(fault.retry_after),
        f"x-ms-ratelimit-remaining-subscription-{kind}": "0",
        f"x-ms-ratelimit-remaining-subscription-global-{kind}": "0",
    }
    if "/providers/microsoft.compute/" in path.lower():
        bucket = "HighCostGet3Min" if reads else "PutVM3Min"
        headers["x-ms-ratelimit-remaining-resource"] = f"Microsoft.Compute/{bucket};0"
    return headers


def _answer(fault: Fault, method: str, path: str) -> web.Response:
    headers = dict(fault.headers)
    message = fault.message or f"Injected fault ({fault.status})"
    if fault.kind == "throttle":
        headers = {**_throttle_headers(fault, method, path), **headers}
        message = fault.message or (
            "The request is being throttled as the limit has been reached for operation type - "
            f"{'Read' if method == 'GET' else 'Write'}_ObservationWindow_00:05:00. For more "
            "information, see - https://aka.ms/srpthrottlinglimits"
        )
    if fault.kind == "precondition":
        message = fault.message or "Precondition failed."
    return arm_response(ArmError(fault.status, fault.code, message, headers=headers))


def _expire_caller(world: World, request: web.Request) -> None:
    _, _, value = request.headers.get("Authorization", "").partition(" ")
    token = world.tokens.get(value.strip())
    if token is not None:
        token.expires = min(token.expires, world.clock())


@web.middleware
async def fault_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    world = request.app[WORLD]
    if not world.faults or request.path.startswith("/_emu"):
        return await handler(request)
    fault = match_fault(world, request.method, request.path)
    if fault is None:
        return await handler(request)
    await pause(fault.latency)
    if fault.kind == "latency":
        return await handler(request)
    if fault.kind == "expire_token":
        _expire_caller(world, request)
        return await handler(request)
    return _answer(fault, request.method, request.path)
