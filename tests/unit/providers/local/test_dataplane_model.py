"""The data plane's pure rules: parsing, diffing, hashing, source ranges, health counting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kccm.providers.local.dataplane.model import (
    Backend,
    HealthSpec,
    HealthState,
    ListenerKey,
    LoadBalancerSpec,
    PortSpec,
    SourceFilter,
    diff_listeners,
    listeners_of,
    parse_load_balancer,
    probe_targets,
    rendezvous_pick,
)

B1, B2, B3 = Backend("n1", "127.0.10.1"), Backend("n2", "127.0.10.2"), Backend("n3", "127.0.10.3")


def lb(
    name: str = "a",
    vip: str = "127.0.200.1",
    ports: tuple[PortSpec, ...] = (PortSpec("http", "TCP", 80, 30080),),
    backends: tuple[Backend, ...] = (B1, B2),
    health: HealthSpec | None = None,
    ranges: tuple[str, ...] = (),
    affinity: str = "None",
) -> LoadBalancerSpec:
    return LoadBalancerSpec(name, vip, ports, backends, health or HealthSpec(), ranges, affinity, 1)


def row(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "a",
        "vip": "127.0.200.1",
        "ports": json.dumps([{"name": "dns", "protocol": "UDP", "port": 53, "node_port": 30053}]),
        "backends": json.dumps([{"node": "n1", "address": "127.0.10.1"}]),
        "health": json.dumps({"mode": "node-port", "port": 32000, "path": "/healthz"}),
        "source_ranges": json.dumps(["10.0.0.0/8"]),
        "session_affinity": "ClientIP",
        "generation": 3,
    }
    return base | over


def test_parse_row() -> None:
    spec = parse_load_balancer(row())
    assert spec.ports == (PortSpec("dns", "UDP", 53, 30053),)
    assert spec.backends == (B1,)
    assert spec.health == HealthSpec("node-port", 32000, "/healthz")
    assert spec.source_ranges == ("10.0.0.0/8",)
    assert spec.session_affinity == "ClientIP"
    assert spec.generation == 3


@pytest.mark.parametrize(
    "over",
    [
        pytest.param({"ports": "not json"}, id="bad-json"),
        pytest.param({"ports": json.dumps([{"port": 80}])}, id="port-without-node-port"),
        pytest.param({"health": json.dumps({"mode": "icmp"})}, id="unknown-health-mode"),
        pytest.param(
            {"ports": json.dumps([{"protocol": "SCTP", "port": 1, "node_port": 2}])},
            id="unsupported-protocol",
        ),
    ],
)
def test_parse_row_rejects(over: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"'a'|protocol|mode"):
        parse_load_balancer(row(**over))


TCP80 = ListenerKey("127.0.200.1", "TCP", 80)


@pytest.mark.parametrize(
    ("before", "after", "added", "updated", "removed"),
    [
        pytest.param([lb()], [lb()], [], [], [], id="unchanged-is-untouched"),
        pytest.param([], [lb()], [TCP80], [], [], id="new-lb-adds"),
        pytest.param([lb()], [], [], [], [TCP80], id="deleted-lb-removes"),
        pytest.param([lb()], [lb(backends=(B1, B3))], [], [TCP80], [], id="backends-update"),
        pytest.param([lb()], [lb(ranges=("10.0.0.0/8",))], [], [TCP80], [], id="ranges-update"),
        pytest.param([lb()], [lb(affinity="ClientIP")], [], [TCP80], [], id="affinity-update"),
        pytest.param(
            [lb()],
            [lb(ports=(PortSpec("http", "TCP", 8080, 30080),))],
            [ListenerKey("127.0.200.1", "TCP", 8080)],
            [],
            [TCP80],
            id="port-change-replaces",
        ),
        pytest.param(
            [lb(), lb("b", vip="127.0.200.2")],
            [lb(), lb("b", vip="127.0.200.2", backends=(B3,))],
            [],
            [ListenerKey("127.0.200.2", "TCP", 80)],
            [],
            id="other-lb-change-leaves-first-alone",
        ),
    ],
)
def test_diff_listeners(
    before: list[LoadBalancerSpec],
    after: list[LoadBalancerSpec],
    added: list[ListenerKey],
    updated: list[ListenerKey],
    removed: list[ListenerKey],
) -> None:
    diff = diff_listeners(listeners_of(before), listeners_of(after))
    assert [s.key for s in diff.added] == added
    assert [s.key for s in diff.updated] == updated
    assert list(diff.removed) == removed


def test_tcp_and_udp_on_one_port_are_two_listeners() -> None:
    both = (PortSpec("t", "TCP", 53, 30053), PortSpec("u", "UDP", 53, 30054))
    listeners = listeners_of([lb(ports=both)])
    assert sorted(k.protocol for k in listeners) == ["TCP", "UDP"]
    assert listeners[ListenerKey("127.0.200.1", "UDP", 53)].node_port == 30054


@pytest.mark.parametrize(
    ("health", "ports"),
    [
        pytest.param(HealthSpec("kube-proxy", 10256, "/healthz"), [10256, 10256], id="kube-proxy"),
        pytest.param(HealthSpec("node-port", 31999, "/healthz"), [31999, 31999], id="node-port"),
        pytest.param(HealthSpec("tcp", 10256, "/healthz"), [30080, 30080], id="tcp-node-port"),
    ],
)
def test_probe_targets(health: HealthSpec, ports: list[int]) -> None:
    targets = probe_targets(lb(health=health))
    assert [(t.node, t.address, t.port, t.mode) for t in targets] == [
        ("n1", "127.0.10.1", ports[0], health.mode),
        ("n2", "127.0.10.2", ports[1], health.mode),
    ]


CLIENTS = [f"10.1.{i // 256}.{i % 256}" for i in range(2000)]


def test_rendezvous_is_stable_and_spreads() -> None:
    backends = [B1, B2, B3]
    picks = [rendezvous_pick(c, backends) for c in CLIENTS]
    assert picks == [rendezvous_pick(c, list(reversed(backends))) for c in CLIENTS]
    counts = {b: picks.count(b) for b in backends}
    assert min(counts.values()) > len(CLIENTS) / 3 * 0.8, counts


def test_rendezvous_removing_a_backend_moves_only_its_clients() -> None:
    before = {c: rendezvous_pick(c, [B1, B2, B3]) for c in CLIENTS}
    after = {c: rendezvous_pick(c, [B1, B2]) for c in CLIENTS}
    moved = [c for c in CLIENTS if before[c] != after[c]]
    assert moved
    assert all(before[c] == B3 for c in moved)


def test_rendezvous_empty() -> None:
    assert rendezvous_pick("10.0.0.1", []) is None


@pytest.mark.parametrize(
    ("ranges", "client", "allowed"),
    [
        pytest.param((), "203.0.113.9", True, id="no-ranges-allow-all"),
        pytest.param(("0.0.0.0/0",), "127.0.0.1", True, id="all-v4"),
        pytest.param(("127.0.0.0/24",), "127.0.0.7", True, id="inside"),
        pytest.param(("127.0.0.0/24",), "127.0.1.7", False, id="outside"),
        pytest.param(("10.0.0.0/8", "127.0.1.0/24"), "127.0.1.7", True, id="second-range"),
        pytest.param(("127.0.0.0/8",), "::ffff:127.0.0.9", True, id="v4-mapped"),
        pytest.param(("127.0.0.0/8",), "::1", False, id="v6-client-v4-range"),
        pytest.param(("::1/128",), "::1", True, id="v6"),
        pytest.param(("127.0.0.0/8",), "garbage", False, id="unparsable-client"),
        pytest.param((" 127.0.0.1/8 ",), "127.9.9.9", True, id="host-bits-and-spaces"),
    ],
)
def test_source_filter(ranges: tuple[str, ...], client: str, allowed: bool) -> None:
    assert SourceFilter(ranges).allows(client) is allowed


@pytest.mark.parametrize(
    ("results", "healthy", "changes"),
    [
        pytest.param([], None, [], id="unknown-before-first-check"),
        pytest.param([True], True, [True], id="first-success-healthy"),
        pytest.param([False], False, [True], id="first-failure-decides"),
        pytest.param([True, False], True, [True, False], id="one-failure-tolerated"),
        pytest.param([True, False, False], False, [True, False, True], id="two-failures-fall"),
        pytest.param([True, False, True, False], True, [True, False, False, False], id="reset"),
        pytest.param([False, True], True, [True, True], id="one-success-rises"),
    ],
)
def test_health_state(results: list[bool], healthy: bool | None, changes: list[bool]) -> None:
    state = HealthState(fall=2, rise=1)
    assert [state.record(ok) for ok in results] == changes
    assert state.healthy is healthy
    assert state.usable is (healthy is not False)


def test_health_state_rise_two() -> None:
    state = HealthState(fall=1, rise=2)
    state.record(False)
    assert [state.record(True), state.record(True)] == [False, True]
