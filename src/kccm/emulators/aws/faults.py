"""Per-call faults of the moto emulator, set and cleared over its admin API (in its process).

An EC2 action (boto3's snake_case name) answered, until the faults are cleared, with

- ``"error"``: an EC2 error ``code`` (HTTP 400, the body moto gives any EC2 error, which
  botocore parses into a ``ClientError``);
- ``"html-500"``: HTTP 500 with werkzeug's HTML page (:data:`HTML_500_BODY`), as stock moto 5
  answers an action it lacks (``DescribeInstanceTopology``) and as a proxy or an
  EC2-compatible cloud can answer any call: botocore cannot parse it (``ResponseParserError:
  ... invalid XML received``), which is not a ``ClientError``.

Each fault replaces the action's handler on moto's response class; clearing puts back what
was there (taught, stock or missing).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["HTML_500_BODY", "KINDS", "add_fault", "clear_faults", "faults"]

HTML_500_BODY = (
    "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
    "<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was "
    "unable to complete your request. Either the server is overloaded or there is an error "
    "in the application.</p>\n"
)
"""werkzeug's page, byte for byte what stock moto 5 answers for an action it lacks."""

KINDS = ("error", "html-500")
_MISSING = object()
_ORIGINALS: dict[str, Any] = {}
"""The handler each faulted action had (or :data:`_MISSING`), by action."""
_SET: list[dict[str, Any]] = []
_LOCK = threading.Lock()


def _response_class() -> Any:
    from moto.ec2.responses import EC2Response

    return EC2Response


def _answer(kind: str, code: str) -> Any:
    if kind == "html-500":

        def html_500(self: Any) -> tuple[str, dict[str, Any]]:
            return HTML_500_BODY, {"status": 500, "Content-Type": "text/html; charset=utf-8"}

        return html_500
    from moto.ec2.exceptions import EC2ClientError

    def error(self: Any) -> Any:
        raise EC2ClientError(code, f"kccm test fault: {code}")

    return error


def add_fault(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Fault ``spec["action"]`` of ``spec["service"]`` (``"ec2"``) with ``spec["kind"]``
    (``"error"`` needs ``spec["code"]``); the fault as set. ValueError for anything else."""
    service, action = str(spec.get("service", "ec2")), str(spec.get("action", ""))
    kind, code = str(spec.get("kind", "error")), str(spec.get("code", ""))
    if service != "ec2" or not action.isidentifier() or kind not in KINDS:
        raise ValueError(f"unsupported fault {dict(spec)}: service ec2, an action, kind {KINDS}")
    if kind == "error" and not code:
        raise ValueError("an error fault needs its code")
    fault = {"service": service, "action": action, "kind": kind, "code": code}
    response_class = _response_class()
    with _LOCK:
        _ORIGINALS.setdefault(action, response_class.__dict__.get(action, _MISSING))
        setattr(response_class, action, _answer(kind, code))
        _SET.append(fault)
    return fault


def clear_faults() -> None:
    """Every faulted action answered as before its first fault."""
    response_class = _response_class()
    with _LOCK:
        for action, before in _ORIGINALS.items():
            if before is _MISSING:
                delattr(response_class, action)
            else:
                setattr(response_class, action, before)
        _ORIGINALS.clear()
        _SET.clear()


def faults() -> list[dict[str, Any]]:
    """The faults in place, oldest first."""
    with _LOCK:
        return [dict(fault) for fault in _SET]
