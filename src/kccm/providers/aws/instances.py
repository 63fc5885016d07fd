"""InstancesV2 from EC2 (upstream ``instances_v2.go`` and the instance parts of ``aws.go``).

Besides upstream's methods, ``list_instance_metadata`` answers the node controller's periodic
address refresh for many Nodes at once: one ``DescribeInstances`` per 1,000 instance IDs
(EC2 pages the answer), so refreshing 1,000 Nodes costs one or two calls instead of 1,000.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    InstanceMetadata,
    InstanceNotFound,
    InstanceView,
    Node,
    NodeAddress,
    NodeName,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.aws.api import AWSAPI
from kccm.providers.aws.tags import ClusterTagging, parse_provider_id, provider_id
from kccm.providers.aws.topology import InstanceTopologies

__all__ = ["ALIVE_STATES", "LABEL_ZONE_ID", "EC2Instances", "ZoneIDs", "node_addresses"]

log = logging.getLogger(__name__)

ALIVE_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
"""Instance states a node-name lookup considers (upstream's aliveFilter)."""
SHUTDOWN_STATES = frozenset({"stopping", "stopped"})
GONE_STATES = frozenset({"terminated"})
LABEL_ZONE_ID = "topology.k8s.aws/zone-id"
"""Upstream ``LabelZoneID`` (``well_known_labels.go``): the zone's ID (``euw1-az1``), the same
in every account, unlike its name."""
IDS_PER_FILTER = 200
"""At most this many nodes are looked up by an ``instance-id`` filter (EC2's limit on filter
values); more are found by listing the cluster's instances, 1,000 a page."""
PAGE_SIZE = 1000

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


class ZoneIDs:
    """Zone name -> zone ID, from one ``DescribeAvailabilityZones`` (upstream ``zoneCache``:
    zones never change, so it is read again only for a zone it does not know)."""

    def __init__(self, api: AWSAPI) -> None:
        self._api = api
        self._ids: dict[str, str] = {}
        self._lock = threading.Lock()

    def of(self, zone: str) -> str:
        with self._lock:
            if zone in self._ids or not zone:
                return self._ids.get(zone, "")
            found = self._api.call("ec2", "describe_availability_zones")
            self._ids = {
                str(z["ZoneName"]): str(z["ZoneId"])
                for z in found.get("AvailabilityZones", ())
                if z.get("ZoneName") and z.get("ZoneId")
            }
            if zone not in self._ids:
                raise CloudProviderError(f"could not get the zone ID of zone {zone!r}")
            return self._ids[zone]


class EC2Instances:
    """Looks nodes up by providerID (instance ID), else by private DNS name (the node name)."""

    def __init__(
        self,
        api: AWSAPI,
        tagging: ClusterTagging,
        region: str,
        families: Sequence[str],
        topologies: InstanceTopologies | None = None,
    ) -> None:
        self._api = api
        self._tagging = tagging
        self._region = region
        self._families = tuple(families)
        self.zone_ids = ZoneIDs(api)
        self.topologies = topologies if topologies is not None else InstanceTopologies(api)

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

    def _find(self, filters: list[dict[str, Any]], **params: Any) -> list[Instance]:
        if self._tagging.cluster_id:
            filters = [*filters, {"Name": "tag-key", "Values": [self._tagging.cluster_tag_key]}]
        reservations = self._api.pages(
            "ec2", "describe_instances", "Reservations", Filters=filters, **params
        )
        return [
            instance
            for reservation in reservations
            for instance in reservation.get("Instances", ())
            if self._tagging.owns(instance.get("Tags"))
        ]

    def _lookup(self, node: Node) -> Instance | None:
        """The node's instance: by providerID, else by name (one DescribeInstances either way;
        upstream describes the instance found by name a second time)."""
        pid = node_provider_id(node)
        if not pid:
            return self.by_node_name(node_name(node))
        try:
            ref = parse_provider_id(pid)
        except ValueError as err:
            raise CloudProviderError(str(err)) from err
        if ref is None:  # upstream MapToAWSInstanceID's error: never read as "gone" (issue 25)
            raise CloudProviderError(f"providerID {pid!r}: Invalid format for AWS instance")
        return self.describe(ref.instance_id)

    # -- InstancesV2 -----------------------------------------------------------------------------

    # A node without providerID whose name matches no instance of the cluster does not exist
    # (upstream v1.37 maps InstanceNotFound to "does not exist"): the lifecycle controller
    # deletes such a Node instead of failing on it forever.

    def instance_exists(self, node: Node) -> bool:
        try:
            instance = self._lookup(node)
        except InstanceNotFound:
            return False
        return instance is not None and _state(instance) not in GONE_STATES

    def instance_shutdown(self, node: Node) -> bool:
        try:
            instance = self._lookup(node)
        except InstanceNotFound:
            return False
        return instance is not None and _state(instance) in SHUTDOWN_STATES

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        instance = self._lookup(node)
        name = node_name(node)
        if instance is None or _state(instance) in GONE_STATES:
            raise InstanceNotFound(f"no EC2 instance for node {name!r}")
        if not self._tagging.owns(instance.get("Tags")):
            raise CloudProviderError(
                f"EC2 instance {instance['InstanceId']} of node {name!r} is not tagged "
                f"{self._tagging.cluster_tag_key} (it belongs to another cluster)"
            )
        return self._metadata(node, instance, with_labels=True)

    def describe_instance(self, node: Node) -> InstanceView:
        """kccm's optional describe (``kccm explain node``): the node's instance as EC2 reports
        it now (one ``DescribeInstances``); a terminated or unknown one does not exist."""
        given = node_provider_id(node)
        try:
            instance = self._lookup(node)
        except InstanceNotFound:
            instance = None
        if instance is None:
            return InstanceView(provider_id=given, exists=False)
        zone = str((instance.get("Placement") or {}).get("AvailabilityZone", ""))
        reason = (instance.get("StateReason") or {}).get("Message") or ""
        detail = {
            "instance_type": str(instance.get("InstanceType", "")),
            "zone": zone,
            "private_dns_name": str(instance.get("PrivateDnsName", "")),
            "cluster_tagged": str(self._tagging.owns(instance.get("Tags"))).lower(),
        }
        if reason:
            detail["state_reason"] = str(reason)
        return InstanceView(
            provider_id=given or provider_id(zone, str(instance["InstanceId"])),
            exists=_state(instance) not in GONE_STATES,
            state=_state(instance),
            detail=detail,
        )

    def _metadata(self, node: Node, instance: Instance, *, with_labels: bool) -> InstanceMetadata:
        """Upstream ``InstanceMetadata``; ``additional_labels`` only when asked, as the node
        controller applies them at initialisation only (its periodic refresh uses the
        addresses alone, so the listing path asks EC2 for nothing more)."""
        zone = str((instance.get("Placement") or {}).get("AvailabilityZone", ""))
        given = node_provider_id(node)
        instance_type = str(instance.get("InstanceType", ""))
        return InstanceMetadata(
            provider_id=given or provider_id(zone, str(instance["InstanceId"])),
            instance_type=instance_type,
            node_addresses=node_addresses(instance, self._families),
            zone=zone,
            region=self._region,
            additional_labels=self._labels(node, instance, zone) if with_labels else {},
        )

    def _labels(self, node: Node, instance: Instance, zone: str) -> dict[str, str]:
        """Upstream ``getAdditionalLabels``: the zone ID, then the network topology labels,
        each skipped when the Node has its label (``network-node-layer-1`` for the latter)."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        extra = {}
        if LABEL_ZONE_ID not in labels and zone:
            extra[LABEL_ZONE_ID] = self.zone_ids.of(zone)
        instance_type = str(instance.get("InstanceType", ""))
        topology = self.topologies.labels(
            str(instance["InstanceId"]), instance_type, self._region, labels
        )
        return {**extra, **topology}

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """Metadata of the nodes with an EC2 providerID, by node name: one paged
        ``DescribeInstances`` per 1,000 IDs; instances EC2 does not know, terminated ones and
        other clusters' are left out (the lifecycle controller decides about those)."""
        wanted: dict[str, list[Node]] = {}
        for node in nodes:
            try:
                ref = parse_provider_id(node_provider_id(node))
            except ValueError:
                continue
            if ref is not None:
                wanted.setdefault(ref.instance_id, []).append(node)
        if not wanted:
            return {}
        if len(wanted) <= IDS_PER_FILTER:
            instances = list(self.by_ids(sorted(wanted)).values())
        else:
            instances = self._find([], MaxResults=PAGE_SIZE)
        found: dict[NodeName, InstanceMetadata] = {}
        for instance in instances:
            if _state(instance) in GONE_STATES:
                continue
            for node in wanted.get(str(instance["InstanceId"]), ()):
                name = node_name(node)
                found[name] = self._metadata(node, instance, with_labels=False)
        return found
