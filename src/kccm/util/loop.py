"""The daemon's event loops.

* :func:`run_loop` runs the daemon's main loop: uvloop where it is installed (a core dependency
  on Linux and macOS), else asyncio's own. uvloop runs the loop, its timers and its TCP and TLS
  transports in C (libuv): every API request, watch event and timer of the daemon goes through
  them, and at 1,000 Node initialisations the pure-Python loop was about a fifth of kccm's CPU.
  Behaviour is asyncio's (uvloop implements the same loop API); tests that run the daemon as a
  process run it on uvloop too, so both loops are exercised: unit tests run in-process on
  asyncio's.
* :class:`LoopThread` is a second loop in a thread of its own, for work that must answer while
  the main loop is busy: the health and metrics server (issue 28). A request waiting on the
  main loop queues behind every callback ready there (at 10,000 Nodes + 3,000 Services, a few
  hundred milliseconds for the several loop turns a TLS request takes); in a thread it waits
  only for the GIL, which a busy main thread hands over every ``sys.getswitchinterval()``
  (5 ms). Upstream serves these endpoints from goroutines of their own, which no controller
  work delays either.
* :func:`on_loop` awaits a coroutine on another loop: how code on the serving thread reaches
  objects that belong to the main loop (API clients, controller state behind ``async``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sized
from typing import Any, TypeVar

__all__ = ["LoopThread", "for_each", "on_loop", "run_loop"]

_T = TypeVar("_T")


def run_loop(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on the daemon's loop."""
    with asyncio.Runner(loop_factory=_new_loop) as runner:
        return runner.run(main)


async def on_loop(loop: asyncio.AbstractEventLoop | None, work: Awaitable[_T]) -> _T:
    """Await ``work`` running on ``loop``: in place when ``loop`` is the running loop (or
    ``None``), else scheduled there thread-safely, its result or exception handed back here.
    Cancelling the caller cancels ``work``. ``work`` must not be bound to another loop (a
    coroutine is not until it runs)."""
    if loop is None or loop is asyncio.get_running_loop():
        return await work
    coroutine = work if asyncio.iscoroutine(work) else _awaited(work)
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work


class LoopThread:
    """An asyncio loop running in a daemon thread named ``name`` until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = _new_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    async def run(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Await ``work`` running on the thread's loop."""
        return await on_loop(self.loop, work)

    async def stop(self) -> None:
        """Cancel what still runs on the thread's loop, stop it and wait for the thread."""
        if not self._thread.is_alive():
            return
        await self.run(_cancel_others())
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join)


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's where installed (its loop, timers and TLS run in C), else asyncio's (Windows,
    or a platform without wheels)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def _cancel_others() -> None:
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def for_each(
    items: Iterable[_T], work: Callable[[_T], Awaitable[object]], *, concurrency: int
) -> None:
    """``await work(item)`` for every item, at most ``concurrency`` at a time, by that many
    tasks taking items in turn (not a task per item waiting on a semaphore: a pass over
    thousands of Nodes made a task and a semaphore wait for each). Once every task has
    stopped, an exception one of them raised is raised (the first task's, in their order);
    a task that raised takes no further item."""
    pending = iter(items)
    if isinstance(items, Sized):
        concurrency = min(concurrency, len(items))

    async def worker() -> None:
        for item in pending:
            await work(item)

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, concurrency))]
    results = await asyncio.gather(*workers, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
