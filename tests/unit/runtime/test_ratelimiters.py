"""Rate limiters, case by case as client-go's default_rate_limiters_test.go exercises them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kccm.runtime import ratelimiters as rl
from kccm.util.clock import FakeClock

MS = 0.001


@dataclass(frozen=True)
class Step:
    """One call: ``when`` (expects a delay), ``requeues`` (expects a count), ``forget``,
    or ``advance`` (moves fake time by ``expect`` seconds)."""

    op: str
    key: str = "one"
    expect: float = 0.0


def when(key: str, delay: float) -> Step:
    return Step("when", key, delay)


def requeues(key: str, count: int) -> Step:
    return Step("requeues", key, count)


def forget(key: str) -> Step:
    return Step("forget", key)


def advance(seconds: float) -> Step:
    return Step("advance", expect=seconds)


Factory = Callable[[FakeClock], rl.RateLimiter]

CASES = [
    pytest.param(
        lambda c: rl.ItemExponentialFailureRateLimiter(1 * MS, 1.0),
        [
            when("one", 1 * MS),
            when("one", 2 * MS),
            when("one", 4 * MS),
            when("one", 8 * MS),
            when("one", 16 * MS),
            requeues("one", 5),
            when("two", 1 * MS),
            when("two", 2 * MS),
            requeues("two", 2),
            forget("one"),
            requeues("one", 0),
            when("one", 1 * MS),
        ],
        id="exponential-doubles-per-key-and-forget-resets",
    ),
    pytest.param(
        lambda c: rl.ItemExponentialFailureRateLimiter(1 * MS, 10 * MS),
        [when("one", d * MS) for d in (1, 2, 4, 8, 10, 10)],
        id="exponential-is-capped-at-max",
    ),
    pytest.param(
        lambda c: _failed(rl.ItemExponentialFailureRateLimiter(1 * MS, 1000.0), "one", 5000),
        [when("one", 1000.0), requeues("one", 5001)],
        id="exponential-overflow-gives-max",
    ),
    pytest.param(
        lambda c: rl.ItemFastSlowRateLimiter(5 * MS, 10.0, 3),
        [
            when("one", 5 * MS),
            when("one", 5 * MS),
            when("one", 5 * MS),
            when("one", 10.0),
            when("one", 10.0),
            requeues("one", 5),
            when("two", 5 * MS),
            forget("one"),
            requeues("one", 0),
            when("one", 5 * MS),
        ],
        id="fast-slow-switches-after-max-fast-attempts",
    ),
    pytest.param(
        lambda c: rl.BucketRateLimiter(1.0, 2, clock=c),
        [
            when("a", 0.0),
            when("b", 0.0),
            when("c", 1.0),
            when("d", 2.0),
            requeues("a", 0),
            advance(3.0),
            when("e", 0.0),
            advance(10.0),
            when("f", 0.0),
            when("g", 0.0),
            when("h", 1.0),
        ],
        id="bucket-burst-then-qps-and-refill-up-to-burst",
    ),
    pytest.param(
        lambda c: rl.MaxOfRateLimiter(
            rl.ItemFastSlowRateLimiter(5 * MS, 3.0, 3),
            rl.ItemExponentialFailureRateLimiter(1 * MS, 1.0),
        ),
        [
            when("one", 5 * MS),
            when("one", 5 * MS),
            when("one", 5 * MS),
            when("one", 3.0),
            when("one", 3.0),
            requeues("one", 5),
            forget("one"),
            requeues("one", 0),
            when("one", 5 * MS),
        ],
        id="max-of-takes-the-longest-delay",
    ),
    pytest.param(
        lambda c: rl.WithMaxWaitRateLimiter(rl.ItemExponentialFailureRateLimiter(1.0, 100.0), 3.0),
        [when("one", 1.0), when("one", 2.0), when("one", 3.0), when("one", 3.0)],
        id="with-max-wait-caps-the-delay",
    ),
    pytest.param(
        lambda c: rl.service_controller_rate_limiter(),
        [when("ns/svc", d) for d in (5, 10, 20, 40, 80, 160, 300, 300)],
        id="service-controller-5s-doubling-to-300s",
    ),
    pytest.param(
        lambda c: rl.route_controller_rate_limiter(clock=c),
        [when("routes", 0.0), when("routes", 10.0), when("routes", 10.0), requeues("routes", 0)],
        id="route-controller-one-per-10s-never-above-10s",
    ),
    pytest.param(
        lambda c: rl.default_item_based_rate_limiter(),
        [when("one", 1 * MS), when("one", 2 * MS)],
        id="default-item-based-starts-at-1ms",
    ),
    pytest.param(
        lambda c: _failed(rl.default_controller_rate_limiter(clock=c), "x", 1),
        [when("one", 5 * MS), when("one", 10 * MS), when("x", 10 * MS), requeues("one", 2)],
        id="default-controller-exponential-from-5ms-within-burst",
    ),
    pytest.param(
        lambda c: _many_keys(rl.node_controller_rate_limiter(clock=c), 100),
        [when("key-100", 0.1), when("key-101", 0.2), advance(0.3), when("key-102", 5 * MS)],
        id="default-controller-bucket-10qps-after-burst-100",
    ),
]


def _failed(limiter: rl.RateLimiter, key: str, times: int) -> rl.RateLimiter:
    for _ in range(times):
        limiter.when(key)
    return limiter


def _many_keys(limiter: rl.RateLimiter, count: int) -> rl.RateLimiter:
    for i in range(count):
        assert limiter.when(f"key-{i}") == pytest.approx(5 * MS)
    return limiter


@pytest.mark.parametrize(("factory", "steps"), CASES)
async def test_rate_limiter(factory: Factory, steps: list[Step], clock: FakeClock) -> None:
    limiter = factory(clock)
    for i, step in enumerate(steps):
        await _run(limiter, step, clock, f"step {i}: {step}")


async def _run(limiter: rl.RateLimiter, step: Step, clock: FakeClock, where: str) -> None:
    if step.op == "when":
        assert limiter.when(step.key) == pytest.approx(step.expect), where
    elif step.op == "requeues":
        assert limiter.num_requeues(step.key) == step.expect, where
    elif step.op == "forget":
        limiter.forget(step.key)
    else:
        await clock.advance(step.expect)


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        rl.MaxOfRateLimiter()
