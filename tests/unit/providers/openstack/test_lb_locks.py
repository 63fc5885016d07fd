"""The per-balancer locks (``kccm.providers.openstack.loadbalancer.locks``): one sync at a
time per balancer, re-entrant, other balancers free, nothing kept once unused."""

from __future__ import annotations

import logging
import threading

import pytest

from kccm.providers.openstack.loadbalancer.locks import BalancerLocks

SAFETY_NET = 30.0


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
