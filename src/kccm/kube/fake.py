"""An in-memory :class:`~kccm.kube.interface.KubeClient` for unit tests ONLY.

It keeps what controllers depend on: a global resourceVersion counter, uid and
creationTimestamp on create, Conflict for a stale resourceVersion, preconditions on delete,
finalizers holding deletion (deletionTimestamp) until the last one goes, spec/status split
between the main resource and the ``status`` subresource, paged lists, and watches that
replay history after a resourceVersion and raise Gone once it was compacted away.
:mod:`kccm.testing.kubecontract` runs the same cases against this fake and the real API
server so the two cannot drift. Server-side apply is approximated as a merge patch.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

from kccm.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    InternalError,
    Invalid,
    NotFound,
)
from kccm.kube.interface import (
    ListResult,
    Obj,
    PatchType,
    Preconditions,
    WatchEvent,
    WatchEventType,
    collect_pages,
)
from kccm.kube.patching import apply_json_patch, merge_patch, strategic_merge_patch
from kccm.kube.resources import Resource

__all__ = ["FakeKube"]

_Key = tuple[str, str, str]  # (resource, namespace, name)
# Resources whose status survives create (kubelets create Nodes with status).
_STATUS_ON_CREATE = {"nodes"}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gone(version: int) -> Gone:
    return Gone(f"too old resource version: {version}", reason="Expired")


class FakeKube:
    """In-memory API server for unit tests (see module docstring for what it models)."""

    def __init__(self, *, history: int = 10_000) -> None:
        self._objects: dict[_Key, Obj] = {}
        self._version = 1
        self._events: list[tuple[int, str, WatchEvent]] = []
        self._history = history
        self._compacted = 0
        self._changed = asyncio.Event()
        self.requests: list[tuple[str, str, str]] = []  # (verb, resource, name)

    # -- helpers -----------------------------------------------------------------------------

    def _key(self, resource: Resource, name: str, namespace: str | None) -> _Key:
        if resource.namespaced and not namespace:
            raise BadRequest(f"{resource.kind} {name!r} is namespaced: a namespace is required")
        return (str(resource), namespace or "" if resource.namespaced else "", name)

    def _get(self, resource: Resource, name: str, namespace: str | None) -> Obj:
        try:
            return self._objects[self._key(resource, name, namespace)]
        except KeyError:
            raise NotFound(f'{resource.plural} "{name}" not found', reason="NotFound") from None

    def _next_version(self) -> int:
        self._version += 1
        return self._version

    def _record(self, resource: Resource, kind: WatchEventType, obj: Obj) -> None:
        version = int(obj["metadata"]["resourceVersion"])
        self._events.append((version, str(resource), WatchEvent(kind, copy.deepcopy(obj))))
        if len(self._events) > self._history:
            dropped = self._events[: len(self._events) - self._history]
            self._compacted = max(self._compacted, dropped[-1][0])
            del self._events[: len(dropped)]
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _store(self, resource: Resource, obj: Obj, kind: WatchEventType) -> Obj:
        obj["metadata"]["resourceVersion"] = str(self._next_version())
        meta = obj["metadata"]
        self._objects[self._key(resource, meta["name"], meta.get("namespace"))] = obj
        self._record(resource, kind, obj)
        return copy.deepcopy(obj)

    def _remove(self, resource: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        del self._objects[self._key(resource, meta["name"], meta.get("namespace"))]
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._next_version())
        self._record(resource, WatchEventType.DELETED, gone)

    # -- test helpers ------------------------------------------------------------------------

    def compact(self) -> int:
        """Forget all watch history (like etcd compaction); older watches get Gone."""
        self._compacted = self._version
        self._events.clear()
        return self._compacted

    def objects(self, resource: Resource) -> builtins.list[Obj]:
        """A copy of every stored object of ``resource``."""
        return [copy.deepcopy(o) for k, o in self._objects.items() if k[0] == str(resource)]

    # -- KubeClient --------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Obj:
        self.requests.append(("get", str(resource), name))
        return copy.deepcopy(self._get(resource, name, namespace))

    def _matching(
        self, resource: Resource, namespace: str | None, label_selector: str | None
    ) -> builtins.list[Obj]:
        wanted = _parse_selector(label_selector)
        items = []
        for (res, ns, _), obj in sorted(self._objects.items()):
            if res != str(resource) or (namespace and ns != namespace):
                continue
            labels = obj["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()):
                items.append(copy.deepcopy(obj))
        return items

    async def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Obj], str]]:
        self.requests.append(("list", str(resource), ""))
        items = self._matching(resource, namespace, label_selector)
        version = str(self._version)
        size = page_size if page_size > 0 else max(1, len(items))
        for start in range(0, max(1, len(items)), size):
            yield items[start : start + size], version
            await asyncio.sleep(0)

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ListResult:
        return await collect_pages(
            self.list_pages(
                resource, namespace=namespace, label_selector=label_selector, page_size=page_size
            )
        )

    async def watch(
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
        self.requests.append(("watch", str(resource), resource_version))
        after = int(resource_version or self._version)
        if after < self._compacted:
            raise _gone(after)
        while True:
            for version, res, event in list(self._events):
                if version > after and res == str(resource):
                    after = version
                    meta = event.object["metadata"]
                    if namespace and meta.get("namespace") != namespace:
                        continue
                    yield WatchEvent(event.type, copy.deepcopy(event.object))
            if after < self._compacted:
                raise _gone(after)
            await self._changed.wait()

    async def create(
        self, resource: Resource, obj: Mapping[str, Any], *, dry_run: bool = False
    ) -> Obj:
        new = copy.deepcopy(dict(obj))
        meta = new.setdefault("metadata", {})
        name = meta.get("name") or ""
        if not name:
            raise Invalid(f"{resource.kind} name is required", reason="Invalid")
        self.requests.append(("create", str(resource), name))
        if meta.get("resourceVersion"):
            raise InternalError("resourceVersion should not be set on objects to be created")
        key = self._key(resource, name, meta.get("namespace"))
        if key in self._objects:
            raise AlreadyExists(
                f'{resource.plural} "{name}" already exists', reason="AlreadyExists"
            )
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        new.update(apiVersion=resource.api_version, kind=resource.kind)
        if resource.has_status:
            new.setdefault("spec", {})
            if resource.plural not in _STATUS_ON_CREATE:
                new["status"] = {}
        if dry_run:
            return new  # validated, not stored: no resourceVersion, no watch event
        return self._store(resource, new, WatchEventType.ADDED)

    def _check_version(self, current: Obj, wanted: str | None, name: str) -> None:
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict(
                f'Operation cannot be fulfilled on "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                reason="Conflict",
            )

    def _write(
        self,
        resource: Resource,
        current: Obj,
        updated: Obj,
        subresource: str | None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Keep the half a subresource may not change, then store (or finish deletion)."""
        updated = copy.deepcopy(updated)
        if subresource == "status":
            if "spec" in current:
                updated["spec"] = copy.deepcopy(current["spec"])
        elif resource.has_status:
            updated["status"] = copy.deepcopy(current.get("status", {}))
        meta = updated["metadata"]
        for fixed in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if fixed in current["metadata"]:
                meta[fixed] = current["metadata"][fixed]
        if updated == current:
            return copy.deepcopy(current)  # a no-op write does not bump the version
        if dry_run:
            return updated  # validated, not stored
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(resource, current)
            return updated
        return self._store(resource, updated, WatchEventType.MODIFIED)

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
        self.requests.append(("patch", str(resource), name))
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        current = self._get(resource, name, namespace)
        if isinstance(patch, Mapping):
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            self._check_version(current, wanted, name)
        if patch_type is PatchType.JSON:
            updated = apply_json_patch(current, patch)
        elif patch_type is PatchType.STRATEGIC:
            updated = strategic_merge_patch(current, patch)
        else:
            updated = merge_patch(current, patch)
        return self._write(resource, current, updated, subresource, dry_run=dry_run)

    async def replace(
        self, resource: Resource, obj: Mapping[str, Any], *, subresource: str | None = None
    ) -> Obj:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        self.requests.append(("replace", str(resource), name))
        current = self._get(resource, name, meta.get("namespace"))
        self._check_version(current, meta.get("resourceVersion"), name)
        return self._write(resource, current, dict(obj), subresource)

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> Obj | None:
        self.requests.append(("delete", str(resource), name))
        current = self._get(resource, name, namespace)
        if preconditions is not None:
            self._check_preconditions(current, preconditions, name)
        meta = current["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(current)
            updated = copy.deepcopy(current)
            updated["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
            return self._store(resource, updated, WatchEventType.MODIFIED)
        self._remove(resource, current)
        return None

    def _check_preconditions(self, current: Obj, pre: Preconditions, name: str) -> None:
        meta = current["metadata"]
        for label, wanted, actual in (
            ("UID", pre.uid, meta.get("uid")),
            ("ResourceVersion", pre.resource_version, meta.get("resourceVersion")),
        ):
            if wanted is not None and wanted != actual:
                raise Conflict(
                    f"Precondition failed: {label} in precondition: {wanted}, "
                    f"{label} in object meta: {actual}",
                    reason="Conflict",
                )

    async def close(self) -> None:
        return None


def _parse_selector(selector: str | None) -> dict[str, str]:
    """Equality-only label selectors (``a=b,c=d``), which is all kccm uses."""
    wanted: dict[str, str] = {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        wanted[key.strip()] = value.lstrip("=").strip()
    return wanted
