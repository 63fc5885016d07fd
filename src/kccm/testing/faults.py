"""Fault injection around a :class:`~kccm.kube.interface.KubeClient` for reliability tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kccm.kube.errors import TransportError
from kccm.kube.interface import KubeClient, Obj, WatchEvent
from kccm.kube.resources import Resource

__all__ = ["PartitionableKube"]


class PartitionableKube:
    """Delegates to ``inner`` until :meth:`cut`: then open watches break, and list/watch calls
    fail with TransportError, until :meth:`heal`. Writes keep working (other clients of the
    cluster are not partitioned), so a test can change the world during the gap."""

    def __init__(self, inner: KubeClient) -> None:
        self._inner = inner
        self._cut = asyncio.Event()
        self.watches_started = 0

    def cut(self) -> None:
        self._cut.set()

    def heal(self) -> None:
        self._cut = asyncio.Event()

    @property
    def partitioned(self) -> bool:
        return self._cut.is_set()

    def _refuse(self, what: str) -> None:
        if self._cut.is_set():
            raise TransportError(f"{what}: network partition (test fault)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def list_pages(
        self, resource: Resource, **kwargs: Any
    ) -> AsyncIterator[tuple[list[Obj], str]]:
        self._refuse("list")
        async for page in self._inner.list_pages(resource, **kwargs):
            self._refuse("list")
            yield page

    async def watch(self, resource: Resource, **kwargs: Any) -> AsyncIterator[WatchEvent]:
        self._refuse("watch")
        self.watches_started += 1
        stream = aiter(self._inner.watch(resource, **kwargs))
        cut = asyncio.ensure_future(self._cut.wait())
        try:
            while True:
                step = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait({step, cut}, return_when=asyncio.FIRST_COMPLETED)
                if step not in done:
                    step.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await step
                    raise TransportError("watch: network partition (test fault)")
                try:
                    event = step.result()
                except StopAsyncIteration:
                    return
                yield event
        finally:
            cut.cancel()
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
