"""The local provider's draining state (drain.py, the data plane's Backend.draining): a draining
backend stays listed, gets no new connection or UDP session, keeps the ones it has; a draining
Node the balancer does not hold is never added; rows without a drain are written as before."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.dataplane.model import Backend, ListenerKey, ListenerSpec, parse_backends
from kccm.providers.local.dataplane.proxy import Listener, UdpListener
from kccm.providers.local.store import LocalStore


def node(name: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"providerID": f"local://{name}"},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }


A, B, C = node("a", "10.0.0.1"), node("b", "10.0.0.2"), node("c", "10.0.0.3")
SERVICE = {
    "metadata": {"name": "s", "namespace": "d", "uid": "u1"},
    "spec": {"type": "LoadBalancer", "ports": [{"protocol": "TCP", "port": 80, "nodePort": 30080}]},
}


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    store = LocalStore(tmp_path / "state.db")
    conf = "[Global]\nstart-dataplane = false\n"
    yield LocalCloud(store, load_local_config(io.StringIO(conf)))
    store.close()


def backends(cloud: LocalCloud) -> list[tuple[str, bool]]:
    (row,) = cloud.store.list_load_balancers()
    return [(str(b["node"]), bool(b.get("draining"))) for b in row.backends]


CASES = {
    "held-node-drains": ([A, B, C], [A, B], [C], [("a", False), ("b", False), ("c", True)]),
    "not-held-node-not-added": ([A, B], [A, B], [C], [("a", False), ("b", False)]),
    "serving-wins-over-draining": ([A, B], [A, B], [B], [("a", False), ("b", False)]),
    "nothing-draining": ([A, B, C], [A, B], [], [("a", False), ("b", False)]),
}


@pytest.mark.parametrize(("first", "nodes", "draining", "want"), CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("call", ["update", "ensure"])
def test_draining_nodes_the_row_holds_stay_marked(
    cloud: LocalCloud,
    call: str,
    first: list[Any],
    nodes: list[Any],
    draining: list[Any],
    want: list[tuple[str, bool]],
) -> None:
    cloud.ensure_load_balancer("k", SERVICE, first)
    if call == "update":
        cloud.update_load_balancer_draining("k", SERVICE, nodes, draining)
    else:
        cloud.ensure_load_balancer_draining("k", SERVICE, nodes, draining)
    assert backends(cloud) == want
    if not any(d for _, d in want):  # written as a plain update writes it
        (row,) = cloud.store.list_load_balancers()
        assert all("draining" not in b for b in row.backends)


def test_the_backend_list_reads_the_mark() -> None:
    text = '[{"node":"a","address":"1"},{"node":"b","address":"2","draining":true}]'
    assert parse_backends(text) == (Backend("a", "1"), Backend("b", "2", draining=True))


SPEC = ListenerSpec(
    key=ListenerKey("192.0.2.10", "UDP", 80),
    load_balancer="lb",
    node_port=30080,
    backends=(Backend("a", "1"), Backend("b", "2", draining=True)),
    source_ranges=(),
    client_ip_affinity=False,
)


def test_a_draining_backend_gets_no_new_connection() -> None:
    listener = Listener(SPEC, lambda lb, node: True)
    for client in ("10.1.1.1", "10.1.1.2", "10.1.1.3"):
        assert [b.node for b in listener.candidates(client)] == ["a"]


@pytest.mark.parametrize(
    ("backend", "kept"),
    [
        pytest.param(Backend("b", "2"), True, id="draining-keeps-its-session"),
        pytest.param(Backend("a", "1"), True, id="serving-keeps-its-session"),
        pytest.param(Backend("c", "3"), False, id="removed-loses-its-session"),
    ],
)
def test_an_established_udp_session_keeps_a_draining_backend(backend: Backend, kept: bool) -> None:
    listener = UdpListener(SPEC, lambda lb, node: True, idle_timeout=5.0)
    assert listener._still_usable(backend) is kept
