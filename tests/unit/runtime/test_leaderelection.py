"""Lease-based leader election on the kube fake and fake time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.kube.errors import ServerTimeout
from kccm.kube.fake import FakeKube
from kccm.kube.resources import LEASES
from kccm.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from kccm.util.clock import FakeClock

NS, NAME = "kube-system", "cloud-controller-manager"


@dataclass
class Candidate:
    identity: str
    elector: LeaderElector
    events: list[tuple[str, float]] = field(default_factory=list)
    task: asyncio.Task[bool] | None = None


def _candidate(
    kube: Any,
    clock: FakeClock,
    identity: str,
    registry: CollectorRegistry | None = None,
    **config: Any,
) -> Candidate:
    events: list[tuple[str, float]] = []

    async def started() -> None:
        events.append(("started", clock.monotonic()))
        await asyncio.Event().wait()  # lead forever

    elector = LeaderElector(
        kube,
        LeaderElectionConfig(identity=identity, **config),
        on_started_leading=started,
        on_stopped_leading=lambda: events.append(("stopped", clock.monotonic())),
        clock=clock,
        registry=registry,
    )
    candidate = Candidate(identity, elector, events)
    candidate.task = asyncio.create_task(elector.run())
    return candidate


async def _lease(kube: FakeKube) -> dict[str, Any]:
    spec: dict[str, Any] = (await kube.get(LEASES, NAME, namespace=NS))["spec"]
    return spec


async def _stop(*candidates: Candidate) -> None:
    for c in candidates:
        assert c.task is not None
        c.task.cancel()
    await asyncio.gather(*(c.task for c in candidates if c.task), return_exceptions=True)


async def test_first_candidate_creates_and_holds_the_lease(clock: FakeClock) -> None:
    kube, registry = FakeKube(), CollectorRegistry()
    a = _candidate(kube, clock, "a", registry)
    await clock.advance(0)
    spec = await _lease(kube)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"]
    assert a.events == [("started", 1000.0)]
    assert registry.get_sample_value("leader_election_master_status", {"name": NAME}) == 1
    await clock.advance(30)
    assert (await _lease(kube))["renewTime"] > spec["renewTime"], "renewed every retry period"
    assert a.elector.check()
    await _stop(a)
    assert registry.get_sample_value("leader_election_master_status", {"name": NAME}) == 0


async def test_follower_waits_while_the_leader_renews(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a")
    await clock.advance(0)
    b = _candidate(kube, clock, "b")
    await clock.advance(120)
    assert b.events == []
    assert b.elector.leader == "a"
    await _stop(a, b)


async def test_crashed_leader_is_replaced_after_expiry(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a")
    await clock.advance(0)
    b = _candidate(kube, clock, "b")
    await clock.advance(1)
    await _stop(a)  # no release: like a SIGKILL, the lease just stops being renewed
    crashed_at = clock.monotonic()
    await clock.advance(40)
    started = [t for what, t in b.events if what == "started"]
    assert len(started) == 1
    takeover = started[0] - crashed_at
    # at most one jittered poll (2 s x 2.2) late in seeing the last renewal, then it wakes
    # exactly at expiry instead of on its next jittered poll
    assert 15 - 2 <= takeover <= 15 + 2 * 2.2 + 0.01, takeover
    spec = await _lease(kube)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    await _stop(b)


async def test_release_on_cancel_hands_over_within_a_retry_period(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a", release_on_cancel=True)
    await clock.advance(0)
    b = _candidate(kube, clock, "b")
    await clock.advance(1)
    await _stop(a)
    assert (await _lease(kube))["holderIdentity"] == ""
    released_at = clock.monotonic()
    await clock.advance(10)
    started = [t for what, t in b.events if what == "started"]
    assert started
    assert started[0] - released_at <= 2 * 2.2 + 1e-6
    await _stop(b)


class AnswerLosingKube(FakeKube):
    """While ``losing`` is set, a Lease update is stored but its answer never arrives, as when
    a renewal in flight is cancelled or its connection drops."""

    losing = False

    async def replace(self, *args: Any, **kwargs: Any) -> Any:
        written = await super().replace(*args, **kwargs)
        if self.losing:
            raise ServerTimeout("the answer was lost")
        return written


async def test_release_after_a_renewal_whose_answer_was_lost(clock: FakeClock) -> None:
    """The stored lease is newer than the last one we saw: the release reads it first, as
    client-go does, instead of failing on a stale resourceVersion and leaving the lease held."""
    kube = AnswerLosingKube()
    a = _candidate(kube, clock, "a", release_on_cancel=True)
    await clock.advance(0)
    kube.losing = True
    await clock.advance(2.5)  # one renewal stored, its answer lost
    kube.losing = False
    await _stop(a)
    assert (await _lease(kube))["holderIdentity"] == ""


async def test_release_leaves_a_lease_someone_else_took(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a", release_on_cancel=True)
    await clock.advance(1)
    lease = await kube.get(LEASES, NAME, namespace=NS)
    lease["spec"].update(holderIdentity="b")
    await kube.replace(LEASES, lease)
    await _stop(a)
    assert (await _lease(kube))["holderIdentity"] == "b"


class FlakyKube(FakeKube):
    """Writes start failing when ``broken`` is set."""

    broken = False

    async def replace(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise ServerTimeout("etcd is unhappy")
        return await super().replace(*args, **kwargs)


async def test_losing_the_lease_stops_leading_and_returns_false(clock: FakeClock) -> None:
    kube = FlakyKube()
    a = _candidate(kube, clock, "a")
    await clock.advance(5)
    kube.broken = True
    await clock.advance(12)
    assert a.task is not None
    assert a.task.done()
    assert a.task.result() is False
    assert [what for what, _ in a.events] == ["started", "stopped"]
    stopped = a.events[1][1]
    assert stopped - 1005.0 <= 10 + 2 + 1e-6, "lost within the renew deadline (+ one period)"


async def test_expiry_uses_our_clock_not_the_writers_timestamps(clock: FakeClock) -> None:
    kube = FakeKube()
    stale = "2001-01-01T00:00:00.000000Z"  # written by a machine whose clock is far behind
    await kube.create(
        LEASES,
        {
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "holderIdentity": "other",
                "leaseDurationSeconds": 15,
                "acquireTime": stale,
                "renewTime": stale,
                "leaseTransitions": 4,
            },
        },
    )
    b = _candidate(kube, clock, "b")
    await clock.advance(10)
    assert b.events == [], "a lease first seen now is not expired, whatever its timestamps"
    await clock.advance(10)
    assert [what for what, _ in b.events] == ["started"]
    assert (await _lease(kube))["leaseTransitions"] == 5
    await _stop(b)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param(
            {"lease_duration": 10, "renew_deadline": 10},
            "leaseDuration must be greater",
            id="lease-not-longer-than-deadline",
        ),
        pytest.param(
            {"renew_deadline": 2, "retry_period": 2},
            "renewDeadline must be greater",
            id="deadline-within-jittered-retry",
        ),
        pytest.param({"identity": ""}, "identity", id="empty-identity"),
    ],
)
def test_bad_timings_are_rejected(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElector(
            FakeKube(), LeaderElectionConfig(**config), on_started_leading=asyncio.Event().wait
        )  # type: ignore[arg-type]


async def test_a_leader_never_takes_back_a_lease_someone_else_holds(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a")
    await clock.advance(1)
    lease = await kube.get(LEASES, NAME, namespace=NS)
    lease["spec"].update(holderIdentity="usurper", leaseDurationSeconds=60)
    await kube.replace(LEASES, lease)
    await clock.advance(20)
    assert (await _lease(kube))["holderIdentity"] == "usurper"
    assert a.task is not None
    assert a.task.done()
    assert a.task.result() is False, "it lost the lease and says so"


async def test_the_lease_carries_the_configured_annotations(clock: FakeClock) -> None:
    """kccm writes what it serves on its own Lease: with every write, over what others set."""
    kube = FakeKube()
    served = {"kccm.io/load-balancer-classes": "a.io/lb"}
    a = _candidate(kube, clock, "a", annotations=served)
    await clock.advance(0)
    lease = await kube.get(LEASES, NAME, namespace=NS)
    assert lease["metadata"]["annotations"] == served
    await kube.replace(
        LEASES, {**lease, "metadata": {**lease["metadata"], "annotations": {"other": "x"}}}
    )
    await clock.advance(30)
    lease = await kube.get(LEASES, NAME, namespace=NS)
    assert lease["metadata"]["annotations"] == {"other": "x", **served}
    await _stop(a)


async def test_no_annotations_configured_writes_none(clock: FakeClock) -> None:
    kube = FakeKube()
    a = _candidate(kube, clock, "a")
    await clock.advance(30)
    assert "annotations" not in (await kube.get(LEASES, NAME, namespace=NS))["metadata"]
    await _stop(a)


async def test_a_lost_lease_is_reported_before_the_leading_work_winds_down(
    clock: FakeClock,
) -> None:
    """Issue 28: the leader must stop acting the moment it gives up renewing (upstream's
    OnStoppedLeading exits there). Here the work takes long to wind down (as a provider call
    in a worker thread or an event flush to an unreachable apiserver would): ``on_lost`` comes
    at the renew deadline all the same, not after the work."""
    kube = FlakyKube()
    lost: list[float] = []
    wound_down = asyncio.Event()

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await wound_down.wait()  # a slow teardown

    elector = LeaderElector(
        kube,
        LeaderElectionConfig(identity="a"),
        on_started_leading=lead,
        on_lost=lambda: lost.append(clock.monotonic()),
        clock=clock,
    )
    task = asyncio.create_task(elector.run())
    await clock.advance(5)
    kube.broken = True
    await clock.advance(12)
    assert len(lost) == 1, "reported while the work still winds down"
    assert lost[0] - 1005.0 <= 10 + 2 + 1e-6, "at the renew deadline (+ one period)"
    assert not task.done()
    wound_down.set()
    assert await task is False
