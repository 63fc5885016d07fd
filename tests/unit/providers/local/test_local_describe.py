"""``LocalCloud.describe_instance`` (issue 27): a Node's instance row as the state file has it.
The balancer side runs against the real data plane: tests/integration/dataplane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kccm.cloudprovider import ForeignProviderID, InstanceView
from kccm.providers.local import LocalCloud
from kccm.providers.local.config import load_local_config
from kccm.providers.local.store import InstanceRecord, LocalStore
from kccm.testing.conformance import make_node


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[LocalCloud]:
    store = LocalStore(tmp_path / "state.db")
    store.add_instance(InstanceRecord("n1", (("InternalIP", "10.0.0.1"),)))
    store.add_instance(InstanceRecord("n2", (("InternalIP", "10.0.0.2"),)))
    store.set_instance_state("n2", running=False)
    yield LocalCloud(store, load_local_config(None))
    store.close()


DETAIL = {"instance_type": "local.standard", "zone": "local-zone-a"}


@pytest.mark.parametrize(
    ("node", "want"),
    [
        pytest.param(
            make_node("n1"),
            InstanceView(
                "local://n1", True, "running", {**DETAIL, "addresses": "InternalIP=10.0.0.1"}
            ),
            id="by-name-running",
        ),
        pytest.param(
            make_node("x", provider_id="local://n2"),
            InstanceView(
                "local://n2", True, "stopped", {**DETAIL, "addresses": "InternalIP=10.0.0.2"}
            ),
            id="by-provider-id-stopped",
        ),
        pytest.param(
            make_node("gone", provider_id="local://gone"),
            InstanceView("local://gone", exists=False),
            id="deleted",
        ),
        pytest.param(make_node("new"), InstanceView("", exists=False), id="never-adopted"),
    ],
)
def test_describe_instance(cloud: LocalCloud, node: dict[str, object], want: InstanceView) -> None:
    assert cloud.describe_instance(node) == want
    assert dict(cloud.cloud_api_calls().snapshot().reads) == {"find_instance": 1}


def test_another_providers_node_is_refused(cloud: LocalCloud) -> None:
    with pytest.raises(ForeignProviderID):
        cloud.describe_instance(make_node("a", provider_id="aws://i-1"))
