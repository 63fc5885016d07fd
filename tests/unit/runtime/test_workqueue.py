"""Workqueue behaviour, table-driven after client-go's queue, delaying-queue and
rate-limiting-queue tests, on fake time."""

from __future__ import annotations

import asyncio

import pytest

from kccm.runtime.ratelimiters import ItemExponentialFailureRateLimiter
from kccm.runtime.workqueue import RateLimitingQueue, ShutDown, WorkQueue
from kccm.util.clock import FakeClock

# A script is a string of steps separated by semicolons:
#   "add a"            q.add("a")
#   "after a 5"        q.add_after("a", 5)
#   "limited a"        q.add_rate_limited("a")   (limiter: 1s doubling, capped at 8s)
#   "forget a"         q.forget("a")
#   "get a"            the next get() returns "a" without waiting
#   "get blocks"       get() would wait (nothing queued, not shut down)
#   "get shutdown"     get() raises ShutDown
#   "done a"           q.done("a")
#   "len 2"            two keys are queued (waiting ones not counted)
#   "waiting 1"        one key waits for its delay
#   "requeues a 2"     q.num_requeues("a") == 2
#   "advance 5"        fake time moves 5 s
#   "shutdown"         q.shutdown()
CASES = [
    pytest.param(
        "add a; add b; get a; get b; get blocks",
        id="fifo-order",
    ),
    pytest.param(
        "add a; add a; add b; add a; len 2; get a; get b",
        id="dedup",
    ),
    pytest.param(
        "add a; get a; add a; len 0; get blocks; done a; len 1; get a",
        id="re-add-while-processing-requeues-on-done",
    ),
    pytest.param(
        "add a; get a; add a; add a; add a; done a; len 1; get a; done a; len 0",
        id="re-add-while-processing-requeues-once",
    ),
    pytest.param(
        "add a; get a; done a; len 0; get blocks",
        id="done-without-re-add",
    ),
    pytest.param(
        "add a; add b; shutdown; add c; len 2; get a; get b; get shutdown",
        id="shutdown-refuses-adds-but-hands-out-queued-keys",
    ),
    pytest.param(
        "add a; get a; add a; shutdown; done a; get a; done a; get shutdown",
        id="dirty-key-is-requeued-after-shutdown",
    ),
    pytest.param(
        "after a 10; after b 5; after c 7; len 0; waiting 3; advance 5; len 1; "
        "advance 2; len 2; advance 3; len 3; get b; get c; get a",
        id="add-after-ordered-by-deadline",
    ),
    pytest.param(
        "after a 5; after b 5; after c 5; advance 5; get a; get b; get c",
        id="add-after-same-deadline-keeps-call-order",
    ),
    pytest.param(
        "after a 10; after a 3; waiting 1; advance 3; len 1; waiting 0",
        id="add-after-earlier-deadline-wins",
    ),
    pytest.param(
        "after a 3; after a 10; advance 3; get a; done a; advance 10; len 0",
        id="add-after-later-deadline-ignored",
    ),
    pytest.param(
        "after a 0; len 1; after b -1; len 2",
        id="add-after-non-positive-now",
    ),
    pytest.param(
        "after a 5; add a; len 1; advance 5; len 1; get a",
        id="add-after-of-queued-key-dedups",
    ),
    pytest.param(
        "after a 5; advance 4.999; len 0; advance 0.001; len 1",
        id="add-after-not-early",
    ),
    pytest.param(
        "after a 5; shutdown; advance 10; len 0; waiting 0; get shutdown",
        id="shutdown-drops-waiting-keys",
    ),
    pytest.param(
        "after a 5; advance 2; after b 1; advance 1; get b; advance 2; get a",
        id="earlier-add-after-rearms-timer",
    ),
    pytest.param(
        "limited a; requeues a 1; advance 1; get a; done a; limited a; advance 1; len 0; "
        "advance 1; get a; done a; requeues a 2",
        id="rate-limited-delay-grows",
    ),
    pytest.param(
        "limited a; limited a; limited a; limited a; limited a; requeues a 5; advance 1; "
        "get a; done a; advance 100; len 0",
        id="rate-limited-waiting-key-keeps-earliest",
    ),
    pytest.param(
        "limited a; limited a; forget a; requeues a 0; limited a; advance 1; len 1",
        id="forget-resets-the-backoff",
    ),
]


@pytest.mark.parametrize("script", CASES)
async def test_queue_script(script: str, clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        ItemExponentialFailureRateLimiter(1.0, 8.0), "test", clock=clock
    )
    for i, step in enumerate(script.split(";")):
        await _step(queue, clock, step.split(), f"step {i}: {step.strip()!r}")


async def _step(q: RateLimitingQueue[str], clock: FakeClock, words: list[str], where: str) -> None:
    op, args = words[0], words[1:]
    if op == "get":
        await _check_get(q, args[0], where)
    elif op in ("len", "waiting"):
        assert (len(q) if op == "len" else q.waiting) == int(args[0]), where
    elif op == "requeues":
        assert q.num_requeues(args[0]) == int(args[1]), where
    elif op == "advance":
        await clock.advance(float(args[0]))
    elif op == "after":
        q.add_after(args[0], float(args[1]))
    else:
        _simple(q, op, args)


def _simple(q: RateLimitingQueue[str], op: str, args: list[str]) -> None:
    actions = {
        "add": q.add,
        "done": q.done,
        "limited": q.add_rate_limited,
        "forget": q.forget,
    }
    if op == "shutdown":
        q.shutdown()
    else:
        actions[op](args[0])


async def _check_get(q: WorkQueue[str], expected: str, where: str) -> None:
    task = asyncio.create_task(q.get())
    await _settle()
    if expected == "blocks":
        assert not task.done(), where
        task.cancel()
        return
    assert task.done(), where
    if expected == "shutdown":
        with pytest.raises(ShutDown):
            task.result()
    else:
        assert task.result() == expected, where


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_blocked_getter_is_woken_by_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await _settle()
    queue.add("a")
    assert await getter == "a"
    assert queue.processing == {"a"}


async def test_shutdown_wakes_every_blocked_getter() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    queue.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert [type(r) for r in results] == [ShutDown] * 3


async def test_concurrent_getters_get_distinct_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    for key in "abc":
        queue.add(key)
    assert sorted(await asyncio.gather(*getters)) == ["a", "b", "c"]


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await _settle()
    queue.add("a")
    first.cancel()
    assert await second == "a"
    assert first.cancelled()


async def test_shutdown_with_drain_waits_for_in_flight_keys() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    a, b = await queue.get(), await queue.get()
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await _settle()
    queue.add("c")
    queue.done(a)
    await _settle()
    assert not drain.done()
    queue.done(b)
    await drain
    assert len(queue) == 0


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    queue: WorkQueue[str] = WorkQueue()
    await queue.shutdown_with_drain()
    assert queue.shutting_down


async def test_drain_does_not_wait_for_a_requeued_dirty_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    drain = asyncio.create_task(queue.shutdown_with_drain())
    await _settle()
    queue.done(key)
    await drain
    assert len(queue) == 1
    assert await queue.get() == "a"
