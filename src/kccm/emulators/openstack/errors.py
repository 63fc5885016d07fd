"""Error answers in each OpenStack service's own body shape.

- Keystone (keystone/exception.py, keystone/server/flask/common.py): ``{"error": {"code",
  "message", "title"}}``; keystonemiddleware answers a missing or bad token on every other
  service with the same body and a ``WWW-Authenticate: Keystone uri=...`` header.
- Nova (nova/api/openstack/wsgi.py ``Fault``): ``{"itemNotFound": {"code", "message"}}``,
  ``badRequest``, ``conflictingRequest``, ``computeFault``, ...
- Neutron (neutron/api/v2/base.py, neutron_lib/exceptions): ``{"NeutronError": {"type",
  "message", "detail"}}``, type being the exception's class name (``PortNotFound``).
- Octavia (wsmeext/pecan + octavia/common/exceptions.py ``APIException``): ``{"faultcode":
  "Client", "faultstring", "debuginfo": null}`` (``"Server"`` for 5xx).
- Barbican (pecan's ``abort``): ``{"code", "title", "description"}``.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

__all__ = [
    "NOVA_KEYS",
    "EmuError",
    "barbican_error",
    "error_body",
    "error_response",
    "keystone_error",
    "neutron_error",
    "nova_error",
    "octavia_error",
]

NOVA_KEYS = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    409: "conflictingRequest",
    413: "overLimit",
    429: "overLimit",
    500: "computeFault",
    501: "notImplemented",
    503: "serviceUnavailable",
}
KEYSTONE_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
NEUTRON_TYPES = {
    400: "BadRequest",
    401: "NotAuthorized",
    403: "NotAuthorized",
    404: "NotFound",
    409: "Conflict",
    500: "InternalServerError",
    503: "ServiceUnavailable",
}


class EmuError(Exception):
    """An API error: raised by a handler, answered by the middleware in the body shape of
    the service the request went to (or with ``body`` as given)."""

    def __init__(self, status: int, message: str, *, kind: str = "", body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.body = body


def keystone_error(status: int, message: str) -> dict[str, Any]:
    title = KEYSTONE_TITLES.get(status, "Error")
    return {"error": {"code": status, "message": message, "title": title}}


def nova_error(status: int, message: str) -> dict[str, Any]:
    return {NOVA_KEYS.get(status, "computeFault"): {"code": status, "message": message}}


def neutron_error(status: int, message: str, kind: str = "") -> dict[str, Any]:
    return {
        "NeutronError": {
            "type": kind or NEUTRON_TYPES.get(status, "NeutronException"),
            "message": message,
            "detail": "",
        }
    }


def octavia_error(status: int, message: str) -> dict[str, Any]:
    return {
        "faultcode": "Server" if status >= 500 else "Client",
        "faultstring": message,
        "debuginfo": None,
    }


BARBICAN_TITLES = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 409: "Conflict"}


def barbican_error(status: int, message: str) -> dict[str, Any]:
    return {"code": status, "title": BARBICAN_TITLES.get(status, "Error"), "description": message}


def error_body(service: str, status: int, message: str, kind: str = "") -> dict[str, Any]:
    """The body ``service`` answers an error with; 401s are keystonemiddleware's on every
    service but Octavia's noauth-free paths (they are keystonemiddleware's there too)."""
    if service == "identity" or status == 401:
        return keystone_error(status, message)
    if service == "compute":
        return nova_error(status, message)
    if service == "network":
        return neutron_error(status, message, kind)
    if service == "load-balancer":
        return octavia_error(status, message)
    if service == "key-manager":
        return barbican_error(status, message)
    return keystone_error(status, message)


def error_response(
    service: str, error: EmuError, *, auth_uri: str = "", headers: dict[str, str] | None = None
) -> web.Response:
    body = error.body
    if body is None:
        body = error_body(service, error.status, error.message, error.kind)
    headers = dict(headers or {})
    if error.status == 401 and auth_uri:
        headers["WWW-Authenticate"] = f"Keystone uri='{auth_uri}'"
    text = body if isinstance(body, str) else json.dumps(body)
    return web.Response(
        status=error.status, text=text, content_type="application/json", headers=headers
    )
