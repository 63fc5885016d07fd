"""The aws provider's address retention (kccm's
:class:`~kccm.cloudprovider.interface.AddressRetainer`, docs/behaviour.md "Keeping a
balancer's address"): an NLB's Elastic IP allocations.

Upstream never releases the allocations a Service names in
``service.beta.kubernetes.io/aws-load-balancer-eip-allocations`` (they are the user's); keeping
them tags them with their owner :data:`OWNER` (``namespace/name``), the cluster
:data:`CLUSTER` and :data:`RETAINED` (kept, unused), so ``kccm addresses`` lists and releases
them. A Service of that namespace/name carrying ``service.kccm.io/retain-address: "true"``
gets its kept ones back (into its ``CreateLoadBalancer``'s subnet mappings) when it names no
allocation, and :data:`RETAINED` goes (owner and cluster stay: its next keeping delete finds
them though its annotation names none). That lookup is one ``DescribeAddresses``, made only
for Services carrying kccm's annotation: the default path makes no extra call. Classic ELBs and
NLBs without Elastic IPs have no address to keep: AWS assigns theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import RetainedAddress, Service
from kccm.cloudprovider.retention import retention_of
from kccm.providers.aws.annotations import LoadBalancerSpec, ProbeMode, load_balancer_spec
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.tags import tag_dict

__all__ = ["CLUSTER", "OWNER", "RETAINED", "ElasticIPRetention"]

OWNER = "kccm.io/owner"
CLUSTER = "kccm.io/cluster"
RETAINED = "kccm.io/retained"


def _key(service: Service) -> str:
    meta = service.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _retained(address: Mapping[str, Any]) -> RetainedAddress:
    tags = tag_dict(address.get("Tags"))
    return RetainedAddress(
        address=str(address.get("PublicIp", "")),
        owner=tags.get(OWNER, ""),
        id=str(address.get("AllocationId", "")),
        detail=f"EIP tags {OWNER}, {CLUSTER}, {RETAINED}",
    )


class ElasticIPRetention:
    """AddressRetainer over an NLB's Elastic IP allocations (mixed into the LoadBalancer)."""

    _api: AWSAPI
    _probe: ProbeMode

    def ensure_load_balancer_deleted(self, cluster_name: str, service: Service) -> None:
        raise NotImplementedError  # the LoadBalancer's own delete

    def _nlb_allocations(self, service: Service) -> tuple[str, ...]:
        raise NotImplementedError  # the Service's allocations when it is an NLB, else ()

    def _is_nlb(self, service: Service) -> bool:
        raise NotImplementedError  # whether the Service's balancer is an NLB of this provider

    def ensure_load_balancer_deleted_keeping_address(
        self, cluster_name: str, service: Service
    ) -> Sequence[RetainedAddress]:
        """Mark the allocations first (a failed delete is retried with them marked), then
        upstream's delete, which leaves them allocated."""
        ids = list(self._nlb_allocations(service))
        if not ids and self._is_nlb(service):
            ids = [str(a["AllocationId"]) for a in self._owned(cluster_name, _key(service))]
        if ids:
            tags = [
                {"Key": OWNER, "Value": _key(service)},
                {"Key": CLUSTER, "Value": cluster_name},
                {"Key": RETAINED, "Value": "true"},
            ]
            self._api.call("ec2", "create_tags", Resources=ids, Tags=tags)
        self.ensure_load_balancer_deleted(cluster_name, service)
        if not ids:
            return []
        found = self._api.call("ec2", "describe_addresses", AllocationIds=ids)
        return [_retained(a) for a in found.get("Addresses") or ()]

    def _owned(
        self, cluster_name: str, owner: str = "", *, retained: bool = False
    ) -> list[Mapping[str, Any]]:
        filters = [{"Name": f"tag:{CLUSTER}", "Values": [cluster_name]}]
        if owner:
            filters.append({"Name": f"tag:{OWNER}", "Values": [owner]})
        if retained:
            filters.append({"Name": f"tag:{RETAINED}", "Values": ["true"]})
        found = self._api.call("ec2", "describe_addresses", Filters=filters)
        return [a for a in found.get("Addresses") or () if not a.get("AssociationId")]

    def _kept(self, cluster_name: str, owner: str = "") -> list[Mapping[str, Any]]:
        return self._owned(cluster_name, owner, retained=True)

    def list_retained_addresses(self, cluster_name: str) -> Sequence[RetainedAddress]:
        return [_retained(a) for a in self._kept(cluster_name)]

    def release_retained_address(self, cluster_name: str, address: str) -> bool:
        for kept in self._kept(cluster_name):
            if address in (kept.get("AllocationId"), kept.get("PublicIp")):
                self._api.call("ec2", "release_address", AllocationId=kept["AllocationId"])
                return True
        return False

    def _with_kept(
        self, cluster_name: str, service: Service, spec: LoadBalancerSpec
    ) -> tuple[LoadBalancerSpec, list[str]]:
        """For a Service asking for retention (its annotation): the spec with the owner's kept
        allocations when it names none, and the kept ones it now uses (to unmark after the
        ensure). Any other Service: the spec as it is, and no AWS call."""
        if not retention_of(service, False).keep:
            return spec, []
        kept = self._kept(cluster_name, _key(service))
        ids = sorted(str(a["AllocationId"]) for a in kept)
        if ids and not spec.options.eip_allocations:
            options = dataclasses.replace(spec.options, eip_allocations=tuple(ids))
            spec = dataclasses.replace(spec, options=options)
        return spec, [i for i in ids if i in spec.options.eip_allocations]

    def _unmark(self, ids: Sequence[str]) -> None:
        if ids:
            tags = [{"Key": RETAINED}]
            self._api.call("ec2", "delete_tags", Resources=list(ids), Tags=tags)


def nlb_allocations(service: Service, probe: ProbeMode) -> tuple[str, ...]:
    """The allocations an NLB Service names (parsed as its ensure does)."""
    return load_balancer_spec(service, probe).options.eip_allocations
