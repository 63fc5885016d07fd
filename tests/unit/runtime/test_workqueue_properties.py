"""Properties of the basic workqueue under random interleavings of add / get / done."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from kccm.runtime.workqueue import WorkQueue

KEYS = st.sampled_from("abcd")
OPS = st.lists(st.tuples(st.sampled_from(["add", "get", "done"]), KEYS), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_no_add_is_lost_and_no_key_runs_twice(ops: list[tuple[str, str]]) -> None:
    asyncio.run(_check(ops))


async def _check(ops: list[tuple[str, str]]) -> None:
    queue: WorkQueue[str] = WorkQueue()
    owed: set[str] = set()  # keys added since they were last handed out
    for op, key in ops:
        if op == "add":
            queue.add(key)
            owed.add(key)
        elif op == "get" and len(queue):
            _check_handed_out(queue, await queue.get(), owed)
        elif op == "done" and key in queue.processing:
            queue.done(key)
    await _drain(queue, owed)
    assert owed == set(), "every add is followed by a get of its key"


def _check_handed_out(queue: WorkQueue[str], key: str, owed: set[str]) -> None:
    assert key in owed, "only keys that were added are handed out"
    owed.discard(key)
    assert list(queue.processing).count(key) == 1
    assert key not in set(queue._queue), "a key is never queued while processing"
    assert len(set(queue._queue)) == len(queue), "a key is queued at most once"


async def _drain(queue: WorkQueue[str], owed: set[str]) -> None:
    for key in list(queue.processing):
        queue.done(key)
    while len(queue):
        key = await queue.get()
        _check_handed_out(queue, key, owed)
        queue.done(key)
