"""What the load-balancer tests share: the provider's LoadBalancer, a World's Nodes, and the
mutating calls between two ledger counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.aws import World, node_for
from kccm.providers.aws import AWSCloud


def lb_of(cloud: AWSCloud) -> Any:
    """The provider's LoadBalancer capability (aws always has one)."""
    lb = cloud.load_balancer()
    assert lb is not None
    return lb


def nodes(world: World, count: int | None = None) -> list[dict[str, Any]]:
    """Nodes for the World's instances (the first ``count`` of them)."""
    return [node_for(world, i) for i in list(world.instances)[:count]]


def writes(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The mutating calls made between two ``api.counts()`` (every non-describe call)."""
    return {
        k: n - before.get(k, 0)
        for k, n in after.items()
        if n != before.get(k, 0) and ":describe_" not in k
    }
