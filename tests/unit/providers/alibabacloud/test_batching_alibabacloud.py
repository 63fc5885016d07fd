"""Coalescer: reads asked for while a call is in flight go out together in the next call (as
upstream's node controller batches ``DescribeInstances``), a lone read is one call with no wait,
a batch never exceeds its limit, and a failed call fails exactly the reads of its batch."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from kccm.providers.alibabacloud.batching import Coalescer


class Backend:
    """A fetch whose first call is held until released; every call recorded."""

    def __init__(self, known: set[str], fail_on: str = "") -> None:
        self.known, self.fail_on = known, fail_on
        self.calls: list[list[str]] = []
        self.entered, self.release = threading.Event(), threading.Event()

    def fetch(self, group: str, keys: Sequence[str]) -> Mapping[str, str]:
        self.calls.append(list(keys))
        if len(self.calls) == 1:
            self.entered.set()
            assert self.release.wait(30)
        if self.fail_on in keys:
            raise RuntimeError(f"{group}: throttled")
        return {k: f"{group}/{k}" for k in keys if k in self.known}


def _burst(
    backend: Backend, keys: list[str], limit: int
) -> tuple[Future[str | None], list[Future[str | None]]]:
    """The first key's read in flight, then ``keys[1:]`` asked for while it is held."""
    coalescer = Coalescer(backend.fetch, limit)
    pool = ThreadPoolExecutor(len(keys))
    first = pool.submit(coalescer.get, "r", keys[0])
    assert backend.entered.wait(30)
    rest = [pool.submit(coalescer.get, "r", k) for k in keys[1:]]
    while sum(len(q) for q in coalescer._pending.values()) < len(rest):
        threading.Event().wait(0.001)  # the waiters' enqueueing is the event; no timing asserted
    backend.release.set()
    pool.shutdown(wait=True)
    return first, rest


def test_a_lone_read_is_one_call_with_its_key() -> None:
    backend = Backend({"i-1"})
    backend.release.set()
    assert Coalescer(backend.fetch, 100).get("r", "i-1") == "r/i-1"
    assert Coalescer(backend.fetch, 100).get("r", "i-9") is None
    assert backend.calls == [["i-1"], ["i-9"]]


@pytest.mark.parametrize(
    ("waiting", "limit", "calls"),
    [
        pytest.param(5, 100, [1, 5], id="five-waiting-one-call"),
        pytest.param(250, 100, [1, 100, 100, 50], id="a-batch-never-exceeds-its-limit"),
    ],
)
def test_reads_asked_during_a_call_go_together_in_the_next(
    waiting: int, limit: int, calls: list[int]
) -> None:
    keys = [f"i-{n}" for n in range(waiting + 1)]
    backend = Backend(set(keys) - {"i-3"})
    first, rest = _burst(backend, keys, limit)
    assert [len(c) for c in backend.calls] == calls
    assert first.result() == "r/i-0"
    assert [f.result() for f in rest] == [None if k == "i-3" else f"r/{k}" for k in keys[1:]]


def test_a_failed_call_fails_the_reads_of_its_batch_only() -> None:
    keys = ["i-0", "i-1", "i-2"]
    backend = Backend(set(keys), fail_on="i-1")
    first, rest = _burst(backend, keys, 100)
    assert first.result() == "r/i-0"
    for waiter in rest:
        with pytest.raises(RuntimeError, match="r: throttled"):
            waiter.result()
    later = Coalescer(backend.fetch, 100)
    assert later.get("r", "i-2") == "r/i-2"
