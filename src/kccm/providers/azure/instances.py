"""InstancesV2 for availability-set VMs and scale set (Uniform) VMs.

Upstream v1.36.5: ``pkg/provider/azure_instances_v2.go`` over ``azure_instances_v1.go``, with
``availabilitySet`` (``azure_standard.go``) and ``ScaleSet`` (``azure_vmss.go``,
``azure_vmss_cache.go``). How a Node's machine is found:

- by its providerID (:mod:`.machines`): a VM by resource group and name, a scale set VM by
  resource group, scale set and instance ID;
- without one, by its name in its resource group (the ``kubernetes.azure.com/resource-group``
  label, else ``resourceGroup``): with ``vmType: standard`` the VM of that name; with ``vmss``
  a VM of that name (unless ``disableAvailabilitySetNodes``), else the scale set whose computer
  name prefix is the name without its last six characters, and its VM with that computer name.

Nodes labelled ``kubernetes.azure.com/managed=false``, and Nodes whose providerID is
``azure://`` but names no Azure compute resource, are unmanaged: they exist, are never shut
down and get no metadata (``IsNodeUnmanaged``, ``IsNodeUnmanagedByProviderID``). A providerID
of another cloud raises :class:`~kccm.cloudprovider.ForeignProviderID`.

A machine is gone only when ARM says so (404, or absent from a scale set's list read again
after the miss); any other ARM error raises, and the Node stays. A Node younger than
``nodeInstanceNotFoundGracePeriodInSeconds`` whose machine is not found still exists
(``tolerateInstanceNotFoundForNewNode``).

:meth:`AzureInstances.list_instance_metadata` answers a refresh of every Node with one VM list
per resource group, one VM list per scale set, the NIC lists of those, and the public IP lists
of the resource groups holding public IPs on Node NICs, and one public IP list per scale set
whose VMs have public IPs (where upstream GETs each VM's, ``GetIPByNodeName`` in
``azure_vmss.go``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kccm.cloudprovider import (
    CloudProviderError,
    ForeignProviderID,
    InstanceMetadata,
    InstanceNotFound,
    InstanceView,
    Node,
    NodeName,
    Throttled,
    node_name,
    node_provider_id,
)
from kccm.providers.azure.addresses import PublicAddress, node_addresses, scale_set_public_ip
from kccm.providers.azure.config_fields import AzureConfig
from kccm.providers.azure.inventory import Inventory, address_of
from kccm.providers.azure.machines import (
    PROVIDER_NAME,
    Machine,
    is_managed_provider_id,
    parse_provider_id,
    scale_set_instance_id,
    scale_set_prefix,
)

__all__ = ["MANAGED_LABEL", "RESOURCE_GROUP_LABEL", "AzureInstances"]

log = logging.getLogger(__name__)

MANAGED_LABEL = "kubernetes.azure.com/managed"
RESOURCE_GROUP_LABEL = "kubernetes.azure.com/resource-group"
_RESOURCE_GROUP = "/resourcegroups/"


def _labels(node: Node) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _group_of_id(resource_id: str) -> str:
    lowered = resource_id.lower()
    start = lowered.find(_RESOURCE_GROUP)
    if start < 0:
        return ""
    return lowered[start + len(_RESOURCE_GROUP) :].split("/", 1)[0]


class AzureInstances:
    """InstancesV2, ``list_instance_metadata`` and ``describe_instance`` on ARM."""

    def __init__(
        self,
        inventory: Inventory,
        config: AzureConfig,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.inventory = inventory
        self.config = config
        self._now = now

    # -- InstancesV2 ------------------------------------------------------------------------

    def instance_exists(self, node: Node) -> bool:
        """``InstanceExists``."""
        if self.is_unmanaged(node):
            return True
        if self.machine_of(node) is not None:
            return True
        return self._in_grace_period(node)

    def instance_shutdown(self, node: Node) -> bool:
        """``InstanceShutdown``: provisioning ``Succeeded`` and ``stopped``/``deallocated``/
        ``deallocating``; a machine not found is not shut down (the lifecycle controller then
        asks whether it exists)."""
        if self.is_unmanaged(node):
            return False
        machine = self.machine_of(node)
        return machine is not None and machine.is_shut_down

    def instance_metadata(self, node: Node) -> InstanceMetadata | None:
        """``InstanceMetadata``: providerID, VM size, addresses, zone and region."""
        if self.is_unmanaged(node):
            return None
        machine = self.machine_of(node)
        if machine is None:
            raise InstanceNotFound(f"no Azure machine for node {node_name(node)!r}")
        nic = self.inventory.nic(machine)
        return self._metadata(node, machine, nic, self._public_reader(machine, batch=False))

    def describe_instance(self, node: Node) -> InstanceView:
        """kccm's optional describe: the machine's power state and facts."""
        provider_id = node_provider_id(node)
        if self.is_unmanaged(node):
            return InstanceView(provider_id=provider_id, state="unmanaged")
        machine = self.machine_of(node)
        if machine is None:
            return InstanceView(provider_id=provider_id, exists=False)
        detail = {
            "size": machine.size,
            "provisioningState": machine.provisioning_state,
            "location": machine.location,
        }
        if machine.zones:
            detail["zones"] = ",".join(machine.zones)
        if machine.scale_set:
            detail["scaleSet"] = machine.scale_set
        return InstanceView(provider_id=machine.provider_id, state=machine.power, detail=detail)

    # -- finding a Node's machine -----------------------------------------------------------

    def is_unmanaged(self, node: Node) -> bool:
        """Labelled ``kubernetes.azure.com/managed=false``, or an ``azure://`` providerID that
        names no Azure compute resource. Another cloud's providerID raises."""
        if str(_labels(node).get(MANAGED_LABEL, "")).lower() == "false":
            return True
        provider_id = node_provider_id(node)
        if not provider_id:
            return False
        if not provider_id.lower().startswith(f"{PROVIDER_NAME}://"):
            raise ForeignProviderID(f"providerID {provider_id!r} is not an azure:// one")
        return not is_managed_provider_id(provider_id) or parse_provider_id(provider_id) is None

    def resource_group(self, node: Node) -> str:
        """``GetNodeResourceGroup``: the label, else ``resourceGroup``."""
        label = str(_labels(node).get(RESOURCE_GROUP_LABEL) or "")
        return label.lower() or self.config.resource_group

    def machine_of(self, node: Node, *, batch: bool = False) -> Machine | None:
        """The Node's machine, ``None`` when ARM has none. ``batch`` reads VMs from their
        resource group's list instead of one by one."""
        provider_id = node_provider_id(node)
        if provider_id:
            ref = parse_provider_id(provider_id)
            if ref is None:
                raise CloudProviderError(f"providerID {provider_id!r} names no Azure machine")
            if ref.is_scale_set:
                return self._scale_set_vm(ref.resource_group, ref.name, ref.instance_id, None)
            return self._vm(ref.resource_group, ref.name, batch)
        return self._by_name(node_name(node), self.resource_group(node), batch)

    def _vm(self, group: str, name: str, batch: bool) -> Machine | None:
        if not batch:
            return self.inventory.vm(group, name)
        return self._listed_vm(group, name)

    def _listed_vm(self, group: str, name: str) -> Machine | None:
        """The VM named ``name``, else the one whose computer name it is (a Flex VM's node
        name: upstream's VMSS Flex cache is keyed by computer name)."""
        wanted = name.lower()
        listed = [m for m in self.inventory.vms(group) if not m.deleting]
        for machine in listed:
            if machine.name.lower() == wanted:
                return machine
        for machine in listed:
            if machine.computer_name == wanted:
                return machine
        return None

    def _by_name(self, name: str, group: str, batch: bool) -> Machine | None:
        vm_type = self.config.vm_type.lower()
        if vm_type == "standard":
            return self._vm(group, name, batch)
        if vm_type == "vmssflex" or not self.config.disable_availability_set_nodes:
            machine = self._listed_vm(group, name)
            if machine is not None or vm_type == "vmssflex":
                return machine
        if scale_set_instance_id(name) is None:
            return None
        for scale_set in self.inventory.scale_sets(group):
            if scale_set_prefix(scale_set).lower() == name[:-6].lower():
                return self._scale_set_vm(group, str(scale_set.get("name")), None, name)
        return None

    def _scale_set_vm(
        self, group: str, scale_set: str, instance_id: str | None, name: str | None
    ) -> Machine | None:
        """A scale set VM by instance ID or computer name; a miss reads the list again once
        (upstream refreshes its VMSS VM cache on a miss)."""

        def pick(machines: Sequence[Machine] | None) -> Machine | None:
            for machine in machines or ():
                if instance_id is not None and machine.instance_id == instance_id:
                    return machine
                if name is not None and machine.node_name == name.lower():
                    return machine
            return None

        started = self.inventory.cache.now()
        listed = self.inventory.scale_set_vms(group, scale_set)
        found = pick(listed)
        if found is None and listed is not None:
            found = pick(self.inventory.scale_set_vms(group, scale_set, newer_than=started))
        return None if found is None or found.deleting else found

    def _in_grace_period(self, node: Node) -> bool:
        grace = self.config.node_instance_not_found_grace_period_in_seconds
        created = str((node.get("metadata") or {}).get("creationTimestamp") or "")
        if grace <= 0 or not created:
            return False
        try:
            born = datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            return False
        young = (self._now() - born).total_seconds() < grace
        if young:
            log.info("azure: node %s not found in ARM but within its grace period", node_name(node))
        return young

    # -- metadata -----------------------------------------------------------------------------

    def _metadata(
        self,
        node: Node,
        machine: Machine,
        nic: Mapping[str, Any],
        public: Callable[[str], str | None],
    ) -> InstanceMetadata:
        return InstanceMetadata(
            provider_id=node_provider_id(node) or machine.provider_id,
            instance_type=machine.size,
            node_addresses=node_addresses(node_name(node), nic, public),
            zone=machine.zone().lower(),
            region=machine.location.lower(),
        )

    def list_instance_metadata(self, nodes: Sequence[Node]) -> Mapping[NodeName, InstanceMetadata]:
        """Metadata of every Node whose machine exists (see the module doc); a Node that fails
        is logged and left out (the lifecycle controller decides existence). Throttling fails
        the whole refresh, so that the call gate pauses it."""
        machines: dict[NodeName, Machine] = {}
        for node in nodes:
            try:
                if self.is_unmanaged(node):
                    continue
                machine = self.machine_of(node, batch=True)
            except Throttled:
                raise  # the whole refresh waits (the call gate pauses the group)
            except CloudProviderError as err:
                log.warning("azure: node %s: %s", node_name(node), err)
                continue
            if machine is not None:
                machines[node_name(node)] = machine
        by_name = {node_name(n): n for n in nodes}
        result: dict[NodeName, InstanceMetadata] = {}
        for name, machine in machines.items():
            try:
                nic = self._listed_nic(machine)
                if nic is None:
                    continue
                public = self._public_reader(machine, batch=True)
                result[name] = self._metadata(by_name[name], machine, nic, public)
            except Throttled:
                raise
            except CloudProviderError as err:
                log.warning("azure: metadata of node %s: %s", name, err)
        return result

    def _listed_nic(self, machine: Machine) -> dict[str, Any] | None:
        nic_id = machine.primary_nic()
        if machine.scale_set:
            listed = self.inventory.scale_set_nics(machine.resource_group, machine.scale_set)
        else:
            listed = self.inventory.nics(_group_of_id(nic_id))
        return listed.get(nic_id.lower())

    def _public_reader(self, machine: Machine, *, batch: bool) -> PublicAddress:
        """How the machine's public IP addresses are read: a scale set VM's through its scale
        set (one GET, or the scale set's list in a refresh), others by ID (one GET, or the
        resource group's list)."""
        if machine.scale_set:
            return lambda pip_id: self._scale_set_public_ip(pip_id, batch)
        return self._listed_public_ip if batch else self.inventory.public_ip

    def _scale_set_public_ip(self, pip_id: str, batch: bool) -> str | None:
        where = scale_set_public_ip(pip_id)
        if where is None:
            log.warning("azure: failed to get VMSS Public IP with ID %s", pip_id)
            return None
        if not batch:
            return self.inventory.public_ip(pip_id)
        return address_of(self.inventory.scale_set_public_ips(*where).get(pip_id.lower()))

    def _listed_public_ip(self, pip_id: str) -> str | None:
        found = self.inventory.public_ips(_group_of_id(pip_id)).get(pip_id.lower())
        return address_of(found)
