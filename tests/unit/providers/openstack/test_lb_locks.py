"""The per-balancer locks (``kccm.providers.openstack.loadbalancer.locks``): one sync at a
time per balancer, re-entrant, other balancers free, nothing kept once unused; a wait is
bounded (a busy balancer fails the sync, to be retried) and left out of the reconcile
duration metric."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from os_lb_support import StepClock
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.loadbalancer.locks import BalancerBusy, BalancerLocks
from kccm.providers.openstack.metrics import OpenStackMetrics

SAFETY_NET = 30.0
LOCKS_LOGGER = "kccm.providers.openstack.loadbalancer.locks"


@contextmanager
def held_elsewhere(locks: BalancerLocks, lb_id: str) -> Iterator[threading.Event]:
    """``lb_id`` held by another thread (another Service's sync) for the block; setting the
    event yielded lets it go early."""
    holding, release = threading.Event(), threading.Event()

    def other() -> None:
        with locks.hold(lb_id):
            holding.set()
            release.wait(SAFETY_NET)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert holding.wait(SAFETY_NET)
        yield release
    finally:
        release.set()
        thread.join(SAFETY_NET)


@contextmanager
def on_waiting(action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` (in the waiting thread) when a sync starts waiting for its turn."""

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for another sync" in record.getMessage():
                action()

    logger = logging.getLogger(LOCKS_LOGGER)
    handler, level = Seen(logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_second_sync_of_the_balancer_waits_for_the_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    locks = BalancerLocks()
    order: list[str] = []
    waiting = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            waiting.set()

    logger = logging.getLogger("kccm.providers.openstack.loadbalancer.locks")
    handler = Seen(logging.DEBUG)
    logger.addHandler(handler)
    caplog.set_level(logging.DEBUG, logger=logger.name)

    def second() -> None:
        with locks.hold("lb-1"):
            order.append("second")

    try:
        with locks.hold("lb-1"):
            thread = threading.Thread(target=second)
            thread.start()
            assert waiting.wait(SAFETY_NET)
            order.append("first")
        thread.join(SAFETY_NET)
    finally:
        logger.removeHandler(handler)
    assert order == ["first", "second"]
    assert "lb-1: waiting for another sync of it" in caplog.text
    assert locks.held() == []


CASES = [
    # id, the nested key, held while nested
    pytest.param("lb-1", ["lb-1"], id="same-balancer-again-re-entrant"),
    pytest.param("lb-2", ["lb-1", "lb-2"], id="another-balancer-free"),
]


@pytest.mark.parametrize(("inner", "held"), CASES)
def test_nested_holds_do_not_wait(inner: str, held: list[str]) -> None:
    locks = BalancerLocks()
    with locks.hold("lb-1"), locks.hold(inner):
        assert locks.held() == held
    assert locks.held() == []


def test_a_failing_sync_releases_the_lock() -> None:
    locks = BalancerLocks()
    with pytest.raises(RuntimeError), locks.hold("lb-1"):
        raise RuntimeError("sync failed")
    assert locks.held() == []
    done = threading.Event()

    def again() -> None:
        with locks.hold("lb-1"):
            done.set()

    thread = threading.Thread(target=again)
    thread.start()
    assert done.wait(SAFETY_NET)
    thread.join(SAFETY_NET)
    assert locks.held() == []


def test_a_sync_waits_for_a_busy_balancer_no_longer_than_the_bound() -> None:
    """A zero bound stands for the 30 s: the waiter fails with a retryable error naming the
    balancer instead of holding a sync worker (a broken bound: the waiter never ends)."""
    locks = BalancerLocks(wait_s=0)
    outcome: list[BaseException] = []

    def waiter() -> None:
        try:
            with locks.hold("lb-1"):
                outcome.append(AssertionError("got the lock of a busy balancer"))
        except CloudProviderError as err:
            outcome.append(err)

    with held_elsewhere(locks, "lb-1"):
        thread = threading.Thread(target=waiter)
        thread.start()
        thread.join(SAFETY_NET)
        ended = not thread.is_alive()
        assert locks.held() == ["lb-1"]
    thread.join(SAFETY_NET)
    assert ended
    [error] = outcome
    assert isinstance(error, BalancerBusy)
    assert str(error) == "balancer lb-1 is busy with another Service's sync; retrying"
    assert locks.held() == []


def test_the_wait_is_left_out_of_the_reconcile_duration() -> None:
    clock = StepClock()
    metrics = OpenStackMetrics(monotonic=clock.monotonic)
    locks = BalancerLocks(clock=clock, on_waited=metrics.waited)
    with held_elsewhere(locks, "lb-1") as release:

        def other_sync_takes_five_seconds() -> None:
            clock.now_s += 5.0
            release.set()

        with on_waiting(other_sync_takes_five_seconds), metrics.reconcile("loadbalancer_ensure"):
            clock.now_s += 2.0
            with locks.hold("lb-1"):
                clock.now_s += 1.0
    registry = CollectorRegistry()
    metrics.register(registry)
    seconds = registry.get_sample_value(
        "cloudprovider_openstack_reconcile_duration_seconds_sum",
        {"operation": "loadbalancer_ensure"},
    )
    assert seconds == 3.0
