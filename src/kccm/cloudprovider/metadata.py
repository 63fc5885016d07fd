"""Instance metadata whatever the provider implements (upstream ``node_controller.go``
``getInstanceMetadata`` / ``getInstanceNodeAddresses`` and ``cloudprovider.GetInstanceProviderID``).

InstancesV2 answers in one call; a provider with only the legacy ``Instances`` (and maybe
``Zones``) is asked field by field, by providerID first and by node name as the fallback, with
upstream's error messages. Every call goes through the call gate (:mod:`kccm.cloudprovider.gated`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from kccm.cloudprovider.errors import InstanceNotFound, NotImplementedByProvider, find_error
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedCloud
from kccm.cloudprovider.helpers import InstancesUnsupported, make_provider_id
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.cloudprovider.types import InstanceMetadata

__all__ = [
    "InstanceMetadataError",
    "ProviderIDError",
    "get_instance_provider_id",
    "instance_metadata",
    "instance_node_addresses",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")


class InstanceMetadataError(Exception):
    """The provider could not describe a node's instance (upstream's wording)."""


class ProviderIDError(Exception):
    """The provider failed to return an instance ID (wraps the provider's error)."""


async def get_instance_provider_id(cloud: GatedCloud, node_name: str, *, priority: Priority) -> str:
    """Upstream ``cloudprovider.GetInstanceProviderID`` through the call gate.

    ``InstanceNotFound`` and ``NotImplementedByProvider`` propagate unchanged; any other error
    becomes "failed to get instance ID from cloud provider: ...". Without legacy Instances the
    error is "failed to get instances from cloud provider".
    """
    instances = cloud.instances()
    if instances is None:
        raise InstancesUnsupported("failed to get instances from cloud provider")
    try:
        instance_id = await instances.instance_id(node_name, priority=priority)
    except (InstanceNotFound, NotImplementedByProvider):
        raise
    except Exception as err:
        raise ProviderIDError(f"failed to get instance ID from cloud provider: {err}") from err
    return make_provider_id(cloud.provider_name(), instance_id)


async def instance_metadata(
    cloud: GatedCloud, node: Mapping[str, Any], *, priority: Priority
) -> InstanceMetadata | None:
    """Upstream ``getInstanceMetadata``: InstancesV2 when supported, else legacy Instances
    (+ Zones when supported)."""
    v2 = cloud.instances_v2()
    if v2 is None:
        return await _legacy_instance_metadata(cloud, node, priority)
    meta = await v2.instance_metadata(node, priority=priority)
    if meta is not None and not meta.provider_id:
        provider_id = node_provider_id(node)
        if not provider_id:
            raise InstanceMetadataError(
                f"cloud provider does not set node provider ID for node {node_name(node)}"
            )
        meta = replace(meta, provider_id=provider_id)
    return meta


async def instance_node_addresses(
    cloud: GatedCloud, node: Mapping[str, Any]
) -> InstanceMetadata | None:
    """Upstream ``getInstanceNodeAddresses`` (periodic loop): V2 returns the full metadata;
    legacy asks only for the addresses (by providerID if set, else by name)."""
    v2 = cloud.instances_v2()
    if v2 is not None:
        return await v2.instance_metadata(node, priority=Priority.PERIODIC)
    instances = cloud.instances()
    if instances is None:
        raise InstanceMetadataError("failed to get instances from cloud provider")
    provider_id = node_provider_id(node)
    if provider_id:
        found = await instances.node_addresses_by_provider_id(
            provider_id, priority=Priority.PERIODIC
        )
    else:
        found = await instances.node_addresses(node_name(node), priority=Priority.PERIODIC)
    return InstanceMetadata(node_addresses=found)


async def _legacy_instance_metadata(
    cloud: GatedCloud, node: Mapping[str, Any], priority: Priority
) -> InstanceMetadata:
    instances = cloud.instances()
    if instances is None:
        raise InstanceMetadataError("failed to get instances from cloud provider")
    name = node_name(node)
    provider_id = node_provider_id(node) or await _legacy_provider_id(cloud, name, priority)
    addresses = await _by_id_or_name(
        lambda: instances.node_addresses_by_provider_id(provider_id, priority=priority),
        lambda: instances.node_addresses(name, priority=priority),
        lambda by_id, by_name: (
            f"error fetching node by provider ID: {by_id}, and error by node name: {by_name}"
        ),
    )
    instance_type = await _by_id_or_name(
        lambda: instances.instance_type_by_provider_id(provider_id, priority=priority),
        lambda: instances.instance_type(name, priority=priority),
        lambda by_id, by_name: (
            f"InstanceType: Error fetching by providerID: {by_id} "
            f"Error fetching by NodeName: {by_name}"
        ),
    )
    meta = InstanceMetadata(
        provider_id=provider_id, instance_type=instance_type, node_addresses=list(addresses)
    )
    zones = cloud.zones()
    if zones is None:
        return meta
    try:
        zone = await _by_id_or_name(
            lambda: zones.get_zone_by_provider_id(provider_id, priority=priority),
            lambda: zones.get_zone_by_node_name(name, priority=priority),
            lambda by_id, by_name: (
                f"Zone: Error fetching by providerID: {by_id} Error fetching by NodeName: {by_name}"
            ),
        )
    except InstanceMetadataError as err:
        raise InstanceMetadataError(f"failed to get zone from cloud provider: {err}") from err
    return replace(meta, zone=zone.failure_domain or meta.zone, region=zone.region or meta.region)


async def _legacy_provider_id(cloud: GatedCloud, name: str, priority: Priority) -> str:
    """The instance ID as a providerID; "" when the provider does not implement it."""
    try:
        return await get_instance_provider_id(cloud, name, priority=priority)
    except Exception as err:
        if find_error(err, NotImplementedByProvider) is None:
            raise
        _log.warning(
            "cloud provider does not implement InstanceID for node %s; "
            "initializing it without a providerID",
            name,
        )
        return ""


async def _by_id_or_name(
    by_id: Callable[[], Awaitable[T]],
    by_name: Callable[[], Awaitable[T]],
    message: Callable[[Exception, Exception], str],
) -> T:
    """Ask by providerID, then by node name; both failing is one error naming both."""
    try:
        return await by_id()
    except Exception as id_error:
        try:
            return await by_name()
        except Exception as name_error:
            raise InstanceMetadataError(message(id_error, name_error)) from name_error
