"""What the balancer code needs from ARM, as a Protocol, and read-compare-write on it.

The provider hands the balancer an :class:`ArmApi` (an adapter over its ARM client, which
picks each call's api-version from the path's resource provider, polls long-running
operations and paces calls through kccm's call gate). Paths are full resource IDs.

:func:`read_modify_write` is the one way the balancer changes a shared resource: read it (its
``etag``), compute the wanted body from what was read, PUT only when it differs, with
``If-Match`` on that ETag (``If-None-Match: *`` when it is new); when ARM answers 412
(someone else wrote it since), read again and recompute, so a concurrent writer's change is
merged, never overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kccm.providers.azure.loadbalancer.lbrules import Json

__all__ = ["ArmApi", "PreconditionFailed", "read_modify_write"]

log = logging.getLogger(__name__)
ATTEMPTS = 8


class PreconditionFailed(Exception):
    """ARM answered 412: the resource's ETag is no longer the one sent in ``If-Match``."""


class ArmApi(Protocol):
    def get(self, path: str) -> Json | None:
        """The resource, or None when ARM answers 404."""
        ...

    def list(self, path: str) -> list[Json]:
        """Every resource of a collection, all pages."""
        ...

    def put(
        self, path: str, body: Json, *, if_match: str | None, if_none_match: bool = False
    ) -> Json:
        """Create or update; the resource as ARM returns it once the operation is done.
        ``if_match``: the ETag it must still have; ``if_none_match``: it must not exist yet
        (``If-None-Match: *``). Raises :class:`PreconditionFailed` on 412."""
        ...

    def delete(self, path: str) -> None:
        """Delete; returns when done (also when already gone)."""
        ...


_UNREAD: Json = {}


def read_modify_write(
    arm: ArmApi,
    path: str,
    change: Callable[[Json | None], Json | None],
    *,
    known: Json | None = _UNREAD,
) -> tuple[Json | None, bool]:
    """``change(current)`` gives the wanted body, or None when ``current`` is already right;
    returns the resource as it now is and whether it was written. ``known``: the resource as
    just read some other way (a list), so the first round reads nothing."""
    for attempt in range(ATTEMPTS):
        current = known if attempt == 0 and known is not _UNREAD else arm.get(path)
        wanted = change(current)
        if wanted is None:
            return current, False
        etag = current.get("etag") if current is not None else None
        try:
            written = arm.put(
                path, wanted, if_match=str(etag) if etag else None, if_none_match=current is None
            )
            return written, True
        except PreconditionFailed:
            log.info("azure: %s changed while being updated (412); reading it again", path)
    raise PreconditionFailed(f"{path}: still changing after {ATTEMPTS} attempts")
