"""The local provider's InstancesV2 and Zones: the ``instances`` table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kccm.cloudprovider import (
    InstanceMetadata,
    InstanceNotFound,
    Node,
    NodeName,
    Zone,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.local.base import LocalBase, own_provider_id
from kccm.providers.local.desired import (
    instance_metadata_of,
    node_addresses_of,
    spec_of,
)
from kccm.providers.local.store import (
    InstanceRecord,
)

__all__ = ["LocalInstances"]


class LocalInstances(LocalBase):
    """InstancesV2 and Zones over the ``instances`` table (auto-adopt creates rows)."""

    def _find(self, node: Node) -> InstanceRecord | None:
        provider_id = node_provider_id(node)
        if provider_id:
            own = own_provider_id(provider_id, node_name(node))
            self._read("find_instance")
            return self.store.find_instance_by_provider_id(own)
        self._read("find_instance")
        return self.store.find_instance(node_name(node))

    def _get(self, node: Node) -> InstanceRecord:
        found = self._find(node)
        if found is None:
            raise InstanceNotFound(f"no local instance for node {node_name(node)!r}")
        return found

    def _adopt(self, node: Node) -> InstanceRecord | None:
        glob = self.config.global_
        if not glob.auto_adopt or spec_of(node).get("providerID"):
            return None
        self._write("adopt_instance")
        return self.store.adopt_instance(
            InstanceRecord(
                name=node_name(node),
                addresses=node_addresses_of(node),
                instance_type=glob.instance_type,
                zone=glob.zone,
                region=glob.region,
            )
        )

    def instance_exists(self, node: Node) -> bool:
        return self._find(node) is not None

    def instance_shutdown(self, node: Node) -> bool:
        return not self._get(node).running

    def instance_metadata(self, node: Node) -> InstanceMetadata | None:
        instance = self._find(node) or self._adopt(node)
        if instance is None:
            raise InstanceNotFound(
                f"no local instance for node {node_name(node)!r} "
                "(add one with `kccm local instances add`, or set auto-adopt)"
            )
        return instance_metadata_of(instance)

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """kccm's optional list call: every node's metadata from one query of the instances
        table; nodes without an instance (or of another provider) are left out."""
        self._read("list_instances")
        instances = self.store.list_instances()
        by_name = {i.name: i for i in instances}
        by_provider_id = {i.provider_id: i for i in instances}
        found: dict[NodeName, InstanceMetadata] = {}
        for node in nodes:
            provider_id = node_provider_id(node)
            instance = by_provider_id.get(provider_id) if provider_id else None
            if not provider_id:
                instance = by_name.get(node_name(node))
            if instance is not None:
                found[node_name(node)] = instance_metadata_of(instance)
        return found

    def get_zone(self) -> Zone:
        return Zone(failure_domain=self.config.global_.zone, region=self.config.global_.region)

    def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        own = own_provider_id(provider_id)
        self._read("find_instance")
        instance = self.store.find_instance_by_provider_id(own)
        if instance is None:
            raise InstanceNotFound(f"no local instance {provider_id!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)

    def get_zone_by_node_name(self, name: NodeName) -> Zone:
        self._read("find_instance")
        instance = self.store.find_instance(name)
        if instance is None:
            raise InstanceNotFound(f"no local instance named {name!r}")
        return Zone(failure_domain=instance.zone, region=instance.region)
