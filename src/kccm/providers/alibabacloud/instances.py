"""InstancesV2 on ECS, as upstream's node controller decides (kubernetes/cloud-provider-alibaba-
cloud v2.14.0, ``pkg/controller/node`` and ``pkg/provider/alibaba/ecs/ecs.go``).

- providerID ``<region>.<instance-id>``; ``alicloud://<region>.<instance-id>`` is read too
  (``NodeFromProviderID``, ``pkg/provider/alibaba/util/helper.go``); another cloud's
  ``<scheme>://`` raises :class:`~kccm.cloudprovider.ForeignProviderID`.
- A Node with a providerID: ``DescribeInstances`` in the providerID's region with
  ``InstanceIds=["i-..."]`` (``ListInstances``). Without one: its single InternalIP,
  ``DescribeInstances`` with ``PrivateIpAddresses``, the VPC and the cluster tag key
  (``GetInstancesByIP``); exactly one instance must answer.
- Metadata (``setFields``, ``findAddress``): providerID ``<RegionId>.<InstanceId>``, the
  instance type, zone ``ZoneId`` and region ``RegionId``; addresses: every public IP and the EIP
  as ExternalIP, then the inner and VPC private IPs as InternalIP (and, with the
  ``IPv6DualStack`` gate, the primary ENI's IPv6 addresses); labels
  ``node.alibabacloud.com/instance-charge-type``, ``node.alibabacloud.com/spot-strategy`` and
  ``node.alibabacloud.com/nodepool-id`` (from the ECS tag ``ack.alibabacloud.com/nodepool-id``).
- Exists: the instance answers (whatever its ``Status``); a Node without a providerID that no
  instance matches is taken to exist (upstream never deletes such a Node). Shut down: never —
  upstream v2.14.0 has no shutdown taint; ``describe_instance`` shows ECS's ``Status``.
- A Node still carrying the uninitialized taint gets its instance's primary ENI's
  source/destination check turned off before its metadata is returned (pod traffic routed to
  the instance must pass it): ``DescribeNetworkInterfaces`` by ID, then
  ``ModifyNetworkInterfaceAttribute`` with ``SourceDestCheck=false`` only when it is on
  (``disableNetworkInterfaceSourceDestCheck``, ``node_controller.go``); a failure fails the
  initialisation, which is retried (upstream keeps the taint).
- Nodes initialised at once are read as upstream's node controller reads them, in batches of up
  to 100 (``DescribeInstances`` with their ids, ``DescribeNetworkInterfaces`` with
  ``NetworkInterfaceId.N``, ``DescribeNetworkInterfacesByIDs``): the framework's workers ask
  one Node each, and :class:`~kccm.providers.alibabacloud.batching.Coalescer` sends the ids
  asked for while a call is in flight together in the next one (no wait is added).
- :meth:`EcsInstances.list_instance_metadata`: one ``DescribeInstances`` per 100 providerIDs of
  a region (upstream's ``MAX_BATCH_NUM`` batches), Nodes labelled
  ``service.alibabacloud.com/exclude-node`` or ``service.beta.kubernetes.io/exclude-node`` and
  ``ack-hybrid://`` Nodes left out (``NodeList``, ``IsExcludedNode``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.api.wellknown import TAINT_UNINITIALIZED
from kccm.cloudprovider import (
    CloudProviderError,
    ForeignProviderID,
    InstanceMetadata,
    InstanceNotFound,
    InstanceView,
    Node,
    NodeAddress,
    NodeAddressType,
    NodeName,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.alibabacloud.batching import Coalescer
from kccm.providers.alibabacloud.config import AlibabaConfig
from kccm.providers.alibabacloud.rpc import RPCClient

__all__ = [
    "EXCLUDE_LABELS",
    "PROVIDER_NAME",
    "EcsInstances",
    "Instance",
    "addresses_of",
    "parse_provider_id",
    "provider_id_of",
]

log = logging.getLogger(__name__)

PROVIDER_NAME = "alibabacloud"
PREFIX = "alicloud://"
HYBRID_PREFIX = "ack-hybrid://"
EXCLUDE_LABELS = (
    "service.beta.kubernetes.io/exclude-node",
    "service.alibabacloud.com/exclude-node",
)
BATCH = 100
"""``MAX_BATCH_NUM`` and ``MaxResult``: instance IDs per ``DescribeInstances``."""
NODEPOOL_TAG = "ack.alibabacloud.com/nodepool-id"
LABEL_NODEPOOL = "node.alibabacloud.com/nodepool-id"
LABEL_CHARGE_TYPE = "node.alibabacloud.com/instance-charge-type"
LABEL_SPOT = "node.alibabacloud.com/spot-strategy"


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """``(region, instance)`` of a providerID; raises as ``NodeFromProviderID`` does, and
    :class:`ForeignProviderID` for another cloud's scheme."""
    text = provider_id
    if text.startswith(PREFIX):
        text = text[len(PREFIX) :]
    elif "://" in text:
        raise ForeignProviderID(f"providerID {provider_id!r} is not an Alibaba Cloud one")
    parts = text.split(".")
    if len(parts) < 2:
        raise CloudProviderError(
            "alicloud: unable to split instanceid and region from providerID, "
            f"error unexpected providerID={provider_id}"
        )
    return parts[0], parts[1]


def provider_id_of(region: str, instance: str) -> str:
    """``ProviderIDFromInstance``."""
    return f"{region}.{instance}"


def _items(value: Any, *path: str) -> list[Any]:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return list(value) if isinstance(value, list) else []


def _primary_nic(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    for nic in _items(raw, "NetworkInterfaces", "NetworkInterface"):
        if isinstance(nic, Mapping) and nic.get("Type") == "Primary":
            return nic
    return {}


def addresses_of(raw: Mapping[str, Any], *, ipv6: bool = False) -> list[NodeAddress]:
    """``findAddress``."""
    external, internal = NodeAddressType.EXTERNAL_IP, NodeAddressType.INTERNAL_IP
    found = [NodeAddress(external, str(a)) for a in _items(raw, "PublicIpAddress", "IpAddress")]
    eip = str((raw.get("EipAddress") or {}).get("IpAddress") or "")
    if eip:
        found.append(NodeAddress(external, eip))
    found += [NodeAddress(internal, str(a)) for a in _items(raw, "InnerIpAddress", "IpAddress")]
    vpc = _items(raw, "VpcAttributes", "PrivateIpAddress", "IpAddress")
    found += [NodeAddress(internal, str(a)) for a in vpc]
    if ipv6:
        for item in _items(_primary_nic(raw), "Ipv6Sets", "Ipv6Set"):
            found.append(NodeAddress(internal, str(item.get("Ipv6Address", ""))))
    return found


@dataclass(frozen=True)
class Instance:
    """One ECS instance as ``DescribeInstances`` answers it."""

    raw: Mapping[str, Any]

    @property
    def id(self) -> str:
        return str(self.raw.get("InstanceId", ""))

    @property
    def region(self) -> str:
        return str(self.raw.get("RegionId", ""))

    @property
    def status(self) -> str:
        return str(self.raw.get("Status", ""))

    @property
    def tags(self) -> dict[str, str]:
        return {
            str(t.get("TagKey", "")): str(t.get("TagValue", ""))
            for t in _items(self.raw, "Tags", "Tag")
        }

    def labels(self) -> dict[str, str]:
        """``setFields``' labels beyond the well-known ones."""
        labels = {}
        for label, key in ((LABEL_CHARGE_TYPE, "InstanceChargeType"), (LABEL_SPOT, "SpotStrategy")):
            if self.raw.get(key):
                labels[label] = str(self.raw[key])
        if NODEPOOL_TAG in self.tags:
            labels[LABEL_NODEPOOL] = self.tags[NODEPOOL_TAG]
        return labels


def _labels(node: Node) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def is_excluded(node: Node) -> bool:
    """``IsExcludedNode``."""
    labels = _labels(node)
    return any(k in labels for k in EXCLUDE_LABELS) or node_provider_id(node).startswith(
        HYBRID_PREFIX
    )


def _uninitialized(node: Node) -> bool:
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(t.get("key") == TAINT_UNINITIALIZED for t in taints)


def _internal_ips(node: Node) -> list[str]:
    addresses = (node.get("status") or {}).get("addresses") or ()
    return [str(a.get("address", "")) for a in addresses if a.get("type") == "InternalIP"]


class EcsInstances:
    """InstancesV2, ``list_instance_metadata`` and ``describe_instance`` on ECS."""

    def __init__(self, rpc: RPCClient, config: AlibabaConfig, vpc_id: str) -> None:
        self.rpc = rpc
        self.config = config
        self.vpc_id = vpc_id
        # Nodes initialised at once are read in batches, as upstream's node controller does.
        self._instances = Coalescer(self._instances_by_id, BATCH)
        self._enis = Coalescer(self._enis_by_id, BATCH)

    # -- reading ECS --------------------------------------------------------------------------

    def describe(self, region: str, ids: Sequence[str]) -> list[Instance]:
        """``getInstances``: the instances of ``ids`` (at most 100) in ``region``."""
        params = {
            "RegionId": region,
            "InstanceIds": json.dumps(list(ids)),
            "MaxResults": str(BATCH),
            "AdditionalAttributes.1": "NETWORK_PRIMARY_ENI_IP",
        }
        found = []
        for page in self.rpc.token_pages("ecs", "DescribeInstances", params):
            found += [Instance(i) for i in _items(page, "Instances", "Instance")]
            if int(page.get("PageSize") or 0) < BATCH:
                break
        return found

    def _instances_by_id(self, region: str, ids: Sequence[str]) -> dict[str, Instance]:
        return {found.id: found for found in self.describe(region, ids)}

    def _enis_by_id(self, region: str, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """``DescribeNetworkInterfacesByIDs``: the ENIs of ``ids`` (at most 100), NextToken-
        paged."""
        params: dict[str, str] = {"RegionId": region}
        params.update({f"NetworkInterfaceId.{n}": eni for n, eni in enumerate(ids, 1)})
        found: dict[str, Mapping[str, Any]] = {}
        for page in self.rpc.token_pages("ecs", "DescribeNetworkInterfaces", params):
            for eni in _items(page, "NetworkInterfaceSets", "NetworkInterfaceSet"):
                found[str(eni.get("NetworkInterfaceId"))] = eni
        return found

    def by_ip(self, ip: str) -> Instance | None:
        """``GetInstancesByIP``: the one instance of the VPC and cluster with ``ip``."""
        params = {
            "InstanceNetworkType": "vpc",
            "PrivateIpAddresses": json.dumps([ip]),
            "VpcId": self.vpc_id,
            "Tag.1.Key": self.config.cluster_tag,
        }
        page = self.rpc.call("ecs", "DescribeInstances", params)
        found = _items(page, "Instances", "Instance")
        if len(found) != 1:
            log.info("alibabacloud: find none or multiple instances by ip %s", ip)
            return None
        return Instance(found[0])

    def instance_of(self, node: Node) -> Instance | None:
        """``findCloudECS``: by providerID, else by the single InternalIP."""
        provider_id = node_provider_id(node)
        if provider_id:
            region, instance = parse_provider_id(provider_id)
            return self._instances.get(region, instance)
        ips = _internal_ips(node)
        if len(ips) != 1:
            return None
        return self.by_ip(ips[0])

    # -- InstancesV2 ------------------------------------------------------------------------

    def instance_exists(self, node: Node) -> bool:
        if not node_provider_id(node):
            return True  # upstream never deletes a Node without a providerID
        return self.instance_of(node) is not None

    def instance_shutdown(self, node: Node) -> bool:
        provider_id = node_provider_id(node)
        if provider_id:
            parse_provider_id(provider_id)  # another cloud's Node raises
        return False  # upstream v2.14.0 never reports an instance shut down

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        found = self.instance_of(node)
        if found is None:
            raise InstanceNotFound(f"no ECS instance for node {node_name(node)!r}")
        if _uninitialized(node):
            self.disable_source_dest_check(found)
        return self.metadata(node, found)

    def disable_source_dest_check(self, instance: Instance) -> None:
        """Turn the primary ENI's source/destination check off when it is on."""
        eni = str(_primary_nic(instance.raw).get("NetworkInterfaceId") or "")
        if not eni:
            log.info("alibabacloud: no primary ENI for %s, source/dest check left", instance.id)
            return
        found = self._enis.get(instance.region, eni)
        if found is None or not found.get("SourceDestCheck"):
            return
        modify = {
            "RegionId": instance.region,
            "NetworkInterfaceId": eni,
            "SourceDestCheck": "false",
        }
        self.rpc.call("ecs", "ModifyNetworkInterfaceAttribute", modify)
        log.info("alibabacloud: source/dest check of %s (%s) turned off", eni, instance.id)

    def metadata(self, node: Node, instance: Instance) -> InstanceMetadata:
        raw = instance.raw
        return InstanceMetadata(
            provider_id=node_provider_id(node) or provider_id_of(instance.region, instance.id),
            instance_type=str(raw.get("InstanceType", "")),
            node_addresses=addresses_of(raw, ipv6=bool(self.config.gates.get("IPv6DualStack"))),
            zone=str(raw.get("ZoneId", "")),
            region=instance.region,
            additional_labels=instance.labels(),
        )

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """Every Node with a providerID whose instance answers; one ``DescribeInstances`` per
        100 instances of a region."""
        wanted: dict[str, dict[str, list[Node]]] = {}
        for node in nodes:
            provider_id = node_provider_id(node)
            if not provider_id or is_excluded(node):
                continue
            try:
                region, instance = parse_provider_id(provider_id)
            except CloudProviderError as err:
                log.warning("alibabacloud: node %s: %s", node_name(node), err)
                continue
            wanted.setdefault(region, {}).setdefault(instance, []).append(node)
        result: dict[NodeName, InstanceMetadata] = {}
        for region, by_instance in wanted.items():
            for chunk in _chunks(sorted(by_instance), BATCH):
                for found in self.describe(region, chunk):
                    for node in by_instance.get(found.id, ()):
                        result[node_name(node)] = self.metadata(node, found)
        return result

    def describe_instance(self, node: Node) -> InstanceView | None:
        provider_id = node_provider_id(node)
        if not provider_id and len(_internal_ips(node)) != 1:
            return None
        found = self.instance_of(node)
        if found is None:
            return InstanceView(provider_id=provider_id, exists=False)
        detail = {
            "instanceType": str(found.raw.get("InstanceType", "")),
            "zone": str(found.raw.get("ZoneId", "")),
        }
        return InstanceView(
            provider_id=provider_id or provider_id_of(found.region, found.id),
            state=found.status,
            detail=detail,
        )


def _chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
