"""The conformance kit's drain case (optional
:class:`~kccm.cloudprovider.interface.TargetDrainer`, docs/behaviour.md "Draining a Node's
targets"): what a provider implements so ``service.kccm.io/drain-seconds`` and
``--default-drain-seconds`` drain a leaving Node instead of removing it at once.

:class:`~kccm.testing.conformance.CloudProviderConformance` inherits it. The targets are read
through ``describe_load_balancer`` when the provider implements it (a draining target is
described with ``draining=True``, unless the cloud has no state to read it from:
``describes_draining = False``); otherwise only the calls are checked. A provider that drains
only some kinds of balancer overrides the ``drain_service`` fixture (aws: an NLB).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from kccm.cloudprovider import (
    Interface,
    LoadBalancerDescriber,
    Node,
    Service,
    ThreadPoolAdapter,
    as_load_balancer_describer,
    as_target_drainer,
)
from kccm.testing.conformance_objects import make_service
from kccm.testing.conformance_targets import draining_nodes, targeted_nodes

__all__ = ["TargetDrainConformance"]

_CLUSTER = "kccm-conformance"


async def _targets(
    describer: LoadBalancerDescriber | None,
    call: ThreadPoolAdapter,
    svc: Service,
    nodes: Sequence[Node],
) -> tuple[set[str], set[str]] | None:
    """(targeted Nodes, draining Nodes) as described, None without a describer."""
    if describer is None:
        return None
    view = await call.call("describe", describer.describe_load_balancer, _CLUSTER, svc)
    return targeted_nodes(view, nodes), draining_nodes(view, nodes)


class TargetDrainConformance:
    """The optional drain case; mixed into the conformance class."""

    describes_draining: ClassVar[bool] = True
    """Whether ``describe_load_balancer`` can tell a draining target (False where the draining
    state leaves no mark in the cloud: aws keeps the target registered)."""

    @pytest.fixture
    def drain_service(self) -> dict[str, Any]:
        """The Service the drain case ensures (override for a kind of balancer that drains)."""
        return make_service("conf-drain")

    async def test_a_draining_node_stays_a_target_until_it_is_left_out(
        self,
        cloud: Interface,
        lb_nodes: list[Node],
        call: ThreadPoolAdapter,
        drain_service: dict[str, Any],
    ) -> None:
        """Optional (TargetDrainer): a Node passed in ``draining`` that the balancer targets
        stays a target (described as draining), through an update and an ensure; one it
        does not target is never added; the next plain update leaves it out."""
        lb = cloud.load_balancer()
        drainer = as_target_drainer(lb) if lb is not None else None
        if lb is None or drainer is None:
            pytest.skip("the provider has no draining state (optional): Nodes go at once")
        if len(lb_nodes) < 2:
            pytest.skip("needs at least two lb_nodes")
        describer = as_load_balancer_describer(lb)
        svc = drain_service
        leaving, staying = lb_nodes[:1], lb_nodes[1:]
        every = {n["metadata"]["name"] for n in lb_nodes}
        rest = {n["metadata"]["name"] for n in staying}
        gone = leaving[0]["metadata"]["name"]
        try:
            await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, staying)
            await call.call(
                "drain", drainer.update_load_balancer_draining, _CLUSTER, svc, staying, leaving
            )
            seen = await _targets(describer, call, svc, lb_nodes)
            assert seen is None or seen[0] == rest, "a draining Node it did not target was added"
            await call.call("update", lb.update_load_balancer, _CLUSTER, svc, lb_nodes)
            for method in (
                drainer.update_load_balancer_draining,
                drainer.ensure_load_balancer_draining,
            ):
                await call.call("drain", method, _CLUSTER, svc, staying, leaving)
                seen = await _targets(describer, call, svc, lb_nodes)
                want = (every, {gone} if self.describes_draining else set())
                assert seen is None or seen == want, f"{method.__name__}: {seen}"
            await call.call("update", lb.update_load_balancer, _CLUSTER, svc, staying)
            seen = await _targets(describer, call, svc, lb_nodes)
            assert seen is None or seen == (rest, set()), f"still targeted after the drain: {seen}"
        finally:
            await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, svc)
