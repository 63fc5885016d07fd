"""SyncStates: one record per object and controller, attempts in a row, the next retry on the
clock, forgetting, JSON, and kccm_sync_failures_total by reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import PermissionDenied, QuotaExceeded, Reason, StillProvisioning
from kccm.controllers.syncstate import SyncStates
from kccm.util.clock import FakeClock

START = datetime(2026, 1, 1, tzinfo=UTC)
EPOCH = START.timestamp()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=START)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def states(clock: FakeClock, registry: CollectorRegistry) -> SyncStates:
    return SyncStates(registry=registry, clock=clock)


def failures(registry: CollectorRegistry, controller: str, reason: str) -> float:
    value = registry.get_sample_value(
        "kccm_sync_failures_total", {"controller": controller, "reason": reason}
    )
    return value or 0.0


def test_a_success_records_when_and_no_reason(states: SyncStates) -> None:
    record = states.record("service", "ns/a", "svc", detail={"eligible_nodes": 3})
    assert (record.ok, record.reason, record.attempts, record.next_retry_at) == (
        True,
        None,
        0,
        None,
    )
    assert record.at == EPOCH
    assert record.detail == {"eligible_nodes": 3}


async def test_failures_count_attempts_and_a_success_resets_them(
    states: SyncStates, clock: FakeClock
) -> None:
    first = states.record("service", "ns/a", "svc", error=QuotaExceeded(), retry_in=5)
    await clock.advance(5)
    second = states.record("service", "ns/a", "svc", error=QuotaExceeded(), retry_in=10)
    assert (first.attempts, second.attempts) == (1, 2)
    assert second.next_retry_at == EPOCH + 5 + 10
    assert second.reason is Reason.QUOTA
    assert second.message == "cloud quota or limit exceeded"
    assert states.record("service", "ns/a", "svc").attempts == 0


@pytest.mark.parametrize(
    ("kwargs", "ok", "reason", "message"),
    [
        pytest.param({}, True, None, "", id="success"),
        pytest.param(
            {"error": PermissionDenied("no elb:Create")},
            False,
            Reason.PERMISSION,
            "no elb:Create",
            id="error-classified",
        ),
        pytest.param(
            {"error": StillProvisioning("PENDING_CREATE")},
            False,
            Reason.WAITING,
            "PENDING_CREATE",
            id="waiting",
        ),
        pytest.param(
            {"reason": Reason.NO_NODES, "message": "no nodes"},
            False,
            Reason.NO_NODES,
            "no nodes",
            id="reason-without-error",
        ),
        pytest.param(
            {"error": RuntimeError("x"), "reason": Reason.NO_NODES},
            False,
            Reason.NO_NODES,
            "x",
            id="reason-overrides-classification",
        ),
    ],
)
def test_outcome(
    states: SyncStates, kwargs: dict[str, object], ok: bool, reason: Reason | None, message: str
) -> None:
    record = states.record("node", "n1", "ctl", **kwargs)  # type: ignore[arg-type]
    assert (record.ok, record.reason, record.message) == (ok, reason, message)


def test_one_record_per_controller_sorted(states: SyncStates) -> None:
    states.record("node", "n1", "lifecycle")
    states.record("node", "n1", "cloud-node")
    states.record("node", "n1", "cloud-node", error=RuntimeError("again"))
    states.record("node", "n2", "cloud-node")
    assert [r.controller for r in states.get("node", "n1")] == ["cloud-node", "lifecycle"]
    assert states.get("node", "n1")[0].message == "again"
    assert [(r.key, r.controller) for r in states.snapshot()] == [
        ("n1", "cloud-node"),
        ("n1", "lifecycle"),
        ("n2", "cloud-node"),
    ]
    assert states.get("service", "n1") == []


def test_forget_one_controller_or_all(states: SyncStates) -> None:
    states.record("node", "n1", "a")
    states.record("node", "n1", "b")
    states.forget("node", "n1", "a")
    assert [r.controller for r in states.get("node", "n1")] == ["b"]
    states.forget("node", "n1")
    assert states.get("node", "n1") == []
    states.forget("node", "never-seen", "a")


def test_annotate_merges_detail_without_an_attempt(states: SyncStates) -> None:
    states.record("node", "n1", "a", error=RuntimeError("x"), detail={"one": 1})
    merged = states.annotate("node", "n1", "a", two=2)
    assert (merged.attempts, dict(merged.detail)) == (1, {"one": 1, "two": 2})
    fresh = states.annotate("node", "n9", "a", three=3)
    assert (fresh.ok, dict(fresh.detail)) == (True, {"three": 3})


def test_records_are_frozen_and_their_detail_read_only(states: SyncStates) -> None:
    detail = {"excluded": {"n1": "label"}}
    record = states.record("service", "ns/a", "svc", detail=detail)
    detail["late"] = {}
    assert "late" not in record.detail
    with pytest.raises(TypeError):
        record.detail["x"] = 1  # type: ignore[index]


def test_json_is_plain(states: SyncStates) -> None:
    record = states.record(
        "service",
        "ns/a",
        "svc",
        error=QuotaExceeded("limit"),
        retry_in=5,
        detail={"excluded": {"n1": "why"}, "names": ("a", "b")},
    )
    assert json.loads(json.dumps(record.to_json())) == {
        "kind": "service",
        "key": "ns/a",
        "controller": "svc",
        "at": EPOCH,
        "ok": False,
        "reason": "quota-exceeded",
        "message": "limit",
        "attempts": 1,
        "next_retry_at": EPOCH + 5,
        "detail": {"excluded": {"n1": "why"}, "names": ["a", "b"]},
    }


def test_the_metric_counts_failures_by_controller_and_reason(
    states: SyncStates, registry: CollectorRegistry
) -> None:
    states.record("service", "ns/a", "svc", error=QuotaExceeded())
    states.record("service", "ns/b", "svc", error=QuotaExceeded())
    states.record("service", "ns/c", "svc", reason=Reason.NO_NODES)
    states.record("node", "n1", "node", error=RuntimeError("x"))
    states.record("service", "ns/a", "svc")
    assert failures(registry, "svc", "quota-exceeded") == 2
    assert failures(registry, "svc", "no-eligible-nodes") == 1
    assert failures(registry, "node", "error") == 1
    assert failures(registry, "svc", "error") == 0


def test_two_states_on_one_registry_share_the_counter(registry: CollectorRegistry) -> None:
    SyncStates(registry=registry).record("node", "n", "c", error=RuntimeError())
    SyncStates(registry=registry).record("node", "n", "c", error=RuntimeError())
    assert failures(registry, "c", "error") == 2
