"""Workqueue rate limiters, as in ``k8s.io/client-go/util/workqueue/default_rate_limiters.go``.

A rate limiter answers ``when(key)``: how long (seconds) to wait before the key may be
retried. Calling ``when`` records a failure; ``forget`` clears the key's history;
``num_requeues`` reports how many failures are on record. The per-controller constructors at
the bottom carry the values the upstream cloud controllers use.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from kccm.util.clock import REAL_CLOCK, Clock
from kccm.util.tokenbucket import TokenBucket

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
    "default_item_based_rate_limiter",
    "node_controller_rate_limiter",
    "route_controller_rate_limiter",
    "service_controller_rate_limiter",
]


class RateLimiter(Protocol):
    """client-go's ``TypedRateLimiter``."""

    def when(self, key: Hashable) -> float:
        """Record a failure of ``key`` and return the seconds to wait before retrying it."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking ``key`` (it succeeded or was given up on)."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        """How many failures of ``key`` are on record."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-key delay ``base * 2**failures``, capped at ``max_delay``.

    The first call for a key returns ``base`` (client-go ``ItemExponentialFailureRateLimiter``;
    an overflow of the power yields ``max_delay``).
    """

    def __init__(self, base_delay: float, max_delay: float) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        exponent = self._failures.get(key, 0)
        self._failures[key] = exponent + 1
        try:
            backoff = self.base_delay * 2.0**exponent
        except OverflowError:
            return self.max_delay
        return min(backoff, self.max_delay)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class ItemFastSlowRateLimiter:
    """``fast_delay`` for the first ``max_fast_attempts`` failures of a key, then ``slow_delay``."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._attempts: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        attempts = self._attempts[key] = self._attempts.get(key, 0) + 1
        return self.fast_delay if attempts <= self.max_fast_attempts else self.slow_delay

    def forget(self, key: Hashable) -> None:
        self._attempts.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._attempts.get(key, 0)


class BucketRateLimiter:
    """One token bucket shared by every key (client-go ``BucketRateLimiter``).

    ``when`` reserves a token, possibly from the future, and returns the wait until it is
    usable. Keys are not tracked: ``num_requeues`` is always 0 and ``forget`` does nothing.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        self.bucket = TokenBucket(qps, burst, clock=clock)

    def when(self, key: Hashable) -> float:
        return self.bucket.reserve()

    def forget(self, key: Hashable) -> None:
        return None

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay any of ``limiters`` asks for; every limiter is consulted each time."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, key: Hashable) -> float:
        return max([limiter.when(key) for limiter in self.limiters])

    def forget(self, key: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


class WithMaxWaitRateLimiter:
    """Caps the delay of ``limiter`` at ``max_delay`` (client-go ``WithMaxWaitRateLimiter``)."""

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self.limiter = limiter
        self.max_delay = max_delay

    def when(self, key: Hashable) -> float:
        return min(self.limiter.when(key), self.max_delay)

    def forget(self, key: Hashable) -> None:
        self.limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self.limiter.num_requeues(key)


def default_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """client-go ``DefaultControllerRateLimiter``: per-key 5 ms·2^n up to 1000 s, max'ed with
    a shared bucket of 10 qps and burst 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )


def default_item_based_rate_limiter() -> RateLimiter:
    """client-go ``DefaultItemBasedRateLimiter``: per-key 1 ms·2^n up to 1000 s."""
    return ItemExponentialFailureRateLimiter(0.001, 1000.0)


def node_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """The cloud-node controller's queue ``Nodes``: the default controller limiter."""
    return default_controller_rate_limiter(clock=clock)


def service_controller_rate_limiter() -> RateLimiter:
    """The service controller's ``service`` and ``node`` queues: 5 s·2^n up to 300 s
    (upstream ``minRetryDelay`` / ``maxRetryDelay``)."""
    return ItemExponentialFailureRateLimiter(5.0, 300.0)


def route_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> RateLimiter:
    """The route controller's ``Routes`` queue (watch mode): a bucket of one token every 10 s
    (burst 1), no delay above 10 s (upstream ``minRouteResyncInterval``)."""
    return WithMaxWaitRateLimiter(BucketRateLimiter(0.1, 1, clock=clock), 10.0)
