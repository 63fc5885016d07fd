"""``describe_instance`` (issue 27) against the emulator: the server's Nova status in its own
words, found by providerID or by name; a gone server does not exist."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from os_core_world import World

from kccm.providers.openstack import OpenStackCloud
from kccm.providers.openstack.instances import OpenStackInstances


def _v2(cloud: OpenStackCloud) -> OpenStackInstances:
    instances = cloud.instances_v2()
    assert isinstance(instances, OpenStackInstances)
    return instances


@pytest.mark.parametrize(
    ("status", "by_provider_id", "gone"),
    [
        pytest.param("ACTIVE", True, False, id="active"),
        pytest.param("ACTIVE", False, False, id="by-name"),
        pytest.param("SHUTOFF", True, False, id="shutoff"),
        pytest.param("ACTIVE", True, True, id="deleted"),
    ],
)
def test_describe_instance(
    world: World, cloud: OpenStackCloud, status: str, by_provider_id: bool, gone: bool
) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    server = world.server(name, status=status)
    provider_id = f"openstack:///{server['id']}"
    node: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"providerID": provider_id} if by_provider_id else {},
    }
    if gone:
        world.delete(server["id"])
    before = cloud.api.ledger.snapshot()
    view = _v2(cloud).describe_instance(node)
    assert cloud.api.ledger.snapshot().since(before).total_writes == 0
    if gone:
        assert (view.exists, view.provider_id) == (False, provider_id)
        return
    assert (view.exists, view.state, view.provider_id) == (True, status, provider_id)
    assert view.detail["name"] == name
    assert view.detail["flavor"]
