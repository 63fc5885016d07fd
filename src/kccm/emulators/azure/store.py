"""ARM's common semantics over the world: a PUT body made into the stored resource, ETags and
``If-Match``/``If-None-Match`` (412), long-running PUTs and DELETEs (``Azure-AsyncOperation``
and ``Location`` to poll, in progress for ``lro_delay`` seconds), rendering for a reply, and
list pages with ``nextLink``.

Operations complete lazily: every ARM call first finishes those whose time has come
(:func:`settle`), so nothing runs between calls and a test's clock decides.
"""

from __future__ import annotations

import copy
import math
import urllib.parse
from typing import Any

from aiohttp import web

from kccm.emulators.azure.errors import ArmError
from kccm.emulators.azure.kinds import Kind, kind_of_type
from kccm.emulators.azure.network import normalize_children
from kccm.emulators.azure.rest import WORLD
from kccm.emulators.azure.world import Obj, Operation, World, iso_at, new_guid

__all__ = [
    "begin_delete",
    "begin_put",
    "build",
    "check_preconditions",
    "lro_headers",
    "operation_body",
    "page",
    "public",
    "render",
    "settle",
    "settle_all",
]

TOP_KEYS = ("location", "tags", "sku", "zones", "identity", "kind", "extendedLocation", "plan")


def public(obj: Obj) -> Obj:
    """A copy without the emulator's own keys."""
    return {k: copy.deepcopy(v) for k, v in obj.items() if not k.startswith("_")}


def render(world: World, obj: Obj, expand: bool = False) -> Obj:
    """The resource as ARM answers it: what its kind computes on read added, the emulator's
    own keys left out."""
    out = copy.deepcopy(obj)
    kind = kind_of_type(str(obj.get("type", "")))
    if kind is not None:
        kind.render(world, out, expand)
    return {k: v for k, v in out.items() if not k.startswith("_")}


def build(world: World, kind: Kind, group: str, name: str, body: Obj, old: Obj | None) -> Obj:
    """The resource a PUT of ``body`` makes (checked and defaulted by its kind)."""
    obj: Obj = {k: copy.deepcopy(body[k]) for k in TOP_KEYS if k in body}
    if old is not None:
        obj.update({k: v for k, v in old.items() if k.startswith("_")})
        obj.setdefault("location", old.get("location"))
    if not obj.get("location"):
        raise ArmError(
            400, "LocationRequired", "The location property is required for this definition."
        )
    obj["name"] = old["name"] if old is not None else name
    obj["id"] = (
        old["id"]
        if old is not None
        else world.resource_id(
            world.groups.get(group.lower(), group), kind.namespace, kind.type, name
        )
    )
    obj["type"] = kind.full_type
    obj["etag"] = world.compute_etag() if kind.compute else world.network_etag()
    props = copy.deepcopy(body.get("properties") or {})
    props.pop("provisioningState", None)
    if not kind.compute:
        props["resourceGuid"] = ((old or {}).get("properties") or {}).get("resourceGuid") or (
            new_guid()
        )
    obj["properties"] = props
    for prop in kind.children:
        normalize_children(obj, prop)
    kind.prepare(world, obj, old)
    return obj


def _etag_matches(given: str, current: str) -> bool:
    wanted = {g.strip() for g in given.split(",")}
    bare = current.removeprefix("W/")
    return "*" in wanted or current in wanted or bare in wanted or f"W/{bare}" in wanted


def check_preconditions(request: web.Request, current: Obj | None, compute: bool) -> None:
    """``If-Match`` (412 when the resource's ETag differs, or it does not exist) and
    ``If-None-Match: *`` (412 when it exists)."""
    if_match = request.headers.get("If-Match")
    if if_match is not None:
        etag = str((current or {}).get("etag", ""))
        if current is None or not _etag_matches(if_match, etag):
            raise _precondition_failed(if_match, etag, current, compute)
    if request.headers.get("If-None-Match", "").strip() == "*" and current is not None:
        raise _precondition_failed("*", str(current.get("etag", "")), current, compute)


def _precondition_failed(given: str, etag: str, current: Obj | None, compute: bool) -> ArmError:
    if compute:
        return ArmError(
            412,
            "PreconditionFailed",
            f"Etag provided in if-match header {given} does not match etag {etag} of resource.",
        )
    shown = given if given.startswith("W/") or given == "*" else f"W/{given}"
    resource = (current or {}).get("id", "")
    return ArmError(
        412,
        "PreconditionFailed",
        "Precondition failed.",
        details=[
            {
                "code": "PreconditionFailedEtagMismatch",
                "message": f"Etag provided in if-match header {shown} does not match etag "
                f"{etag} of resource {resource} in NRP data store.",
            }
        ],
    )


def _supersede(world: World, kind: Kind, obj: Obj, newer: str) -> None:
    """A pending operation on the resource ends when a newer one starts: the network
    provider cancels it (``CanceledAndSupersededDueToAnotherOperation``), Compute preempts it
    (``OperationPreempted``); upstream retries on either."""
    old = world.operations.get(str(obj.get("_op", "")))
    if old is None or old.status != "InProgress":
        return
    old.done_at = world.clock()
    world.pending.pop(old.id, None)
    if kind.compute:
        old.status = "Failed"
        old.error = {
            "code": "OperationPreempted",
            "message": "Operation execution has been preempted by a more recent operation.",
        }
        return
    old.status = "Canceled"
    old.error = {
        "code": "CanceledAndSupersededDueToAnotherOperation",
        "message": f"Operation {old.id} on resource {obj['id']} was canceled and superseded "
        f"by operation {newer}.",
    }


def _begin(world: World, kind: Kind, obj: Obj, op_kind: str) -> Operation:
    now = world.clock()
    op = Operation(
        id=new_guid(),
        namespace=kind.namespace,
        resource_id=str(obj["id"]),
        kind=op_kind,
        started=now,
        done_at=now + world.lro_delay,
    )
    _supersede(world, kind, obj, op.id)
    world.operations[op.id] = op
    world.pending[op.id] = op
    obj["_op"] = op.id
    return op


def begin_put(world: World, kind: Kind, obj: Obj, created: bool) -> Operation:
    """``obj`` stored, in progress until its operation completes (at once for no delay)."""
    if kind.compute:
        obj["properties"]["provisioningState"] = "Creating" if created else "Updating"
    else:
        obj["properties"]["provisioningState"] = "Updating"
    world.put(obj)
    op = _begin(world, kind, obj, "put")
    settle(world)
    return op


def begin_delete(world: World, kind: Kind, obj: Obj) -> Operation:
    obj["properties"]["provisioningState"] = "Deleting"
    op = _begin(world, kind, obj, "delete")
    settle(world)
    return op


def _finish(world: World, op: Operation) -> None:
    op.status = "Succeeded"
    obj = world.get(op.resource_id)
    if obj is None or obj.get("_op") != op.id:
        return  # superseded by a later operation on the same resource
    kind = kind_of_type(str(obj["type"]))
    if op.kind == "delete":
        world.drop(op.resource_id)
        if kind is not None:
            kind.deleted(world, obj)
        return
    obj["properties"]["provisioningState"] = "Succeeded"
    if kind is not None:
        kind.finish(world, obj)


def settle(world: World) -> None:
    """Every operation whose time has come completes."""
    now = world.clock()
    for op in list(world.pending.values()):
        if op.done_at <= now:
            world.pending.pop(op.id, None)
            if op.status == "InProgress":
                _finish(world, op)


def settle_all(world: World) -> int:
    """Every pending operation completes now; how many did."""
    pending = list(world.pending.values())
    for op in pending:
        op.done_at = world.clock()
    settle(world)
    return len(pending)


def _retry_after(world: World, op: Operation) -> str:
    return str(max(0, math.ceil(op.done_at - world.clock())))


def lro_headers(world: World, op: Operation, api_version: str, *, location: bool) -> dict[str, str]:
    base = f"{world.base_url}/subscriptions/{world.subscription}/providers/{op.namespace}"
    base += f"/locations/{world.location}"
    query = f"?api-version={api_version}"
    headers = {
        "Azure-AsyncOperation": f"{base}/operations/{op.id}{query}",
        "Retry-After": _retry_after(world, op),
    }
    if location:
        headers["Location"] = f"{base}/operationResults/{op.id}{query}"
    return headers


def operation_body(world: World, op: Operation) -> dict[str, Any]:
    """An operation's status as its provider answers it: Network's ``AzureAsyncOperationResult``
    has only ``status`` and ``error`` (network.json, 2025-05-01); Compute's adds the
    operation's name and times."""
    body: dict[str, Any] = {"status": op.status}
    if op.namespace.lower() != "microsoft.network":
        body.update(name=op.id, startTime=iso_at(op.started))
        if op.status != "InProgress":
            body["endTime"] = iso_at(op.done_at)
    if op.error:
        body["error"] = dict(op.error)
    return body


def page(request: web.Request, items: list[Obj]) -> dict[str, Any]:
    """One page of ``items`` (``$skiptoken`` is the offset) and the next page's link."""
    world = request.app[WORLD]
    try:
        start = max(0, int(request.query.get("$skiptoken", "0")))
    except ValueError:
        raise ArmError(400, "InvalidSkipToken", "The skip token is invalid.") from None
    size = max(1, world.page_size)
    body: dict[str, Any] = {"value": items[start : start + size]}
    if start + size < len(items):
        query = [(k, v) for k, v in request.query.items() if k != "$skiptoken"]
        query.append(("$skiptoken", str(start + size)))
        body["nextLink"] = f"{world.base_url}{request.path}?{urllib.parse.urlencode(query)}"
    return body
