"""Concurrent single-key reads answered by one batched call.

The framework initialises Nodes one at a time on up to ``--concurrent-node-syncs`` worker
threads, each asking for one instance (and one ENI). Upstream's node controller reads them in
batches of up to 100 (``batchOperate``, ``ListInstances``, ``DescribeNetworkInterfacesByIDs``,
``pkg/controller/node``). :class:`Coalescer` gives kccm the same economy without a delay: the
first read goes out at once with its one key; the keys asked for while it is in flight wait and
go out together in the next call (at most ``limit`` keys each), so a burst of N Nodes costs
about N / ``limit`` calls, and a lone Node one call as before. A failed call fails every read
of its batch (each Node's initialisation is retried as it would have been).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

__all__ = ["Coalescer"]

V = TypeVar("V")


class Coalescer(Generic[V]):
    """``get(group, key)``: ``fetch(group, keys)[key]`` (None when absent), keys of one group
    asked for concurrently fetched together."""

    def __init__(self, fetch: Callable[[str, Sequence[str]], Mapping[str, V]], limit: int) -> None:
        self._fetch = fetch
        self._limit = limit
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[str, Future[V | None]]]] = {}
        self._draining: set[str] = set()

    def get(self, group: str, key: str) -> V | None:
        waiter: Future[V | None] = Future()
        with self._lock:
            self._pending.setdefault(group, []).append((key, waiter))
            lead = group not in self._draining
            self._draining.add(group)
        if lead:
            self._drain(group)
        return waiter.result()

    def _drain(self, group: str) -> None:
        """Fetch the group's waiting keys, ``limit`` at a time, until none waits."""
        while True:
            with self._lock:
                queue = self._pending.pop(group, [])
                if not queue:
                    self._draining.discard(group)
                    return
                batch, rest = queue[: self._limit], queue[self._limit :]
                if rest:
                    self._pending[group] = rest
            keys = list(dict.fromkeys(key for key, _ in batch))
            try:
                found = self._fetch(group, keys)
            except Exception as err:  # every read of the batch fails as its own call would
                for _, waiter in batch:
                    waiter.set_exception(err)
                continue
            except BaseException as err:  # the leader is interrupted: nobody is left waiting
                with self._lock:
                    batch += self._pending.pop(group, [])
                    self._draining.discard(group)
                for _, waiter in batch:
                    waiter.set_exception(err)
                raise
            for key, waiter in batch:
                waiter.set_result(found.get(key))
