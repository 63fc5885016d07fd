"""ARM answers and long-running operations (LROs).

ARM's asynchronous pattern (Azure Resource Manager RPC, "Asynchronous operations"): a ``PUT``
or ``DELETE`` that takes time answers ``201`` or ``202`` with

- ``Azure-AsyncOperation``: a status URL; ``GET`` it until ``status`` is ``Succeeded``,
  ``Failed`` or ``Canceled`` (its ``error`` says why); after a ``PUT`` the resource is read
  once more from its own URL (the final state), as the Go SDK's poller does; or
- ``Location`` (no ``Azure-AsyncOperation``): ``GET`` it until it stops answering ``202``;
  its last answer is the result;
- neither, with ``properties.provisioningState`` not yet terminal: ``GET`` the resource
  until it is.

A ``PUT`` answered with a terminal ``provisioningState`` in its body is not polled at all (as
the Go SDK). The first poll is sent at once, later ones after each answer's ``Retry-After`` (else
``default_interval``), like the Go SDK's ``PollUntilDone``. Every poll is counted as a read
under ``<operation>:poll``.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kccm.providers.azure.arm_errors import ARMError, ARMOperationFailed, error_body

__all__ = ["MAX_POLLS", "TERMINAL", "Poller", "Sent", "retry_after_seconds"]

TERMINAL = ("succeeded", "failed", "canceled", "cancelled")
MAX_POLLS = 720
"""Polls before giving up on an operation (an hour at ARM's usual 5 s)."""


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date (``None`` if neither)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Response(Protocol):
    status_code: int
    headers: Any

    def text(self) -> str: ...


@dataclass(frozen=True)
class Sent:
    """One ARM answer, read: status, headers (lower-case keys), the JSON body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    text: str = ""

    @classmethod
    def of(cls, response: _Response) -> Sent:
        text = response.text() or ""
        try:
            body = json.loads(text) if text.strip() else None
        except ValueError:
            body = None
        headers = {str(k).lower(): str(v) for k, v in response.headers.items()}
        return cls(response.status_code, headers, body, text)

    def json_body(self) -> dict[str, Any]:
        return dict(self.body) if isinstance(self.body, Mapping) else {}

    @property
    def retry_after(self) -> float | None:
        return retry_after_seconds(self.headers.get("retry-after"))

    @property
    def async_url(self) -> str:
        return self.headers.get("azure-asyncoperation", "")

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


def _state(body: Any) -> str:
    if not isinstance(body, Mapping):
        return ""
    props = body.get("properties")
    if isinstance(props, Mapping) and props.get("provisioningState"):
        return str(props["provisioningState"]).lower()
    return ""


Send = Callable[..., Sent]


class Poller:
    """Waits for operations through ``send`` (the client's own ``_send``)."""

    def __init__(
        self, send: Send, *, sleep: Callable[[float], None], default_interval: float
    ) -> None:
        self._send = send
        self._sleep = sleep
        self._interval = default_interval

    def settle(self, sent: Sent, url: str, *, operation: str, method: str) -> dict[str, Any]:
        """The result of the operation ``sent`` started (``{}`` for a finished ``DELETE``).
        A ``PUT``/``PATCH`` answered ``200``/``201`` whose body's provisioning state is already
        terminal is done: not polled (the Go SDK's ``async.New`` and ``IsTerminalState``)."""
        state = _state(sent.body)
        if method in ("PUT", "PATCH") and sent.status in (200, 201) and state in TERMINAL:
            if state != "succeeded":
                raise ARMOperationFailed(
                    f"{operation}: provisioningState {state}", status=sent.status
                )
            return sent.json_body()
        if sent.async_url:
            self._follow_status(sent.async_url, operation)
            return self._final(url, operation, method)
        if sent.location and sent.status == 202:
            return self._follow_location(sent.location, url, operation, method)
        if method == "PUT" and state and state not in TERMINAL:
            return self._follow_resource(url, operation)
        return sent.json_body()

    def _wait(self, previous: Sent) -> None:
        delay = previous.retry_after
        self._sleep(self._interval if delay is None else delay)

    def _follow_status(self, status_url: str, operation: str) -> None:
        for _ in range(MAX_POLLS):
            answer = self._send("GET", status_url, operation=f"{operation}:poll")
            status = str(answer.json_body().get("status") or "").lower()
            if status == "succeeded":
                return
            if status in TERMINAL:
                code, message = error_body(answer.body)
                raise ARMOperationFailed(
                    f"{operation}: the operation ended {status}: {code or 'no code'}: {message}",
                    status=answer.status,
                    code=code,
                )
            self._wait(answer)
        raise ARMError(f"{operation}: the operation did not end after {MAX_POLLS} polls")

    def _follow_location(
        self, location: str, url: str, operation: str, method: str
    ) -> dict[str, Any]:
        for _ in range(MAX_POLLS):
            answer = self._send("GET", location, operation=f"{operation}:poll", absent_ok=True)
            if answer.status != 202:
                if method == "PUT" and not answer.json_body():
                    return self._final(url, operation, method)
                return answer.json_body()
            self._wait(answer)
        raise ARMError(f"{operation}: the operation did not end after {MAX_POLLS} polls")

    def _follow_resource(self, url: str, operation: str) -> dict[str, Any]:
        for _ in range(MAX_POLLS):
            answer = self._send("GET", url, operation=f"{operation}:poll")
            state = _state(answer.body)
            if state == "succeeded" or not state:
                return answer.json_body()
            if state in TERMINAL:
                raise ARMOperationFailed(
                    f"{operation}: provisioningState {state}", status=answer.status
                )
            self._wait(answer)
        raise ARMError(f"{operation}: the operation did not end after {MAX_POLLS} polls")

    def _final(self, url: str, operation: str, method: str) -> dict[str, Any]:
        if method == "DELETE":
            return {}
        return self._send("GET", url, operation=f"{operation}:poll").json_body()
