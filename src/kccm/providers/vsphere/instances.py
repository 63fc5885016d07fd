"""InstancesV2, the legacy Instances and Zones, over every configured vCenter.

Upstream: ``instances_v2.go``, ``instances.go``, ``zones.go`` and ``nodemanager.go`` in
``pkg/cloudprovider/vsphere``:

- providerID ``vsphere://<bios uuid>``, lower-case (``GetUUIDFromProviderID``); a node
  without one is looked up by its name as the guest's DNS name, then as an IP address
  (``shakeOutNodeIDLookup``); the vCenters are searched in config order;
- a UUID that matches no VM is also tried byte-swapped (``ConvertK8sUUIDtoNormal``: Photon 2
  reports the SMBIOS UUID in the other byte order);
- instance type ``vsphere-vm.cpu-<n>.mem-<GiB>gb.os-<os>`` (``DiscoverNode``);
- shut down = not powered on (``IsActive``); gone = no VM with that UUID anywhere
  (``InstanceExistsByProviderID``), confirmed with ``FindByUuid`` before it is said;
- zone and region from tags (:mod:`.zones`), when both ``[Labels]`` categories are set.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kccm.cloudprovider import (
    CloudProviderError,
    InstanceMetadata,
    InstanceNotFound,
    InstanceView,
    Node,
    NodeAddress,
    NodeName,
    NotImplementedByProvider,
    Zone,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.providers.vsphere.addresses import node_addresses
from kccm.providers.vsphere.configtypes import VSphereConfig
from kccm.providers.vsphere.credentials import CredentialError
from kccm.providers.vsphere.guestos import guest_os
from kccm.providers.vsphere.inventory import Inventory, Snapshot, VMInfo
from kccm.providers.vsphere.session import VSphereAPIError
from kccm.providers.vsphere.zones import ZoneLookup

__all__ = [
    "PROVIDER_PREFIX",
    "VCenterClient",
    "VSphereInstances",
    "instance_type",
    "k8s_uuid_to_normal",
    "uuid_from_provider_id",
]

log = logging.getLogger(__name__)

PROVIDER_PREFIX = "vsphere://"
MISS_REFRESH_SECONDS = 1.0
"""A lookup that misses re-reads the inventory when the snapshot is older than this."""


def uuid_from_provider_id(provider_id: str) -> str:
    """Upstream ``GetUUIDFromProviderID``."""
    return provider_id.removeprefix(PROVIDER_PREFIX).strip().lower()


def k8s_uuid_to_normal(uuid: str) -> str:
    """Upstream ``ConvertK8sUUIDtoNormal``: swap the first three fields' byte order."""
    if len(uuid) < 36:
        return uuid
    u = uuid
    swapped = (
        f"{u[6:8]}{u[4:6]}{u[2:4]}{u[0:2]}-{u[11:13]}{u[9:11]}-{u[16:18]}{u[14:16]}-"
        f"{u[19:23]}-{u[24:36]}"
    )
    return swapped.strip().lower()


def instance_type(vm: VMInfo) -> str:
    """``vsphere-vm.cpu-<n>.mem-<GiB>gb.os-<os>``, as upstream ``DiscoverNode`` reports it."""
    return f"vsphere-vm.cpu-{vm.num_cpu}.mem-{vm.memory_mb // 1024}gb.os-{guest_os(vm.guest_id)}"


def _shut_down(vm: VMInfo) -> bool:
    """Upstream ``IsActive`` inverted: not ``poweredOn``. A power state the vCenter did not
    report (a property the collector left out) is an error, never "shut down" (issue 25)."""
    if not vm.power_state:
        raise CloudProviderError(f"VM {vm.name} ({vm.uuid}): the vCenter reported no power state")
    return vm.power_state != "poweredOn"


@dataclass
class VCenterClient:
    """What the instances need of one vCenter."""

    inventory: Inventory
    zones: ZoneLookup | None


class VSphereInstances:
    """InstancesV2 (+ ``list_instance_metadata``, ``describe_instance``), Instances and
    Zones; plain ``def``s (pyvmomi blocks), run by the framework in its thread pool."""

    def __init__(self, config: VSphereConfig, vcenters: Sequence[VCenterClient]) -> None:
        self._config = config
        self._vcenters = list(vcenters)

    # -- lookups -------------------------------------------------------------------------------

    def _search(
        self, pick: Callable[[Snapshot, str], VMInfo | None], max_age: float | None
    ) -> VMInfo | None:
        """The first VM ``pick`` finds, vCenter by vCenter. A vCenter that cannot be read, or
        has a configured datacenter it cannot find, does not hide a VM found elsewhere; when
        none has it, that error is raised (not knowing is not "absent"), as upstream
        ``WhichVCandDCByNodeID`` does."""
        failures: list[CloudProviderError] = []
        for vc in self._vcenters:
            try:
                snap = vc.inventory.snapshot(max_age)
                found = pick(snap, vc.inventory.tenant)
            except (VSphereAPIError, CredentialError) as err:
                failures.append(err)
                continue
            if found is not None:
                return found
            if snap.unresolved is not None:  # upstream setGlobalErr for GetDatacenter's error
                failures.append(snap.unresolved)
        if failures:
            raise failures[0]
        return None

    def _find_uuid(self, uuid: str, max_age: float | None = None) -> VMInfo | None:
        candidates = (uuid, k8s_uuid_to_normal(uuid))

        def by_uuid(snap: Snapshot, _tenant: str) -> VMInfo | None:
            return next((snap.by_uuid[c] for c in candidates if c in snap.by_uuid), None)

        return self._search(by_uuid, max_age)

    def by_uuid(self, uuid: str) -> VMInfo | None:
        """The VM with this BIOS UUID, re-reading a snapshot older than a second on a miss."""
        return self._find_uuid(uuid) or self._find_uuid(uuid, MISS_REFRESH_SECONDS)

    def _find_name(self, name: str, max_age: float | None = None) -> VMInfo | None:
        key = name.strip().lower()

        def by_dns_name(snap: Snapshot, tenant: str) -> VMInfo | None:
            matches = snap.by_name.get(key, [])
            if len(matches) > 1:
                raise CloudProviderError(
                    f"several VMs in vCenter {tenant} report the DNS name {name!r}"
                )
            return matches[0] if matches else None

        # upstream then tries the node name as an IP address
        return self._search(by_dns_name, max_age) or self._search(
            lambda snap, _t: snap.by_ip.get(name.strip()), max_age
        )

    def by_name(self, name: str) -> VMInfo:
        found = self._find_name(name) or self._find_name(name, MISS_REFRESH_SECONDS)
        if found is None:
            raise InstanceNotFound(
                f"VM not found: no VM in {self._where()} reports the DNS name or IP {name!r}"
            )
        return found

    def _where(self) -> str:
        return "vCenter " + ", ".join(vc.inventory.tenant for vc in self._vcenters)

    def _vm_of(self, node: Node) -> VMInfo | None:
        """The node's VM; ``None`` when its providerID matches no VM (InstanceNotFound when
        its name matches none)."""
        pid = node_provider_id(node)
        if pid:
            self._check_provider_id(pid)
            return self.by_uuid(uuid_from_provider_id(pid))
        return self.by_name(node_name(node))

    @staticmethod
    def _check_provider_id(pid: str) -> None:
        if not pid.startswith(PROVIDER_PREFIX):
            raise CloudProviderError(f"providerID {pid!r} is not a vsphere:// providerID")

    def _absent_everywhere(self, uuid: str) -> bool:
        return all(vc.inventory.confirm_absent(uuid) for vc in self._vcenters)

    # -- metadata --------------------------------------------------------------------------------

    def _client(self, vm: VMInfo) -> VCenterClient:
        return next(vc for vc in self._vcenters if vc.inventory.tenant == vm.vcenter)

    def _addresses(self, vm: VMInfo) -> list[NodeAddress]:
        families = self._config.vcenters[vm.vcenter].ip_families
        try:
            return node_addresses(vm.hostname, vm.nics, self._config.nodes, families, vm.guestinfo)
        except CloudProviderError as err:
            raise CloudProviderError(f"VM {vm.name} ({vm.uuid}): {err}") from err

    def _zone(self, vm: VMInfo) -> Zone:
        lookup = self._client(vm).zones
        if lookup is None:
            return Zone()
        neighbours = self._client(vm).inventory.snapshot().vms
        found = lookup.zones([vm], neighbours)[vm.uuid]
        if isinstance(found, CloudProviderError):
            raise found
        return found

    def _metadata(self, vm: VMInfo, given: str, zone: Zone) -> InstanceMetadata:
        return InstanceMetadata(
            provider_id=given or PROVIDER_PREFIX + vm.uuid,
            instance_type=instance_type(vm),
            node_addresses=self._addresses(vm),
            zone=zone.failure_domain,
            region=zone.region,
        )

    # -- InstancesV2 -----------------------------------------------------------------------------

    def instance_exists(self, node: Node) -> bool:
        pid = node_provider_id(node)
        if pid:
            self._check_provider_id(pid)
            return self.instance_exists_by_provider_id(pid)
        return self.by_name(node_name(node)) is not None

    def instance_shutdown(self, node: Node) -> bool:
        vm = self._vm_of(node)
        if vm is None:
            raise InstanceNotFound(f"VM not found for node {node['metadata']['name']!r}")
        return _shut_down(vm)

    def instance_metadata(self, node: Node) -> InstanceMetadata:
        vm = self._vm_of(node)
        name = node_name(node)
        if vm is None:
            raise InstanceNotFound(f"VM not found for node {name!r}")
        given = node_provider_id(node)
        return self._metadata(vm, given, self._zone(vm))

    def describe_instance(self, node: Node) -> InstanceView:
        """kccm's optional describe (``kccm explain node``): the node's VM as the vCenter
        reports it (power state, guest, host name and NICs, from the inventory: no other
        request); a VM no vCenter has does not exist. vsphere has no load balancers, so this is
        all it describes."""
        pid = node_provider_id(node)
        try:
            vm = self._vm_of(node)
        except InstanceNotFound:
            vm = None
        if vm is None:
            return InstanceView(provider_id=pid, exists=False)
        nics = "; ".join(f"{n.network}: {', '.join(n.addresses)}" for n in vm.nics)
        detail = {
            "vm": vm.name,
            "vcenter": vm.vcenter,
            "datacenter": vm.datacenter,
            "guest_hostname": vm.hostname,
            "guest_id": vm.guest_id,
            "nics": nics,
            "instance_type": instance_type(vm),
        }
        return InstanceView(pid or PROVIDER_PREFIX + vm.uuid, True, vm.power_state, detail)

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """Every known node's metadata from one fresh inventory read per vCenter (plus one
        tag read for the ancestors whose tags are not cached)."""
        for vc in self._vcenters:
            vc.inventory.snapshot(MISS_REFRESH_SECONDS)
        found: dict[str, tuple[VMInfo, str]] = {}
        for node in nodes:
            name = node_name(node)
            pid = node_provider_id(node)
            try:
                vm = self._find_uuid(uuid_from_provider_id(pid)) if pid else self._find_name(name)
            except CloudProviderError:
                continue
            if vm is not None:
                found[name] = (vm, pid)
        zones = self._zones([vm for vm, _ in found.values()])
        out: dict[str, InstanceMetadata] = {}
        for name, (vm, pid) in found.items():
            zone = zones.get(vm.uuid, Zone())
            if isinstance(zone, CloudProviderError):
                log.warning("vsphere: node %s: %s", name, zone)
                continue
            try:
                out[name] = self._metadata(vm, pid, zone)
            except CloudProviderError as err:
                log.warning("vsphere: node %s: %s", name, err)
        return out

    def _zones(self, vms: Sequence[VMInfo]) -> dict[str, Zone | CloudProviderError]:
        zones: dict[str, Zone | CloudProviderError] = {}
        for vc in self._vcenters:
            mine = [vm for vm in vms if vm.vcenter == vc.inventory.tenant]
            if mine and vc.zones is not None:
                zones.update(vc.zones.zones(mine))
        return zones

    # -- legacy Instances -------------------------------------------------------------------------

    def node_addresses(self, name: NodeName) -> list[NodeAddress]:
        return self._addresses(self.by_name(name))

    def node_addresses_by_provider_id(self, provider_id: str) -> list[NodeAddress]:
        return self._addresses(self._require_uuid(provider_id))

    def instance_id(self, name: NodeName) -> str:
        return self.by_name(name).uuid

    def instance_type(self, name: NodeName) -> str:
        return instance_type(self.by_name(name))

    def instance_type_by_provider_id(self, provider_id: str) -> str:
        return instance_type(self._require_uuid(provider_id))

    def add_ssh_key_to_all_instances(self, user: str, key_data: bytes) -> None:
        raise NotImplementedByProvider()

    def current_node_name(self, hostname: str) -> NodeName:
        return hostname

    def instance_exists_by_provider_id(self, provider_id: str) -> bool:
        self._check_provider_id(provider_id)  # never judge another provider's instance
        uuid = uuid_from_provider_id(provider_id)
        if self.by_uuid(uuid) is not None:
            return True
        gone = self._absent_everywhere(uuid) and self._absent_everywhere(k8s_uuid_to_normal(uuid))
        if gone:
            log.info("vsphere: no VM has UUID %s in %s: the instance is gone", uuid, self._where())
        return not gone

    def instance_shutdown_by_provider_id(self, provider_id: str) -> bool:
        return _shut_down(self._require_uuid(provider_id))

    def _require_uuid(self, provider_id: str) -> VMInfo:
        vm = self.by_uuid(uuid_from_provider_id(provider_id))
        if vm is None:
            raise InstanceNotFound(f"VM not found: no VM with providerID {provider_id!r}")
        return vm

    # -- Zones ------------------------------------------------------------------------------------

    def get_zone(self) -> Zone:
        """Upstream looks up this machine's host name (kccm usually runs elsewhere)."""
        if not self._config.zones_enabled:
            return Zone()
        return self._zone(self.by_name(socket.gethostname()))

    def get_zone_by_provider_id(self, provider_id: str) -> Zone:
        if not self._config.zones_enabled:
            return Zone()
        return self._zone(self._require_uuid(provider_id))

    def get_zone_by_node_name(self, name: NodeName) -> Zone:
        if not self._config.zones_enabled:
            return Zone()
        return self._zone(self.by_name(name))
