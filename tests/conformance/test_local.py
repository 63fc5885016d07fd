"""The local provider passes the conformance kit, its state in a fresh file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.cloudprovider import Node
from kccm.providers.local import LocalCloud
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing.conformance import CloudProviderConformance, make_node


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
