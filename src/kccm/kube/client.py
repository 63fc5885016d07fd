"""The real API-server client: lightkube's configuration and HTTP transport, our own requests.

lightkube resolves kubeconfig / in-cluster / exec credentials; :mod:`kccm.kube.transport`
carries the requests (aiohttp, pooled keep-alive connections). This module issues the REST
calls itself so objects stay plain dicts (nothing lost in decoding), lists are paged, watches
ask for bookmarks and report 410 Gone as :class:`~kccm.kube.errors.Gone`, and every request
passes a client-side token bucket (client-go's QPS/burst).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import msgspec

from kccm import __version__
from kccm.kube.config import ClusterConfig
from kccm.kube.errors import KubeError, error_from_status
from kccm.kube.interface import (
    ListResult,
    Obj,
    PatchType,
    Preconditions,
    WatchEvent,
    WatchEventType,
    collect_pages,
)
from kccm.kube.projection import Projection
from kccm.kube.resources import Resource
from kccm.kube.transport import HttpResponse, Transport
from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.tokenbucket import TokenBucket

__all__ = ["DEFAULT_BURST", "DEFAULT_QPS", "KubeApiClient"]

log = logging.getLogger(__name__)

MAX_RETRIES = 10
"""client-go's ``maxRetries`` for answers carrying Retry-After."""
DEFAULT_QPS = 20.0
DEFAULT_BURST = 30
_JSON = "application/json"
_decode = msgspec.json.decode
_encode = msgspec.json.encode

RequestObserver = Callable[[str, str], None]


class KubeApiClient:
    """:class:`~kccm.kube.interface.KubeClient` over HTTPS to a real API server."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        timeout: float = 30.0,
        user_agent: str = f"kccm/{__version__}",
        clock: Clock = REAL_CLOCK,
        on_request: RequestObserver | None = None,
        projections: Mapping[Resource, Projection[Any]] | None = None,
    ) -> None:
        """``projections``: resources whose lists, watches, gets and patch answers decode
        only what a :class:`~kccm.kube.projection.Projection` keeps (the daemon: Nodes)."""
        self._projections = dict(projections or {})
        self._transport = Transport(config, timeout=timeout, user_agent=user_agent)
        self._limiter = TokenBucket(qps, burst, clock=clock)
        self._timeout = timeout
        self._on_request = on_request
        self._clock = clock
        self.config = config

    # -- plumbing ---------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        headers: Mapping[str, str] | None = None,
    ) -> HttpResponse:
        """One request; like client-go, an answer that asks to come back later (a 429 or 5xx
        with Retry-After: the API server's priority and fairness shedding load) is retried
        after the delay it names, up to :data:`MAX_RETRIES` times."""
        content = None if body is None else _encode_body(body, content_type)
        for attempt in range(MAX_RETRIES + 1):
            await self._limiter.acquire()
            if self._on_request is not None:
                self._on_request(method, path)
            response = await self._transport.request(
                method,
                path,
                params=params,
                content=content,
                content_type=content_type if content is not None else None,
                headers=headers,
            )
            delay = _come_back_after(response)
            if delay is None or attempt == MAX_RETRIES:
                return response
            log.debug("%s %s: %d, retrying in %.1fs", method, path, response.status, delay)
            await self._clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(
        self, method: str, path: str, projection: Projection[Any] | None = None, **kwargs: Any
    ) -> Obj:
        response = await self._send(method, path, **kwargs)
        _raise_for_status(response)
        if projection is None:
            return _decode_obj(response.body)
        try:
            return projection.item(response.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise KubeError(f"the API server sent a body that is not an object: {exc}") from exc

    # -- KubeClient -------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Obj:
        path = resource.object_path(name, namespace)
        return await self._call("GET", path, self._projections.get(resource))

    async def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Obj], str]]:
        params = _selectors(label_selector, field_selector)
        if page_size > 0:
            params["limit"] = str(page_size)
        path = resource.collection_path(namespace)
        projection = self._projections.get(resource)
        while True:
            if projection is None:
                page = await self._call("GET", path, params=params)
                items, meta = list(page.get("items") or []), page.get("metadata") or {}
            else:
                items, meta = await self._projected_page(projection, path, params)
            yield items, str(meta.get("resourceVersion", ""))
            token = meta.get("continue")
            if not token:
                return
            params["continue"] = str(token)

    async def _projected_page(
        self, projection: Projection[Any], path: str, params: Mapping[str, str]
    ) -> tuple[builtins.list[Obj], Mapping[str, Any]]:
        response = await self._send("GET", path, params=params)
        _raise_for_status(response)
        try:
            return projection.page(response.body)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise KubeError(f"the API server sent a list that is not one: {exc}") from exc

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
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                page_size=page_size,
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
        params = _selectors(label_selector, field_selector)
        params.update(watch="1", resourceVersion=resource_version)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
        path = resource.collection_path(namespace)
        await self._limiter.acquire()
        if self._on_request is not None:
            self._on_request("GET", path)
        # A watch silent for its whole timeout and a minute more has lost its peer.
        silence = None if timeout_seconds is None else timeout_seconds + 60.0
        projection = self._projections.get(resource)
        async for item in self._transport.stream_lines(path, params, read_timeout=silence):
            if isinstance(item, HttpResponse):
                _raise_for_status(item)
            else:
                yield _watch_event(item, projection)

    async def create(
        self,
        resource: Resource,
        obj: Mapping[str, Any],
        *,
        dry_run: bool = False,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        namespace = namespace or (obj.get("metadata") or {}).get("namespace")
        params = {"dryRun": "All"} if dry_run else None
        path = resource.collection_path(namespace)
        if subresource:  # e.g. serviceaccounts/<name>/token (TokenRequest)
            path = _sub(resource.object_path(name or "", namespace), subresource)
        return await self._call("POST", path, params=params, body=obj)

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
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        params: dict[str, str] = {}
        if field_manager:
            params["fieldManager"] = field_manager
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        path = _sub(resource.object_path(name, namespace), subresource)
        return await self._call(
            "PATCH",
            path,
            self._projections.get(resource),
            params=params,
            body=patch,
            content_type=patch_type.value,
        )

    async def replace(
        self, resource: Resource, obj: Mapping[str, Any], *, subresource: str | None = None
    ) -> Obj:
        meta = obj.get("metadata") or {}
        path = _sub(
            resource.object_path(str(meta.get("name", "")), meta.get("namespace")), subresource
        )
        return await self._call("PUT", path, body=obj)

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        preconditions: Preconditions | None = None,
    ) -> Obj | None:
        body = None
        if preconditions is not None:
            body = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": preconditions.as_body(),
            }
        result = await self._call("DELETE", resource.object_path(name, namespace), body=body)
        if result.get("kind") == "Status":
            return None
        meta = result.get("metadata") or {}
        return result if meta.get("deletionTimestamp") and meta.get("finalizers") else None

    async def get_raw(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Obj:
        """GET a non-resource JSON path such as ``/version`` (``headers`` added to it)."""
        return await self._call("GET", path, params=params, headers=headers)

    async def bearer_token(self) -> str | None:
        """The bearer token these credentials send (token, token file, exec plugin), or None
        (a client certificate, basic auth, nothing)."""
        header = await self._transport.authorization()
        if header and header.lower().startswith("bearer "):
            return header[7:].strip()
        return None

    async def get_text(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """GET a non-resource text path such as ``/readyz``."""
        response = await self._send("GET", path, params=params)
        _raise_for_status(response)
        return response.body.decode(errors="replace")

    async def close(self) -> None:
        await self._transport.close()

    @property
    def rate_limiter(self) -> TokenBucket:
        """The client-side QPS/burst bucket every request passes."""
        return self._limiter


# -- helpers ---------------------------------------------------------------------------------


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def _sub(path: str, subresource: str | None) -> str:
    return f"{path}/{subresource}" if subresource else path


def _encode_body(body: Any, content_type: str) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    # JSON is valid YAML, so server-side apply bodies are sent as JSON too.
    return _encode(body)


def _decode_obj(content: bytes) -> Obj:
    try:
        value = _decode(content)
    except msgspec.DecodeError as exc:
        raise KubeError(f"the API server sent a body that is not JSON: {content[:200]!r}") from exc
    if not isinstance(value, dict):
        raise KubeError(f"the API server sent {type(value).__name__}, not an object")
    return value


def _raise_for_status(response: HttpResponse) -> None:
    if response.status < 400:
        return
    try:
        status = _decode(response.body)
    except msgspec.DecodeError:
        status = {}
    if not isinstance(status, dict) or status.get("kind") != "Status":
        text = response.body[:300].decode(errors="replace")
        status = {"code": response.status, "message": text or response.reason}
    raise error_from_status(
        status, http_code=response.status, retry_after=_retry_after(response.retry_after)
    )


def _come_back_after(response: HttpResponse) -> float | None:
    """Seconds to wait before retrying, when the server asked for it (client-go
    ``checkWait``: a 429 or 5xx carrying Retry-After); delays are capped at 10 s."""
    if response.status != 429 and response.status < 500:
        return None
    seconds = _retry_after(response.retry_after)
    return None if seconds is None else min(max(seconds, 0.0), 10.0)


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _watch_event(line: bytes, projection: Projection[Any] | None = None) -> WatchEvent:
    if projection is None:
        raw = _decode(line)
        kind, obj = raw.get("type"), raw.get("object") or {}
    else:
        try:
            kind, encoded = projection.event(line)
            obj = _decode(encoded) if kind == "ERROR" else projection.item(encoded)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise KubeError(f"the API server sent a watch event that is not one: {exc}") from exc
    if kind == "ERROR":
        raise error_from_status(obj)
    try:
        event_type = WatchEventType(kind)
    except ValueError as exc:
        raise KubeError(f"unknown watch event type {kind!r}") from exc
    return WatchEvent(type=event_type, object=obj)
