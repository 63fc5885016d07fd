"""The adapter runs async methods on the loop and plain ones in a bounded thread pool."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kccm.cloudprovider import ThreadPoolAdapter, is_async_callable


class Provider:
    def __init__(self) -> None:
        self.threads: list[str] = []

    def blocking(self, value: int) -> int:
        self.threads.append(threading.current_thread().name)
        return value * 2

    async def native(self, value: int) -> int:
        self.threads.append(threading.current_thread().name)
        return value + 1


async def test_plain_methods_run_in_the_pool_and_async_ones_on_the_loop() -> None:
    provider, adapter = Provider(), ThreadPoolAdapter(max_workers=2)
    try:
        assert await adapter.call("blocking", provider.blocking, 21) == 42
        assert await adapter.call("native", provider.native, 41) == 42
    finally:
        adapter.close()
    assert provider.threads[0].startswith("kccm-provider")
    assert provider.threads[1] == threading.current_thread().name


async def test_a_blocked_provider_does_not_block_the_loop() -> None:
    release = threading.Event()
    adapter = ThreadPoolAdapter(max_workers=1)

    def stuck() -> str:
        release.wait(timeout=10)
        return "done"

    call = asyncio.create_task(adapter.call("stuck", stuck))
    await asyncio.sleep(0)
    assert not call.done()  # the loop is free while the thread waits
    release.set()
    assert await call == "done"
    adapter.close()


async def test_the_pool_is_bounded() -> None:
    adapter = ThreadPoolAdapter(max_workers=2)
    running, peak, lock, gate = 0, 0, threading.Lock(), threading.Barrier(2, timeout=10)

    def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        gate.wait()
        with lock:
            running -= 1

    await asyncio.gather(*(adapter.call("work", work) for _ in range(6)))
    adapter.close()
    assert peak == 2


async def test_errors_propagate_from_threads() -> None:
    def broken() -> None:
        raise KeyError("nope")

    adapter = ThreadPoolAdapter(max_workers=1)
    with pytest.raises(KeyError):
        await adapter.call("broken", broken)
    adapter.close()


def test_invalid_pool_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_workers must be at least 1"):
        ThreadPoolAdapter(max_workers=0)


class AsyncCallable:
    async def __call__(self) -> int:
        return 1


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(Provider().native, True, id="bound-coroutine-method"),
        pytest.param(Provider().blocking, False, id="bound-plain-method"),
        pytest.param(AsyncCallable(), True, id="object-with-async-call"),
        pytest.param(len, False, id="builtin"),
    ],
)
def test_is_async_callable(fn: object, expected: bool) -> None:
    assert is_async_callable(fn) is expected
