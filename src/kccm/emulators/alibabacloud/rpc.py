"""The RPC request as Alibaba Cloud serves it: parameters from the query string and a form body
(GET or POST), the signature checked, the action found by the API version, a JSON answer with a
``RequestId`` or Alibaba's error (``{"RequestId", "HostId", "Code", "Message"}`` with its HTTP
status); every call logged, faults met first.

Signature v1 (the Go SDK's ``sdk/auth/rpc_signature_composer.go`` and the classic Python SDK):
``base64(HMAC-SHA1("<secret>&", "<METHOD>&%2F&" + pct(sorted "k=v" pairs joined by "&")))``,
pct being RFC 3986 encoding (``~`` kept, space ``%20``, ``*`` ``%2A``), over every parameter but
``Signature``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from kccm.emulators.alibabacloud.signature_v3 import SignatureRefused, check_v3, is_v3
from kccm.emulators.alibabacloud.world import Fault, World

__all__ = ["ACTIONS", "COMMON", "Handler", "RpcError", "handle_rpc", "pct", "signature_v1"]

Handler = Callable[[World, Mapping[str, str]], dict[str, Any]]

ACTIONS: dict[tuple[str, str], Handler] = {}
"""(API version, Action) -> handler; filled by :mod:`.ecs` and :mod:`.vpc`."""

PRODUCTS = {"2014-05-26": "ecs", "2016-04-28": "vpc", "2014-05-15": "slb", "2022-04-30": "nlb"}


class RpcError(Exception):
    """An Alibaba error answer."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def pct(text: str) -> str:
    return urllib.parse.quote(text, safe="~")


def signature_v1(method: str, params: Mapping[str, str], secret: str) -> str:
    pairs = "&".join(f"{pct(k)}={pct(v)}" for k, v in sorted(params.items()) if k != "Signature")
    to_sign = f"{method.upper()}&{pct('/')}&{pct(pairs)}"
    digest = hmac.new(f"{secret}&".encode(), to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def _reply(body: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


def _error(err: RpcError, request_id: str) -> web.Response:
    body = {"RequestId": request_id, "HostId": "emulator", "Code": err.code, "Message": err.message}
    return _reply(body, err.status)


def check_signature(world: World, method: str, params: Mapping[str, str]) -> None:
    key = params.get("AccessKeyId", "")
    if key not in world.keys:
        raise RpcError(
            "InvalidAccessKeyId.NotFound", f"Specified access key is not found: {key!r}", 404
        )
    if params.get("SignatureMethod") != "HMAC-SHA1" or params.get("SignatureVersion") != "1.0":
        raise RpcError(
            "SignatureDoesNotMatch",
            "only SignatureMethod=HMAC-SHA1, SignatureVersion=1.0 is served by this emulator",
        )
    want = signature_v1(method, params, world.keys[key])
    if not hmac.compare_digest(want, params.get("Signature", "")):
        raise RpcError(
            "SignatureDoesNotMatch",
            "Specified signature is not matched with our calculation.",
        )


async def _params(request: web.Request) -> dict[str, str]:
    params = dict(request.query)
    if request.method == "POST" and request.can_read_body:
        await request.read()  # kept for a v3 signature's body hash
        form = await request.post()
        params.update({k: str(v) for k, v in form.items()})
    return params


async def _check(world: World, request: web.Request, params: Mapping[str, str]) -> None:
    """Signature v3 when the ``Authorization`` header says so, else v1."""
    if not is_v3(request.headers):
        check_signature(world, request.method, params)
        return
    body = (
        await request.read() if request.body_exists else b""
    )  # read already: can_read_body is off
    try:
        check_v3(world.keys, request.method, request.path, request.query, request.headers, body)
    except SignatureRefused as err:
        raise RpcError(err.code, err.message, err.status) from err


def _handled(
    handler: Handler, world: World, params: Mapping[str, str], fault: Fault | None
) -> dict[str, Any]:
    """The handler's answer (``world.call_fault`` the fault met, for an NLB job); a number
    parameter that is none is ``InvalidParameter``."""
    world.call_fault = fault
    try:
        return handler(world, params)
    except ValueError as err:
        raise RpcError("InvalidParameter", f"a parameter is not valid: {err}") from err
    finally:
        world.call_fault = None


async def handle_rpc(world: World, request: web.Request) -> web.Response:
    """One RPC call: ``/`` (any path: SDKs differ) with ``Action`` and ``Version`` (parameters,
    or with signature v3 the ``x-acs-action`` and ``x-acs-version`` headers)."""
    request_id = str(uuid.uuid4()).upper()
    params = await _params(request)
    action = params.get("Action") or str(request.headers.get("x-acs-action", ""))
    version = params.get("Version") or str(request.headers.get("x-acs-version", ""))
    product = PRODUCTS.get(version, version)
    entry = {
        "service": product,
        "method": request.method,
        "path": action,
        "action": action,
        "signature": "v3" if is_v3(request.headers) else "v1",
    }
    try:
        await _check(world, request, params)
        handler = ACTIONS.get((version, action))
        if handler is None:
            raise RpcError(
                "InvalidAction.NotFound",
                f"Specified api is not found, please check your url and method: {action}",
                404,
            )
        fault = world.take_fault(action, product)
        if fault is not None and fault.latency:
            await asyncio.sleep(fault.latency)
        if fault is not None and fault.code:
            raise RpcError(fault.code, fault.message, fault.status)
        body = _handled(handler, world, params, fault)
    except RpcError as err:
        world.log({**entry, "params": _logged(params), "status": err.status, "code": err.code})
        return _error(err, request_id)
    world.log({**entry, "params": _logged(params), "status": 200, "code": ""})
    return _reply({**body, "RequestId": request_id})


COMMON = {
    "AccessKeyId",
    "Signature",
    "SignatureMethod",
    "SignatureVersion",
    "SignatureNonce",
    "SignatureType",
    "Timestamp",
    "Format",
    "Version",
    "Action",
    "SecurityToken",
}


def _logged(params: Mapping[str, str]) -> dict[str, str]:
    """The action's own parameters (the common ones, secrets and nonces left out)."""
    return {k: v for k, v in sorted(params.items()) if k not in COMMON}


def required(params: Mapping[str, str], name: str) -> str:
    value = params.get(name, "")
    if not value:
        raise RpcError("MissingParameter", f"The input parameter {name!r} that is mandatory")
    return value


def json_list(params: Mapping[str, str], name: str) -> list[str] | None:
    """A JSON-array parameter (``InstanceIds='["i-1"]'``); ``None`` when absent."""
    raw = params.get(name)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise RpcError("InvalidParameter", f"{name} is not a JSON array: {raw!r}") from err
    if not isinstance(value, list):
        raise RpcError("InvalidParameter", f"{name} is not a JSON array: {raw!r}")
    return [str(v) for v in value]


def repeated(params: Mapping[str, str], name: str) -> list[str]:
    """``Name.1``, ``Name.2``, ... in order."""
    found = []
    for index in range(1, 1000):
        value = params.get(f"{name}.{index}")
        if value is None:
            break
        found.append(value)
    return found


def page(params: Mapping[str, str], items: list[Any], default: int) -> tuple[list[Any], str]:
    """One page by ``NextToken`` (an offset here) and ``MaxResults``/``MaxResult``; the next
    token ("" on the last page)."""
    size_text = params.get("MaxResults") or params.get("MaxResult") or ""
    size = int(size_text) if size_text.isdigit() and int(size_text) > 0 else default
    token = params.get("NextToken") or "0"
    if not token.isdigit():
        raise RpcError("InvalidParameter.NextToken", f"NextToken {token!r} is not valid")
    start = int(token)
    chunk = items[start : start + size]
    return chunk, str(start + size) if start + size < len(items) else ""


def token_listing(
    params: Mapping[str, str],
    items: list[Any],
    key: str,
    render: Callable[[Any], Any] = lambda item: item,
    default: int = 20,
) -> dict[str, Any]:
    """A ``NextToken``-paged listing answer (the NLB API's): ``key`` holds the page's items as
    ``render`` shows each, with ``TotalCount``, ``MaxResults`` and ``NextToken``."""
    chunk, following = page(params, items, default)
    return {
        key: [render(item) for item in chunk],
        "TotalCount": len(items),
        "MaxResults": len(chunk),
        "NextToken": following,
    }
