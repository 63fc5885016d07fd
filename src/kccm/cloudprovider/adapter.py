"""Calling provider methods that may be ``async def`` or plain ``def``.

Coroutine functions are awaited on the event loop. Plain functions run in a bounded thread
pool, so a blocking cloud SDK never stalls the loop; at most ``max_workers`` of them run at
once and further calls queue for a free thread. A plain function that happens to return an
awaitable has it awaited as well.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, overload

from kccm.cloudprovider.interface import MaybeAwaitable

__all__ = [
    "DEFAULT_ADAPTER",
    "DEFAULT_MAX_WORKERS",
    "ProviderCaller",
    "ThreadPoolAdapter",
    "is_async_callable",
]

T = TypeVar("T")
DEFAULT_MAX_WORKERS = 16


class ProviderCaller(Protocol):
    """Anything that runs a provider method for the framework (the adapter or the call gate).

    ``call`` is overloaded so that mypy infers the result type for ``async def`` methods,
    plain ones, and methods declared with a ``MaybeAwaitable`` result alike.
    """

    @overload
    async def call(self, method: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...
    @overload
    async def call(self, method: str, fn: Callable[..., MaybeAwaitable[T]], *args: Any) -> T: ...
    async def call(self, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)``; ``method`` names it for metrics and logs."""
        ...


def is_async_callable(fn: object) -> bool:
    """True for coroutine functions, bound or not, and objects with an ``async __call__``."""
    function = getattr(fn, "__func__", None)
    if function is not None:  # a bound method (every provider call): its function decides
        return _is_async_function(function)
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - we need the bound __call__ itself
    return inspect.iscoroutinefunction(call)


@functools.lru_cache(maxsize=1024)
def _is_async_function(function: object) -> bool:
    """Looked up once per function: a provider's methods are called thousands of times."""
    return inspect.iscoroutinefunction(function)


class ThreadPoolAdapter:
    """Runs provider methods without blocking the loop (see the module docstring)."""

    def __init__(self, max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1 (got {max_workers})")
        self.max_workers = max_workers
        self._executor: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.max_workers, thread_name_prefix="kccm-provider"
            )
        return self._executor

    @overload
    async def call(self, method: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T: ...
    @overload
    async def call(self, method: str, fn: Callable[..., MaybeAwaitable[T]], *args: Any) -> T: ...
    async def call(self, method: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)``: awaited if async, in the thread pool if plain."""
        if is_async_callable(fn):
            result = fn(*args)
        else:
            context = contextvars.copy_context()
            job = functools.partial(context.run, fn, *args)
            result = await asyncio.get_running_loop().run_in_executor(self._pool(), job)
        if inspect.isawaitable(result):
            return await result
        return result

    def close(self, *, wait: bool = True) -> None:
        """Shut the thread pool down (it is re-created on the next call if needed)."""
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)
            self._executor = None


DEFAULT_ADAPTER = ThreadPoolAdapter()
"""A process-wide adapter for callers that were not given one (threads start on first use)."""
