"""kccm.testing.interleave: a stop holds its role until the other role reached a point, a
watched lock marks a role that must wait, every role ends ``done`` with what it returned or
raised."""

from __future__ import annotations

import threading

from kccm.testing.interleave import Interleaving, Stop


def test_a_stop_holds_its_role_until_the_other_reached_the_point() -> None:
    events: list[str] = []
    order = Interleaving([Stop("a", "write", ("b:read",))])

    def a() -> str:
        order.before("write")
        events.append("a writes")
        return "a"

    def b() -> None:
        events.append("b reads")
        order.mark("read")
        raise RuntimeError("b failed")

    results = order.run({"a": a, "b": b})
    assert events == ["b reads", "a writes"]
    assert results["a"] == "a"
    assert isinstance(results["b"], RuntimeError)
    assert {"a:done", "b:done", "b:read"} <= order.reached


def test_a_role_waiting_for_a_watched_lock_counts_as_waiting() -> None:
    lock = threading.Lock()
    order = Interleaving([Stop("a", "release", ("b:waits",)), Stop("b", "start", ("a:holds",))])
    watched = order.watched(lock)

    def holder() -> None:
        with watched:
            order.mark("holds")
            order.before("release")

    def waiter() -> None:
        order.before("start")
        with watched:
            pass

    results = order.run({"a": holder, "b": waiter})
    assert results == {"a": None, "b": None}
    assert "b:waits" in order.reached
    assert not lock.locked()


def test_outside_a_run_nothing_is_recorded_or_held() -> None:
    order = Interleaving([Stop("", "write", ("never:reached",))])
    order.mark("read")
    order.before("write")
    assert order.reached == set()
