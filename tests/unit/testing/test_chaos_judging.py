"""The chaos bench's judges on made-up histories: a double leader, a call from a process that
was not leading, a balancer leaked, duplicated, stale or missing are each found (so a clean
ledger means something)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kccm.kube.interface import Obj
from kccm.testing.chaos.leadership import (
    DEATH_SLACK,
    EXIT_SLACK,
    LeaseHolding,
    Mutation,
    ProcessLog,
    judge,
    lease_time,
    read_process_log,
)
from kccm.testing.chaos.world import Balancer, verdict


def _log(identity: str, acquired: Sequence[float] = (), lost: Sequence[float] = ()) -> ProcessLog:
    return ProcessLog(identity, acquired=list(acquired), lost=list(lost))


def test_reads_identity_leadership_and_writes_from_a_json_log(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"ts": 1.0, "msg": "leader election on lease kube-system/x as host_abc"},
        {"ts": 2.0, "msg": "successfully acquired lease kube-system/x"},
        {"ts": 3.0, "msg": "state file write put_load_balancer a123 generation=1"},
        {"ts": 4.0, "msg": "released lease kube-system/x"},
    ]
    path = tmp_path / "kccm-0.log"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nTraceback...\n")
    found = read_process_log(path)
    assert found.identity == "host_abc"
    assert (found.acquired, found.lost, found.released) == ([2.0], [], [4.0])
    assert found.writes == [(3.0, "put_load_balancer", "a123", "generation=1")]


def test_lease_time_is_utc() -> None:
    assert lease_time("1970-01-01T00:00:01.500000Z") == 1.5
    assert lease_time(None) is None


def test_a_clean_handover_is_no_violation() -> None:
    logs = {0: _log("a", [10.0]), 1: _log("b", [20.0])}
    holdings = [LeaseHolding("a", 9.9), LeaseHolding("b", 19.9)]
    calls = [Mutation(0, 12.0, "put"), Mutation(1, 21.0, "put")]
    verdict_ = judge(logs, {0: 15.0}, holdings, calls)
    assert (verdict_.overlaps, verdict_.violations, verdict_.mutations) == ([], [], 2)


def test_two_processes_believing_they_lead_at_once_are_a_double_leader() -> None:
    logs = {0: _log("a", [10.0]), 1: _log("b", [20.0])}
    verdict_ = judge(logs, {0: 25.0}, [LeaseHolding("a", 9.9), LeaseHolding("b", 19.9)], [])
    assert [(a.process, b.process) for a, b in verdict_.overlaps] == [(0, 1)]


def test_a_call_from_a_standby_or_after_the_successor_took_over_is_a_violation() -> None:
    logs = {0: _log("a", [10.0], lost=[30.0]), 1: _log("b", [20.0]), 2: _log("c")}
    holdings = [LeaseHolding("a", 9.9), LeaseHolding("b", 19.9)]
    calls = [
        Mutation(0, 19.0, "before the successor: fine"),
        Mutation(0, 21.0, "after b acquired, though a still believed it led"),
        Mutation(2, 12.0, "c never led"),
        Mutation(1, 5.0, "before b led"),
    ]
    verdict_ = judge(logs, {}, holdings, calls)
    assert [m.operation for m, _ in verdict_.violations] == [
        "after b acquired, though a still believed it led",
        "c never led",
        "before b led",
    ]


def test_a_request_recorded_just_after_the_kill_is_allowed_a_later_one_is_not() -> None:
    logs = {0: _log("a", [10.0])}
    calls = [Mutation(0, 15.0 + DEATH_SLACK / 2, "in flight"), Mutation(0, 17.0, "a ghost")]
    verdict_ = judge(logs, {0: 15.0}, [LeaseHolding("a", 9.9)], calls)
    assert [m.operation for m, _ in verdict_.violations] == ["a ghost"]


def test_a_call_while_exiting_after_the_lost_line_is_allowed_until_the_successor() -> None:
    logs = {0: _log("a", [10.0], lost=[15.0]), 1: _log("b", [20.0])}
    holdings = [LeaseHolding("a", 9.9), LeaseHolding("b", 15.0 + EXIT_SLACK / 2)]
    calls = [
        Mutation(0, 15.011, "a provider thread while the process flushes and exits"),
        Mutation(0, 15.0 + EXIT_SLACK * 0.75, "after b acquired"),
        Mutation(0, 15.0 + EXIT_SLACK * 2, "long after the lost line"),
    ]
    verdict_ = judge(logs, {}, holdings, calls)
    assert [m.operation for m, _ in verdict_.violations] == [
        "after b acquired",
        "long after the lost line",
    ]
    assert verdict_.winding_down == 1


def test_a_call_after_a_graceful_release_gets_no_slack() -> None:
    logs = {0: ProcessLog("a", acquired=[10.0], released=[15.0])}
    calls = [Mutation(0, 15.011, "after its controllers stopped")]
    verdict_ = judge(logs, {}, [LeaseHolding("a", 9.9)], calls)
    assert [m.operation for m, _ in verdict_.violations] == ["after its controllers stopped"]


class _World:
    provider, annotation = "test", "x"

    def stale(self, service: Obj, nodes: Sequence[Obj], balancer: Balancer) -> list[str]:
        want = [p["port"] for p in service["spec"]["ports"]]
        return [] if balancer.detail.get("ports") == want else ["ports"]


def _service(name: str, uid: str, ports: Sequence[int], address: str | None) -> Obj:
    status = {"loadBalancer": {"ingress": [{"ip": address}]}} if address else {}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"type": "LoadBalancer", "ports": [{"port": p} for p in ports]},
        "status": status,
    }


def _balancer(owner: str, uid: str, ports: Sequence[int], address: str) -> Balancer:
    detail: Mapping[str, Any] = {"ports": list(ports)}
    return Balancer(("a" + uid).replace("-", "")[:32], f"ns/{owner}", address, detail)


def test_verdict_finds_missing_duplicated_stale_and_leaked_balancers() -> None:
    services = [
        _service("ok", "u-1", [80], "10.0.0.1"),
        _service("missing", "u-2", [80], None),
        _service("twice", "u-3", [80], "10.0.0.3"),
        _service("old-ports", "u-4", [81], "10.0.0.4"),
        _service("wrong-status", "u-5", [80], "10.0.0.99"),
    ]
    balancers = [
        _balancer("ok", "u-1", [80], "10.0.0.1"),
        _balancer("twice", "u-3", [80], "10.0.0.3"),
        _balancer("twice", "u-3-earlier", [80], "10.0.0.30"),
        _balancer("old-ports", "u-4", [80], "10.0.0.4"),
        _balancer("wrong-status", "u-5", [80], "10.0.0.5"),
        _balancer("gone", "u-6", [80], "10.0.0.6"),
    ]
    found = verdict(_World(), services, [], balancers, ["ip claim 10.0.0.7 (ns/gone)"])  # type: ignore[arg-type]
    assert found.without == ["ns/missing"]
    assert [d.split(":")[0] for d in found.duplicated] == ["ns/twice"]
    assert [s.split(":")[0] for s in found.stale] == ["ns/old-ports", "ns/wrong-status"]
    assert found.leaked == ["au6 (ns/gone)", "ip claim 10.0.0.7 (ns/gone)"]
    assert not found.clean


def test_verdict_of_a_matching_cloud_is_clean() -> None:
    services = [_service("ok", "u-1", [80], "10.0.0.1")]
    balancers = [_balancer("ok", "u-1", [80], "10.0.0.1")]
    assert verdict(_World(), services, [], balancers, []).clean  # type: ignore[arg-type]
