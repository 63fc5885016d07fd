"""InstancesV2 from EC2 (upstream ``instances_v2.go`` and the instance parts of ``aws.go``)."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    InstanceMetadata,
    InstanceNotFound,
    Node,
    NodeAddress,
)
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.tags import ClusterTagging, InstanceRef, parse_provider_id, provider_id

__all__ = ["ALIVE_STATES", "EC2Instances", "node_addresses"]

log = logging.getLogger(__name__)

ALIVE_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
"""Instance states a node-name lookup considers (upstream's aliveFilter)."""
SHUTDOWN_STATES = frozenset({"stopping", "stopped"})
GONE_STATES = frozenset({"terminated"})

Instance = Mapping[str, Any]


def _ipv4_addresses(instance: Instance) -> list[NodeAddress]:
    addresses: list[NodeAddress] = []
    interfaces = sorted(
        instance.get("NetworkInterfaces") or (),
        key=lambda eni: (
            eni.get("Attachment") is None,
            (eni.get("Attachment") or {}).get("DeviceIndex", 0),
        ),
    )
    for eni in interfaces:
        if eni.get("Status") != "in-use":
            continue
        for private in eni.get("PrivateIpAddresses") or ():
            if ip := private.get("PrivateIpAddress"):
                addresses.append(NodeAddress("InternalIP", str(ipaddress.ip_address(ip))))
    if not interfaces and (ip := instance.get("PrivateIpAddress")):
        addresses.append(NodeAddress("InternalIP", str(ipaddress.ip_address(ip))))
    if public := instance.get("PublicIpAddress"):
        addresses.append(NodeAddress("ExternalIP", str(ipaddress.ip_address(public))))
    if private_dns := instance.get("PrivateDnsName"):
        addresses.append(NodeAddress("InternalDNS", private_dns))
        addresses.append(NodeAddress("Hostname", private_dns))
    if public_dns := instance.get("PublicDnsName"):
        addresses.append(NodeAddress("ExternalDNS", public_dns))
    return addresses


def _ipv6_addresses(instance: Instance) -> list[NodeAddress]:
    addresses = []
    for eni in instance.get("NetworkInterfaces") or ():
        ipv6 = eni.get("Ipv6Addresses") or ()
        if eni.get("Status") == "in-use" and ipv6:
            first = str(ipv6[0].get("Ipv6Address", ""))
            addresses.append(NodeAddress("InternalIP", str(ipaddress.ip_address(first))))
    return addresses


def node_addresses(instance: Instance, families: Sequence[str] = ("ipv4",)) -> list[NodeAddress]:
    """The addresses upstream reports, in its order: private IPs (primary interface first),
    the public IP, the private DNS name (as InternalDNS and Hostname), the public DNS name;
    with ``ipv6``, the first IPv6 address of each interface."""
    result: list[NodeAddress] = []
    for family in families:
        result += _ipv4_addresses(instance) if family == "ipv4" else _ipv6_addresses(instance)
    return result


def _state(instance: Instance) -> str:
    return str((instance.get("State") or {}).get("Name", ""))


class EC2Instances:
    """Looks nodes up by providerID (instance ID), else by private DNS name (the node name)."""

    def __init__(
        self, api: AWSAPI, tagging: ClusterTagging, region: str, families: Sequence[str]
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._region = region
        self._families = tuple(families)

    # -- lookups -------------------------------------------------------------------------------

    def describe(self, instance_id: str) -> Instance | None:
        """The instance, or ``None`` when EC2 does not know it (any owner)."""
        try:
            found = self._api.call("ec2", "describe_instances", InstanceIds=[instance_id])
        except CloudProviderError as err:
            if getattr(err, "code", "") == "InvalidInstanceID.NotFound":
                return None
            raise
        instances = [i for r in found.get("Reservations", ()) for i in r.get("Instances", ())]
        if len(instances) > 1:
            raise CloudProviderError(f"EC2 returned {len(instances)} instances for {instance_id}")
        return instances[0] if instances else None

    def by_ids(self, instance_ids: Sequence[str]) -> dict[str, Instance]:
        """The cluster's instances among ``instance_ids`` (unknown IDs are left out)."""
        if not instance_ids:
            return {}
        filters = [{"Name": "instance-id", "Values": list(instance_ids)}]
        return {i["InstanceId"]: i for i in self._find(filters)}

    def by_node_name(self, name: str) -> Instance:
        """The live cluster instance whose private DNS name is ``name``; InstanceNotFound if
        there is none."""
        filters = [
            {"Name": "private-dns-name", "Values": [name]},
            {"Name": "instance-state-name", "Values": list(ALIVE_STATES)},
        ]
        found = self._find(filters)
        if not found:
            raise InstanceNotFound(f"no EC2 instance of this cluster has private DNS name {name!r}")
        if len(found) > 1:
            ids = ", ".join(sorted(i["InstanceId"] for i in found))
            raise CloudProviderError(f"several EC2 instances are named {name!r}: {ids}")
        return found[0]

    def _find(self, filters: list[dict[str, Any]]) -> list[Instance]:
        if self._tagging.cluster_id:
            filters = [*filters, {"Name": "tag-key", "Values": [self._tagging.cluster_tag_key]}]
        reservations = self._api.pages("ec2", "describe_instances", "Reservations", Filters=filters)
        return [
            instance
            for reservation in reservations
            for instance in reservation.get("Instances", ())
            if self._tagging.owns(instance.get("Tags"))
        ]

    def _ref(self, node: Node) -> InstanceRef | None:
        pid = str((node.get("spec") or {}).get("providerID", ""))
        if pid:
            return parse_provider_id(pid)
        instance = self.by_node_name(str(node["metadata"]["name"]))
        zone = str((instance.get("Placement") or {}).get("AvailabilityZone", ""))
        return InstanceRef(str(instance["InstanceId"]), zone)

    def _lookup(self, node: Node) -> Instance | None:
        try:
            ref = self._ref(node)
        except ValueError as err:
            raise CloudProviderError(str(err)) from err
        return None if ref is None else self.describe(ref.instance_id)

    # -- InstancesV2 -----------------------------------------------------------------------------

    # A node without providerID whose name matches no instance raises InstanceNotFound from
    # exists/shutdown, as upstream does: only a providerID proves an instance gone.

    def instance_exists(self, node: Node) -> bool:
        instance = self._lookup(node)
        return instance is not None and _state(instance) not in GONE_STATES

    def instance_shutdown(self, node: Node) -> bool:
        instance = self._lookup(node)
        return instance is not None and _state(instance) in SHUTDOWN_STATES

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        instance = self._lookup(node)
        name = node["metadata"]["name"]
        if instance is None or _state(instance) in GONE_STATES:
            raise InstanceNotFound(f"no EC2 instance for node {name!r}")
        if not self._tagging.owns(instance.get("Tags")):
            raise CloudProviderError(
                f"EC2 instance {instance['InstanceId']} of node {name!r} is not tagged "
                f"{self._tagging.cluster_tag_key} (it belongs to another cluster)"
            )
        zone = str((instance.get("Placement") or {}).get("AvailabilityZone", ""))
        given = str((node.get("spec") or {}).get("providerID", ""))
        return InstanceMetadata(
            provider_id=given or provider_id(zone, str(instance["InstanceId"])),
            instance_type=str(instance.get("InstanceType", "")),
            node_addresses=node_addresses(instance, self._families),
            zone=zone,
            region=self._region,
        )
