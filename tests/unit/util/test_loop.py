"""kccm.util.loop: awaiting work on another loop, and a loop in a thread of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from kccm.util.loop import LoopThread, for_each, on_loop


async def where() -> tuple[asyncio.AbstractEventLoop, int]:
    await asyncio.sleep(0)
    return asyncio.get_running_loop(), threading.get_ident()


async def boom() -> None:
    await asyncio.sleep(0)
    raise LookupError("from the other loop")


@pytest.fixture
async def thread() -> AsyncIterator[LoopThread]:
    loop_thread = LoopThread("test-loop")
    yield loop_thread
    await loop_thread.stop()


@pytest.mark.parametrize("target", ["none", "running"])
async def test_on_loop_runs_in_place_for_none_or_the_running_loop(target: str) -> None:
    loop = None if target == "none" else asyncio.get_running_loop()
    assert await on_loop(loop, where()) == (asyncio.get_running_loop(), threading.get_ident())


async def test_a_loop_thread_runs_work_on_its_own_thread(thread: LoopThread) -> None:
    loop, ident = await thread.run(where())
    assert loop is thread.loop
    assert ident != threading.get_ident()


async def test_work_sent_back_from_the_thread_runs_on_the_callers_loop(thread: LoopThread) -> None:
    home = asyncio.get_running_loop()

    async def hop_home() -> tuple[asyncio.AbstractEventLoop, int]:
        return await on_loop(home, where())

    assert await thread.run(hop_home()) == (home, threading.get_ident())


async def test_an_exception_crosses_back(thread: LoopThread) -> None:
    with pytest.raises(LookupError, match="from the other loop"):
        await thread.run(boom())


class Forever:
    """Work that waits until cancelled; its thread-safe events say it started and ended."""

    def __init__(self) -> None:
        self.started, self.cancelled = threading.Event(), threading.Event()

    async def run(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def test_cancelling_the_caller_cancels_the_work(thread: LoopThread) -> None:
    work = Forever()
    caller = asyncio.create_task(thread.run(work.run()))
    assert await asyncio.to_thread(work.started.wait, 10)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await asyncio.to_thread(work.cancelled.wait, 10)


async def test_stop_cancels_what_runs_there_and_ends_the_thread() -> None:
    loop_thread, work = LoopThread("test-stop"), Forever()
    # kept: the loop holds its tasks weakly, and a waiting task nobody references is a garbage
    # cycle the collector may free mid-test ("Task was destroyed but it is pending!")
    pending = asyncio.run_coroutine_threadsafe(work.run(), loop_thread.loop)
    assert await asyncio.to_thread(work.started.wait, 10)
    await loop_thread.stop()
    assert work.cancelled.is_set()
    assert pending.cancelled()
    assert loop_thread.loop.is_closed()
    await loop_thread.stop()  # a second stop does nothing


@pytest.mark.parametrize(("items", "concurrency"), [(0, 3), (1, 3), (10, 3), (10, 1), (3, 10)])
async def test_for_each_does_every_item_at_most_concurrency_at_once(
    items: int, concurrency: int
) -> None:
    done: list[int] = []
    running, most = 0, 0

    async def work(item: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        running -= 1
        done.append(item)

    await for_each(range(items), work, concurrency=concurrency)
    assert sorted(done) == list(range(items))
    assert most == min(items, concurrency)


async def test_for_each_raises_the_first_error_once_the_others_stopped() -> None:
    done: list[int] = []

    async def work(item: int) -> None:
        await asyncio.sleep(0)
        if item == 2:
            raise LookupError(item)
        done.append(item)

    with pytest.raises(LookupError):
        await for_each(range(6), work, concurrency=2)
    assert 2 not in done
    assert set(done) == {0, 1, 3, 4, 5}  # the other worker went on
