"""The conformance kit's address-retention case (optional
:class:`~kccm.cloudprovider.interface.AddressRetainer`, docs/behaviour.md "Keeping a
balancer's address"): what a provider implements so ``service.kccm.io/retain-address`` and
``--default-retain-address`` work on its cloud.

:class:`~kccm.testing.conformance.CloudProviderConformance` inherits it. A provider whose
balancers get an address only when the Service names one (aws: Elastic IP allocations)
overrides the ``retention_service`` fixture to return such a Service.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kccm.cloudprovider import (
    AddressRetainer,
    Interface,
    LoadBalancerStatus,
    Node,
    RetainedAddress,
    ThreadPoolAdapter,
    as_address_retainer,
)
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS
from kccm.testing.conformance_objects import make_service

__all__ = ["AddressRetentionConformance"]

_CLUSTER = "kccm-conformance"


def _ips(status: LoadBalancerStatus) -> set[str]:
    return {ingress.ip for ingress in status.ingress if ingress.ip}


def _owned(kept: list[RetainedAddress], owner: str) -> set[str]:
    return {a.address for a in kept if a.owner == owner}


class AddressRetentionConformance:
    """The optional retention case; mixed into the conformance class."""

    @pytest.fixture
    def retention_service(self) -> dict[str, Any]:
        """A Service whose balancer has an address to keep, carrying kccm's annotation as a
        Service asking for retention does (override where the cloud gives an address only
        when asked, e.g. aws's ``eip-allocations``)."""
        service = make_service("conf-retain")
        service["metadata"]["annotations"] = {ANNOTATION_RETAIN_ADDRESS: "true"}
        return service

    async def test_a_kept_address_comes_back_to_its_service_and_is_released_on_demand(
        self,
        cloud: Interface,
        lb_nodes: list[Node],
        call: ThreadPoolAdapter,
        retention_service: dict[str, Any],
    ) -> None:
        """Optional (AddressRetainer): ``ensure_load_balancer_deleted_keeping_address``
        deletes the balancer and returns the address(es) it kept, owned by the Service's
        namespace/name; ``list_retained_addresses`` lists them; an ensure of a Service with
        the same namespace/name (a new UID: re-created) takes them back (no longer listed,
        the same IP in its status when the status shows IPs); kept again, each is released
        by ``release_retained_address`` (True once, then False) and nothing stays listed."""
        lb = cloud.load_balancer()
        retainer = as_address_retainer(lb) if lb is not None else None
        if lb is None or retainer is None:
            pytest.skip("the provider does not implement address retention (optional)")
        svc = retention_service
        meta = svc["metadata"]
        owner = f"{meta['namespace']}/{meta['name']}"
        again = {**svc, "metadata": {**meta, "uid": str(uuid.uuid4())}}
        try:
            first = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, svc, lb_nodes)
            kept = await self._keep(retainer, call, svc)
            assert kept, "the balancer had an address, yet nothing was kept"
            assert {a.owner for a in kept} == {owner}, kept
            _, exists = await call.call("get", lb.get_load_balancer, _CLUSTER, svc)
            assert not exists, "the balancer is still there after the keeping delete"
            listed = await self._listed(retainer, call)
            assert {a.address for a in kept} <= _owned(listed, owner)
            second = await call.call("ensure", lb.ensure_load_balancer, _CLUSTER, again, lb_nodes)
            assert _owned(await self._listed(retainer, call), owner) == set(), (
                "a re-created Service did not take its kept address back"
            )
            assert _ips(first) & {a.address for a in kept} <= _ips(second)
            for address in await self._keep(retainer, call, again):
                name = address.id or address.address
                assert await call.call("release", retainer.release_retained_address, _CLUSTER, name)
                assert not await call.call(
                    "release", retainer.release_retained_address, _CLUSTER, name
                )
            assert _owned(await self._listed(retainer, call), owner) == set()
        finally:
            await call.call("delete", lb.ensure_load_balancer_deleted, _CLUSTER, again)
            for left in _owned(await self._listed(retainer, call), owner):
                await call.call("release", retainer.release_retained_address, _CLUSTER, left)

    @staticmethod
    async def _keep(
        retainer: AddressRetainer, call: ThreadPoolAdapter, svc: dict[str, Any]
    ) -> list[RetainedAddress]:
        method = retainer.ensure_load_balancer_deleted_keeping_address
        return list(await call.call("keep", method, _CLUSTER, svc))

    @staticmethod
    async def _listed(retainer: AddressRetainer, call: ThreadPoolAdapter) -> list[RetainedAddress]:
        return list(await call.call("list", retainer.list_retained_addresses, _CLUSTER))
