"""The small API-server interface every kccm layer above uses.

Objects are plain JSON-shaped dicts, exactly as the API server sent them (no decoding into
typed models, so no field is ever lost). Treat returned objects as read-only: copy before
changing. Two implementations: :class:`kccm.kube.client.KubeApiClient` (real) and
:class:`kccm.kube.fake.FakeKube` (in memory, unit tests only).
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kccm.kube.resources import Resource

__all__ = [
    "KubeClient",
    "ListResult",
    "Obj",
    "PatchType",
    "Preconditions",
    "WatchEvent",
    "WatchEventType",
    "collect_pages",
]

Obj = dict[str, Any]


class PatchType(enum.Enum):
    """The four patch flavours the API server accepts, with their content types."""

    STRATEGIC = "application/strategic-merge-patch+json"
    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    APPLY = "application/apply-patch+yaml"


class WatchEventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: WatchEventType
    object: Obj

    @property
    def resource_version(self) -> str:
        return str(self.object.get("metadata", {}).get("resourceVersion", ""))


@dataclass(frozen=True, slots=True)
class ListResult:
    """A complete list (all pages) and the collection's resourceVersion to watch from."""

    items: list[Obj]
    resource_version: str


async def collect_pages(pages: AsyncIterator[tuple[list[Obj], str]]) -> ListResult:
    """The pages of a ``list_pages`` as one list, with the last page's resourceVersion."""
    items: list[Obj] = []
    version = ""
    async for page, page_version in pages:
        items.extend(page)
        version = page_version
    return ListResult(items=items, resource_version=version)


@dataclass(frozen=True, slots=True)
class Preconditions:
    """Delete only if the object still has this uid / resourceVersion (else Conflict)."""

    uid: str | None = None
    resource_version: str | None = None

    def as_body(self) -> dict[str, str]:
        body: dict[str, str] = {}
        if self.uid is not None:
            body["uid"] = self.uid
        if self.resource_version is not None:
            body["resourceVersion"] = self.resource_version
        return body


class KubeClient(Protocol):
    """What kccm needs from the API server. Errors are :mod:`kccm.kube.errors` types."""

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Obj:
        """Read one object. Raises NotFound."""
        ...

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ListResult:
        """List every object, following ``continue`` tokens page by page."""
        ...

    def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Obj], str]]:
        """Yield ``(items, list_resource_version)`` page by page (keeps the loop responsive).

        The resourceVersion is the same on every page (the snapshot the list is read from).
        """
        ...

    def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version``.

        Ends normally when the server closes the stream (re-watch from the last version seen);
        raises :class:`kccm.kube.errors.Gone` when that version is too old (relist).
        """
        ...

    async def create(
        self, resource: Resource, obj: Mapping[str, Any], *, dry_run: bool = False
    ) -> Obj:
        """Create ``obj`` (its metadata.namespace picks the namespace). Raises AlreadyExists.

        ``dry_run`` (``dryRun=All``): validate and return the result without storing it.
        """
        ...

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = PatchType.STRATEGIC,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Patch one object (``subresource="status"`` for status writes).

        ``APPLY`` (server-side apply) requires ``field_manager``; ``force`` takes fields over
        from other managers. ``dry_run`` (``dryRun=All``): validate and return the result
        without storing it.
        """
        ...

    async def replace(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> Obj:
        """PUT the whole object; metadata.resourceVersion makes it conditional (Conflict)."""
        ...

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> Obj | None:
        """Delete one object. Returns the object when finalizers keep it (deletionTimestamp
        set), else None. Raises NotFound, or Conflict when preconditions do not hold."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
