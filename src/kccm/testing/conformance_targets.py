"""Which Nodes a described balancer targets (and drains), for the conformance kit's
target-node and drain cases."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kccm.cloudprovider import BalancerView, Node, TargetView

__all__ = ["draining_nodes", "targeted_nodes"]


def _is_target(target: TargetView, node: Node) -> bool:
    """Whether a described target is ``node``: its name, one of its addresses, or the
    instance its providerID names."""
    if target.node:
        return bool(target.node == node["metadata"]["name"])
    addresses = {a.get("address") for a in (node.get("status") or {}).get("addresses") or ()}
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    if target.address and target.address in addresses:
        return True
    return bool(target.instance) and provider_id.endswith(str(target.instance))


def targeted_nodes(view: BalancerView | None, nodes: Sequence[Node]) -> set[str]:
    """The names of the ``nodes`` the view's listeners target. Skips the test when the view
    has targets none of which names a Node, an address or a providerID's instance (a cloud
    whose members are interfaces, say): the kit cannot tell them apart then."""
    assert view is not None, "no view of an ensured balancer"
    targets = [t for listener in view.listeners for t in listener.targets]
    found = {n["metadata"]["name"] for t in targets for n in nodes if _is_target(t, n)}
    if targets and not found:
        pytest.skip("the described targets name no Node, address or providerID instance")
    return found


def draining_nodes(view: BalancerView | None, nodes: Sequence[Node]) -> set[str]:
    """The names of the ``nodes`` the view's listeners target in the draining state."""
    assert view is not None, "no view of an ensured balancer"
    targets = [t for listener in view.listeners for t in listener.targets if t.draining]
    return {n["metadata"]["name"] for t in targets for n in nodes if _is_target(t, n)}
