"""Helpers the bench scripts share against a real apiserver: a bounded gather, quiet creates
and deletes, a token for a daemon's /metrics, and :class:`Completion`, which waits until so many
objects reach a state (Nodes untainted, Services with an ingress)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from kccm.kube.client import KubeApiClient
from kccm.kube.errors import AlreadyExists, NotFound
from kccm.kube.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    SERVICE_ACCOUNTS,
    Resource,
)
from kccm.runtime.informers import EventHandler, Informer

UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"


async def bounded(limit: int, coros: list[Awaitable[Any]]) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[Any]) -> Any:
        async with sem:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))


async def create_ignoring_exists(
    kube: KubeApiClient, resource: Resource, obj: dict[str, Any]
) -> None:
    with contextlib.suppress(AlreadyExists):
        await kube.create(resource, obj)


async def delete_quietly(
    kube: KubeApiClient, resource: Resource, name: str, namespace: str | None = None
) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(resource, name, namespace=namespace)


async def metrics_token(kube: KubeApiClient) -> str:
    """A ServiceAccount allowed to GET /metrics, and a token for it (TokenRequest)."""
    name = "kccm-bench-metrics"
    await create_ignoring_exists(
        kube, SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": "kube-system"}}
    )
    rules = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    await create_ignoring_exists(kube, CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}],
    }
    await create_ignoring_exists(kube, CLUSTER_ROLE_BINDINGS, binding)
    review = await kube.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        namespace="kube-system",
        name=name,
        subresource="token",
    )
    return str(review["status"]["token"])


def object_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


class Completion:
    """An informer that fires once ``done(obj)`` holds for ``total`` objects (``total``
    distinct ``key(obj)``, the object's namespace/name unless given)."""

    def __init__(
        self,
        kube: KubeApiClient,
        resource: Resource,
        total: int,
        done: Callable[[dict[str, Any]], bool],
        key: Callable[[dict[str, Any]], str] = object_key,
        **selector: Any,
    ) -> None:
        self.total = total
        self.done: set[str] = set()
        self.finished = asyncio.Event()
        self._test = done
        self._key = key
        self.informer = Informer(kube, resource, **selector)
        self.informer.add_event_handler(
            EventHandler(on_add=self._seen, on_update=lambda _old, new: self._seen(new))
        )
        self._task: asyncio.Task[None] | None = None

    def _seen(self, obj: dict[str, Any]) -> None:
        if self._test(obj):
            self.done.add(self._key(obj))
            if len(self.done) >= self.total:
                self.finished.set()

    async def __aenter__(self) -> Completion:
        self._task = asyncio.create_task(self.informer.run())
        await self.informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class Emptied:
    """An informer that fires once none of the objects it selects is left."""

    def __init__(self, kube: KubeApiClient, resource: Resource, **selector: Any) -> None:
        self.left: set[str] = set()
        self.finished = asyncio.Event()
        self.informer = Informer(kube, resource, **selector)
        self.informer.add_event_handler(
            EventHandler(on_add=lambda obj: self.left.add(object_key(obj)), on_delete=self._gone)
        )
        self._task: asyncio.Task[None] | None = None

    def _gone(self, obj: dict[str, Any]) -> None:
        self.left.discard(object_key(obj))
        if not self.left:
            self.finished.set()

    async def __aenter__(self) -> Emptied:
        self._task = asyncio.create_task(self.informer.run())
        await self.informer.wait_for_sync()
        if not self.left:
            self.finished.set()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def untainted(node: dict[str, Any]) -> bool:
    return not any(t.get("key") == UNINIT for t in node.get("spec", {}).get("taints") or ())


def has_ingress(service: dict[str, Any]) -> bool:
    return bool(((service.get("status") or {}).get("loadBalancer") or {}).get("ingress"))
