"""The conformance kit's shared-balancer case (optional
:class:`~kccm.cloudprovider.sharing.BalancerSharer`, docs/behaviour.md "Sharing one
balancer"): what a provider implements so ``service.kccm.io/share-group`` works on its cloud.

:class:`~kccm.testing.conformance.CloudProviderConformance` inherits it. Two Services of one
group (different ports) must get the same address; deleting one must leave the other's
listeners and the address in place; deleting the last must leave nothing; every call is
idempotent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kccm.cloudprovider import (
    BalancerSharer,
    Interface,
    LoadBalancerStatus,
    Node,
    ShareGroup,
    ThreadPoolAdapter,
    as_balancer_sharer,
)
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP
from kccm.testing.conformance_objects import make_service

__all__ = ["BalancerSharingConformance"]

_CLUSTER = "kccm-conformance"


def _addresses(status: LoadBalancerStatus | None) -> set[str]:
    if status is None:
        return set()
    return {i.ip or i.hostname for i in status.ingress if i.ip or i.hostname}


def _member(
    name: str, port: int, group: ShareGroup, annotations: Mapping[str, str]
) -> dict[str, Any]:
    service = make_service(name, namespace=group.namespace, ports=(port,))
    service["metadata"]["annotations"] = {**annotations, ANNOTATION_SHARE_GROUP: group.name}
    return service


class BalancerSharingConformance:
    """The optional sharing case; mixed into the conformance class."""

    sharing_annotations: Mapping[str, str] = {}
    """What else the group's Services carry: a provider that shares only some kinds of
    balancer names the kind here (aws: ``aws-load-balancer-type: nlb``)."""

    async def test_a_share_group_has_one_address_and_each_service_only_its_listeners(
        self, cloud: Interface, lb_nodes: list[Node], call: ThreadPoolAdapter
    ) -> None:
        """Optional (BalancerSharer): ``ensure_shared_load_balancer`` of two Services of one
        group (ports 80 and 443) gives both the same address; ``get_shared_load_balancer``
        finds each; after ``ensure_shared_load_balancer_deleted`` of the first, the second is
        still found with the same address and can be updated; after the second's, neither is
        found; a repeated delete is a no-op."""
        lb = cloud.load_balancer()
        sharer = as_balancer_sharer(lb) if lb is not None else None
        if sharer is None:
            pytest.skip("the provider does not implement shared balancers (optional)")
        group = ShareGroup("default", f"conf-{uuid.uuid4().hex[:8]}")
        extra = self.sharing_annotations
        first = _member("conf-share-a", 80, group, extra)
        second = _member("conf-share-b", 443, group, extra)
        try:
            one = await self._ensure(sharer, call, group, first, lb_nodes)
            two = await self._ensure(sharer, call, group, second, lb_nodes)
            assert _addresses(one), f"no address for the group's first Service: {one}"
            assert _addresses(two) == _addresses(one), "the group's Services differ in address"
            assert (await self._get(sharer, call, group, first))[1]
            await self._delete(sharer, call, group, first)
            assert not (await self._get(sharer, call, group, first))[1]
            status, found = await self._get(sharer, call, group, second)
            assert found, "deleting one Service of the group removed another's listeners"
            assert _addresses(status) == _addresses(one), "the group's address changed"
            update = sharer.update_shared_load_balancer
            await call.call("update", update, _CLUSTER, group, second, lb_nodes[:1])
            await self._delete(sharer, call, group, second)
            assert not (await self._get(sharer, call, group, second))[1]
            await self._delete(sharer, call, group, second)  # idempotent
        finally:
            for member in (first, second):
                await self._delete(sharer, call, group, member)

    @staticmethod
    async def _ensure(
        sharer: BalancerSharer,
        call: ThreadPoolAdapter,
        group: ShareGroup,
        service: dict[str, Any],
        nodes: list[Node],
    ) -> LoadBalancerStatus:
        method = sharer.ensure_shared_load_balancer
        result: LoadBalancerStatus = await call.call(
            "ensure", method, _CLUSTER, group, service, nodes
        )
        return result

    @staticmethod
    async def _get(
        sharer: BalancerSharer, call: ThreadPoolAdapter, group: ShareGroup, service: dict[str, Any]
    ) -> tuple[LoadBalancerStatus | None, bool]:
        method = sharer.get_shared_load_balancer
        result: tuple[LoadBalancerStatus | None, bool] = await call.call(
            "get", method, _CLUSTER, group, service
        )
        return result

    @staticmethod
    async def _delete(
        sharer: BalancerSharer, call: ThreadPoolAdapter, group: ShareGroup, service: dict[str, Any]
    ) -> None:
        method = sharer.ensure_shared_load_balancer_deleted
        await call.call("delete", method, _CLUSTER, group, service)
