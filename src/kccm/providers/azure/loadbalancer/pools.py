"""Backend pool membership: a Node's primary IP configuration joins the cluster's pool on its
network interface (availability-set and standalone VMs) or in its scale set's network profile
and the scale set VM (VMSS Uniform), as upstream does it (cloud-provider-azure v1.36.5
``azure_standard.go`` ``EnsureHostInPool``/``EnsureBackendPoolDeleted``, ``azure_vmss.go``
``ensureVMSSInPool``/``EnsureHostInPool``/``ensureBackendPoolDeletedFromNode``).

Which interfaces are in the pool is read from the balancer (``backendIPConfigurations``, which
ARM fills in), so an unchanged pool costs no call but one ``GET`` per new VM (its primary
interface, remembered after). A member whose VM is not one of the given Nodes leaves the pool,
unless every member would (upstream keeps a pool from being emptied that way).
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable, Iterable, Sequence

from kccm.cloudprovider import Node
from kccm.providers.azure.loadbalancer.armapi import ArmApi, read_modify_write
from kccm.providers.azure.loadbalancer.lbrules import Json
from kccm.providers.azure.loadbalancer.names import LBSettings

__all__ = ["PoolMembers", "exclusion", "pool_member_ids"]

_VM = re.compile(
    r"^azure://(/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
    r"virtualMachines/[^/]+)$",
    re.IGNORECASE,
)
_VMSS_VM = re.compile(
    r"^azure://((/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/"
    r"virtualMachineScaleSets/[^/]+)/virtualMachines/[^/]+)$",
    re.IGNORECASE,
)
_CONTROL_PLANE = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
_EXTERNAL_RG = "kubernetes.azure.com/resource-group"
_MANAGED = "kubernetes.azure.com/managed"


def _control_plane(node: Node) -> bool:
    """``isControlPlaneNode``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(key in labels for key in _CONTROL_PLANE) or labels.get("kubernetes.io/role") == (
        "master"
    )


def exclusion(node: Node, settings: LBSettings) -> str | None:
    """Why upstream keeps ``node`` out of the pool (``ShouldNodeExcludedFromLoadBalancer``'s
    labels, ``updateNodeCaches``, and ``excludeMasterFromStandardLB``), or None."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if "node.kubernetes.io/exclude-from-external-load-balancers" in labels:
        return "has label node.kubernetes.io/exclude-from-external-load-balancers"
    group = labels.get(_EXTERNAL_RG)
    if group is not None and str(group).lower() != settings.resource_group.lower():
        return f"label {_EXTERNAL_RG}={group} names another resource group"
    if str(labels.get(_MANAGED, "")).lower() == "false":
        return f"label {_MANAGED}=false"
    if settings.standard and settings.exclude_master_from_standard_lb and _control_plane(node):
        return "a control-plane Node (excludeMasterFromStandardLB)"
    return None


def pool_member_ids(lb: Json, pool_name: str) -> list[str]:
    """The IP configuration IDs ARM lists in the pool."""
    for pool in (lb.get("properties") or {}).get("backendAddressPools") or ():
        if str(pool.get("name", "")).lower() == pool_name.lower():
            configs = (pool.get("properties") or {}).get("backendIPConfigurations") or ()
            return [str(item.get("id", "")) for item in configs]
    return []


def _has_pool(ip_config: Json, pool_id: str) -> bool:
    pools = (ip_config.get("properties") or {}).get("loadBalancerBackendAddressPools") or ()
    return any(str(pool.get("id", "")).lower() == pool_id.lower() for pool in pools)


def _primary(configs: Sequence[Json]) -> Json | None:
    """``getPrimaryIPConfig``: the only one, or the one marked primary."""
    if len(configs) == 1:
        return configs[0]
    return next((c for c in configs if (c.get("properties") or {}).get("primary")), None)


def _lb_of(pool_id: str) -> str:
    return pool_id.lower().split("/backendaddresspools/")[0]


def _add_pool(ip_config: Json, pool_id: str, standard: bool) -> bool:
    """Add ``pool_id`` unless there or (standard SKU) already on another balancer."""
    props = ip_config.setdefault("properties", {})
    pools = list(props.get("loadBalancerBackendAddressPools") or ())
    if _has_pool(ip_config, pool_id):
        return False
    if standard and any(_lb_of(str(p.get("id", ""))) != _lb_of(pool_id) for p in pools):
        return False
    props["loadBalancerBackendAddressPools"] = [*pools, {"id": pool_id}]
    return True


def _drop_pool(ip_configs: Iterable[Json], pool_id: str) -> bool:
    changed = False
    for config in ip_configs:
        props = config.get("properties") or {}
        pools = list(props.get("loadBalancerBackendAddressPools") or ())
        kept = [p for p in pools if str(p.get("id", "")).lower() != pool_id.lower()]
        if len(kept) != len(pools):
            props["loadBalancerBackendAddressPools"] = kept
            changed = True
    return changed


def _nic_configs(body: Json) -> list[Json]:
    return list((body.get("properties") or {}).get("ipConfigurations") or ())


def _vmss_nic_configs(body: Json, *profile: str) -> list[Json]:
    """The scale set (VM)'s interface configurations under ``properties.<profile...>``."""
    node: Json = body.get("properties") or {}
    for key in profile:
        node = node.get(key) or {}
    return list(node.get("networkInterfaceConfigurations") or ())


def _vmss_primary_ip(configs: Sequence[Json]) -> Json | None:
    nic = _primary(configs)
    if nic is None:
        return None
    return _primary(list((nic.get("properties") or {}).get("ipConfigurations") or ()))


class PoolMembers:
    """Keeps one pool's members equal to the given Nodes' VMs."""

    def __init__(self, arm: ArmApi, settings: LBSettings) -> None:
        self.arm = arm
        self.settings = settings
        self._nics: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def _vm_nic(self, vm_id: str) -> tuple[str, str] | None:
        """The VM's primary interface ID (``getPrimaryInterfaceID``) and its availability
        set's name (``""`` for none), remembered."""
        with self._lock:
            if vm_id.lower() in self._nics:
                return self._nics[vm_id.lower()]
        vm = self.arm.get(vm_id)
        if vm is None:
            return None
        props = vm.get("properties") or {}
        refs = (props.get("networkProfile") or {}).get("networkInterfaces") or []
        primary = _primary(refs)
        if primary is None:
            return None
        aset = str((props.get("availabilitySet") or {}).get("id") or "").rsplit("/", 1)[-1]
        found = (str(primary["id"]), aset)
        with self._lock:
            self._nics[vm_id.lower()] = found
        return found

    def _in_vm_set(self, kind: str, vm_set: str) -> bool:
        """A Basic balancer takes the primary VM set's machines only
        (``getPrimaryInterfaceWithVMSet``, scale sets' ``EnsureHostInPool``; no check when
        the config names no primary set); with ``vmType: vmss``, no availability-set VM."""
        settings = self.settings
        if settings.standard:
            return True
        if settings.vm_type.lower() == "vmss" and kind == "nic":
            return False
        primary = settings.primary_vm_set
        return not primary or primary.lower() == vm_set.lower()

    def _owners(self, nodes: Sequence[Node]) -> dict[str, tuple[str, str]]:
        """Each wanted Node's member prefix -> (kind, resource ID)."""
        owners: dict[str, tuple[str, str]] = {}
        for node in nodes:
            if exclusion(node, self.settings) is not None:
                continue
            provider_id = str((node.get("spec") or {}).get("providerID") or "")
            vmss = _VMSS_VM.match(provider_id)
            if vmss is not None:
                scale_set = vmss.group(2).rsplit("/", 1)[-1]
                if self._in_vm_set("vmss", scale_set):
                    owners[vmss.group(1).lower() + "/"] = ("vmss", vmss.group(1))
                continue
            vm = _VM.match(provider_id)
            found = self._vm_nic(vm.group(1)) if vm is not None else None
            if found is not None and self._in_vm_set("nic", found[1]):
                owners[found[0].lower() + "/"] = ("nic", found[0])
        return owners

    def reconcile(self, lb: Json, pool_name: str, pool_id: str, nodes: Sequence[Node]) -> int:
        """Add the Nodes missing from the pool, remove members of other VMs; the number of
        resources written."""
        members = pool_member_ids(lb, pool_name)
        owners = self._owners(nodes)
        writes = 0
        scale_sets: set[str] = set()
        for prefix, (kind, resource) in owners.items():
            if any(member.lower().startswith(prefix) for member in members):
                continue
            if kind == "vmss":
                scale_set = resource.rsplit("/virtualMachines/", 1)[0]
                if scale_set not in scale_sets:
                    scale_sets.add(scale_set)
                    writes += self._join_scale_set(scale_set, pool_id)
            writes += self._join(kind, resource, pool_id)
        stale = [m for m in members if not any(m.lower().startswith(p) for p in owners)]
        if stale and len(stale) < len(members):
            writes += self.leave(stale, pool_id)
        return writes

    def _join(self, kind: str, resource: str, pool_id: str) -> int:
        standard = self.settings.standard

        def change(current: Json | None) -> Json | None:
            if current is None:
                return None
            body = copy.deepcopy(current)
            if kind == "nic":
                config = _primary(_nic_configs(body))
            else:
                config = _vmss_primary_ip(_vmss_nic_configs(body, "networkProfileConfiguration"))
            return body if config is not None and _add_pool(config, pool_id, standard) else None

        return int(read_modify_write(self.arm, resource, change)[1])

    def _join_scale_set(self, scale_set: str, pool_id: str) -> int:
        """``ensureVMSSInPool``: the pool in the scale set's model."""
        standard = self.settings.standard

        def change(current: Json | None) -> Json | None:
            if current is None:
                return None
            body = copy.deepcopy(current)
            configs = _vmss_nic_configs(body, "virtualMachineProfile", "networkProfile")
            config = _vmss_primary_ip(configs)
            return body if config is not None and _add_pool(config, pool_id, standard) else None

        return int(read_modify_write(self.arm, scale_set, change)[1])

    def leave(self, members: Iterable[str], pool_id: str, *, scale_sets: bool = False) -> int:
        """Take the members' interfaces (or scale set VMs) out of the pool; ``scale_sets``
        (the balancer goes): out of their scale sets' models too."""
        resources: set[str] = set()
        for member in members:
            end = member.lower().find("/ipconfigurations/")
            if end < 0:
                continue
            head = member[:end]
            if "/virtualmachinescalesets/" in head.lower():
                head = head[: head.lower().index("/networkinterfaces/")]
                if scale_sets:
                    resources.add(head[: head.lower().index("/virtualmachines/")])
            resources.add(head)
        writes = 0
        for resource in sorted(resources):
            writes += int(read_modify_write(self.arm, resource, self._leave_change(pool_id))[1])
        return writes

    @staticmethod
    def _leave_change(pool_id: str) -> Callable[[Json | None], Json | None]:
        def change(current: Json | None) -> Json | None:
            if current is None:
                return None
            body = copy.deepcopy(current)
            configs = _nic_configs(body)
            nics = _vmss_nic_configs(body, "networkProfileConfiguration")
            nics += _vmss_nic_configs(body, "virtualMachineProfile", "networkProfile")
            for nic in nics:
                configs += list((nic.get("properties") or {}).get("ipConfigurations") or ())
            return body if _drop_pool(configs, pool_id) else None

        return change
