"""A provider's warnings about a Service, carried to the service controller as Events.

Inside ``ensure_load_balancer``, ``update_load_balancer`` and ``ensure_load_balancer_deleted``
a provider may find something worth telling the Service's owner without failing the sync (an
annotation value it ignored for a default, as upstream does). It calls :func:`warn_service`;
the service controller opens a :func:`collect_service_warnings` scope around each of those
calls and records every warning collected as a ``Warning`` Event on the Service, before the
call's own Events (``EnsuredLoadBalancer``, ``SyncLoadBalancerFailed``, ...).

The scope is a :class:`contextvars.ContextVar`, so it reaches the provider through the call
gate, the thread pool that runs plain ``def`` methods (it runs them in a copy of the caller's
context) and any task the provider starts while the call runs. Outside a scope (a unit test,
a tool, a thread started without the caller's context, or after the call returned) the
warning is logged instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["ServiceWarning", "ServiceWarnings", "collect_service_warnings", "warn_service"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceWarning:
    """One warning: the Event's reason (CamelCase, like ``InvalidAnnotation``) and message."""

    reason: str
    message: str


class ServiceWarnings:
    """The warnings of one provider call, in the order they were given."""

    def __init__(self) -> None:
        self._items: list[ServiceWarning] = []
        self.open = True

    def add(self, warning: ServiceWarning) -> None:
        self._items.append(warning)  # one append: safe from the provider's threads

    def __iter__(self) -> Iterator[ServiceWarning]:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)


_scope: ContextVar[ServiceWarnings | None] = ContextVar("kccm_service_warnings", default=None)


def warn_service(reason: str, message: str) -> None:
    """Report a warning about the Service of the current provider call (see the module
    docstring); logged when no service controller call is collecting."""
    scope = _scope.get()
    if scope is None or not scope.open:
        _log.warning("%s: %s", reason, message)
        return
    scope.add(ServiceWarning(reason, message))


@contextmanager
def collect_service_warnings() -> Iterator[ServiceWarnings]:
    """Collect :func:`warn_service` calls made in this context until the block ends."""
    scope = ServiceWarnings()
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        scope.open = False
