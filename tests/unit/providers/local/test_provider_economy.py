"""The local provider's read-compare-write (issue 16): an ensure, update or delete that would
change nothing writes nothing; drift in the state file and a changed cloud config are
repaired by the next ensure; every store operation is in the ledger."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import default_load_balancer_name
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import InstanceRecord, LocalStore

CLUSTER = "kubernetes"
SERVICE: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "ns", "uid": "uid-1"},
    "spec": {
        "type": "LoadBalancer",
        "ports": [{"name": "http", "protocol": "TCP", "port": 80, "nodePort": 30080}],
    },
}
NAME = default_load_balancer_name(SERVICE)


def node(name: str, address: str, provider_id: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"providerID": provider_id} if provider_id else {},
        "status": {"addresses": [{"type": "InternalIP", "address": address}]},
    }


NODES = [node("n1", "127.0.10.1"), node("n2", "127.0.10.2")]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    opened = LocalStore(tmp_path / "state.db")
    yield opened
    opened.close()


def cloud_on(store: LocalStore, mode: str = "kube-proxy") -> LocalCloud:
    text = f"[Global]\nvip-range = 127.0.20.0/29\nhealth-check-mode = {mode}\n"
    return LocalCloud(store, load_local_config(io.StringIO(text)))


def writes(cloud: LocalCloud) -> dict[str, int]:
    return dict(cloud.cloud_api_calls().snapshot().writes)


def _nothing(store: LocalStore) -> None:
    return None


def _backends_dropped(store: LocalStore) -> None:
    store.update_backends(NAME, [])


def _port_changed(store: LocalStore) -> None:
    with store._write() as conn:  # an operator editing the state file by hand
        conn.execute(
            "UPDATE load_balancers SET ports = ? WHERE name = ?",
            ('[{"name":"http","protocol":"TCP","port":8080,"node_port":30080}]', NAME),
        )


def _row_deleted(store: LocalStore) -> None:
    with store._write() as conn:
        conn.execute("DELETE FROM load_balancers WHERE name = ?", (NAME,))


def _claim_released(store: LocalStore) -> None:
    store.delete_load_balancer(NAME, "ns/web", keep_claim=False)


@pytest.mark.parametrize(
    ("tamper", "mode", "expected_writes"),
    [
        pytest.param(_nothing, "kube-proxy", {}, id="unchanged-no-write"),
        pytest.param(_backends_dropped, "kube-proxy", {"put_load_balancer": 1}, id="backends"),
        pytest.param(_port_changed, "kube-proxy", {"put_load_balancer": 1}, id="ports"),
        pytest.param(_row_deleted, "kube-proxy", {"put_load_balancer": 1}, id="row-deleted"),
        pytest.param(_claim_released, "kube-proxy", {"put_load_balancer": 1}, id="claim-gone"),
        pytest.param(_nothing, "tcp", {"put_load_balancer": 1}, id="health-check-mode-changed"),
    ],
)
def test_the_next_ensure_repairs_drift_and_writes_only_then(
    store: LocalStore, tamper: Callable[[LocalStore], None], mode: str, expected_writes: Any
) -> None:
    first = cloud_on(store)
    status = first.ensure_load_balancer(CLUSTER, SERVICE, NODES)
    wanted = store.find_load_balancer(NAME)
    assert wanted is not None
    tamper(store)
    restarted = cloud_on(store, mode)  # a new kccm process, possibly with a changed config
    again = restarted.ensure_load_balancer(CLUSTER, SERVICE, NODES)
    assert writes(restarted) == expected_writes
    assert dict(restarted.cloud_api_calls().snapshot().reads) == {"describe_load_balancer": 1}
    repaired = store.find_load_balancer(NAME)
    assert repaired is not None
    assert repaired.same_spec(replace(wanted, health=repaired.health))
    assert repaired.health["mode"] == mode
    assert again.ingress == status.ingress, "the same VIP"
    restarted.ensure_load_balancer(CLUSTER, SERVICE, NODES)
    assert writes(restarted) == expected_writes, "a further ensure finds nothing to do"


def test_update_writes_only_changed_backends(store: LocalStore) -> None:
    cloud = cloud_on(store)
    cloud.ensure_load_balancer(CLUSTER, SERVICE, NODES)
    cloud.update_load_balancer(CLUSTER, SERVICE, list(reversed(NODES)))
    assert writes(cloud) == {"put_load_balancer": 1}, "same set, other order: no write"
    cloud.update_load_balancer(CLUSTER, SERVICE, NODES[:1])
    assert writes(cloud) == {"put_load_balancer": 1, "update_backends": 1}


def test_delete_writes_only_when_there_is_something_to_delete(store: LocalStore) -> None:
    cloud = cloud_on(store)
    cloud.ensure_load_balancer_deleted(CLUSTER, SERVICE)
    assert writes(cloud) == {}
    cloud.ensure_load_balancer(CLUSTER, SERVICE, NODES)
    cloud.ensure_load_balancer_deleted(CLUSTER, SERVICE)
    cloud.ensure_load_balancer_deleted(CLUSTER, SERVICE)
    assert writes(cloud) == {"put_load_balancer": 1, "delete_load_balancer": 1}
    assert store.find_load_balancer(NAME) is None
    assert store.list_ip_claims() == []


def test_list_instance_metadata_is_one_query_for_every_node(store: LocalStore) -> None:
    store.add_instance(InstanceRecord("n1", (("InternalIP", "127.0.10.1"),)))
    store.add_instance(InstanceRecord("n2", (("InternalIP", "127.0.10.9"),)))
    cloud = cloud_on(store)
    nodes = [
        node("n1", "127.0.10.1", "local://n1"),
        node("n2", "127.0.10.2"),
        node("ghost", "127.0.10.3", "local://ghost"),
    ]
    found = cloud.list_instance_metadata(nodes)
    assert sorted(found) == ["n1", "n2"], "unknown nodes are left out"
    assert [a.address for a in found["n2"].node_addresses] == ["127.0.10.9"]
    assert found["n1"].provider_id == "local://n1"
    calls = cloud.cloud_api_calls().snapshot()
    assert (dict(calls.reads), dict(calls.writes)) == ({"list_instances": 1}, {})
