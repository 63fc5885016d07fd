"""The local provider passes the conformance kit, its state in a fresh file per test."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from kccm.cloudprovider import Interface, Node, Service, default_load_balancer_name
from kccm.providers.local import LocalCloud
from kccm.providers.local.desired import desired_load_balancer
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing.conformance import CloudProviderConformance, LoadBalancerTamper, make_node


class LocalTamper:
    """Drift in the state file, written with the store directly (as `kccm local` or an
    operator would): the backends dropped and a port moved, or the balancer deleted."""

    def change(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, LocalCloud)
        name = default_load_balancer_name(service)
        cloud.store.update_backends(name, [])
        with cloud.store._write() as conn:
            conn.execute("UPDATE load_balancers SET ports = '[]' WHERE name = ?", (name,))

    def delete(self, cloud: Interface, cluster_name: str, service: Service) -> None:
        assert isinstance(cloud, LocalCloud)
        meta = service["metadata"]
        owner = f"{meta['namespace']}/{meta['name']}"
        cloud.store.delete_load_balancer(
            default_load_balancer_name(service), owner, keep_claim=False
        )

    def is_intact(
        self, cloud: Interface, cluster_name: str, service: Service, nodes: Sequence[Node]
    ) -> bool:
        assert isinstance(cloud, LocalCloud)
        stored = cloud.store.find_load_balancer(default_load_balancer_name(service))
        mode = cloud.config.global_.health_check_mode
        wanted = desired_load_balancer(service, nodes, health_check_mode=mode)
        return stored is not None and stored.same_spec(replace(wanted, vip=stored.vip))


class TestLocalCloud(CloudProviderConformance):
    @pytest.fixture
    def cloud(self, tmp_path: Path) -> Iterator[LocalCloud]:
        store = LocalStore(tmp_path / "state.db")
        store.add_instance(InstanceRecord("known", (("InternalIP", "127.0.10.1"),)))
        yield LocalCloud(store)
        store.close()

    @pytest.fixture
    def known_node(self) -> Node:
        return make_node("known", provider_id="local://known", address="127.0.10.1")

    @pytest.fixture
    def load_balancer_tamper(self) -> LoadBalancerTamper:
        return LocalTamper()
