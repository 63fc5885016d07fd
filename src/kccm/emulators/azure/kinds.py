"""The resource types the emulator serves, and what each does beyond storing its body: the
checks and defaults of a PUT (``prepare``), what happens when the PUT's operation completes
(``finish``), what is computed on read (``render``), and the checks and clean-up of a DELETE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kccm.emulators.azure import compute, network, network_lb, network_sec
from kccm.emulators.azure.world import Obj, World

__all__ = ["KINDS", "Kind", "kind_of_type"]

Prepare = Callable[[World, Obj, "Obj | None"], None]
Hook = Callable[[World, Obj], None]
Render = Callable[[World, Obj, bool], None]


def _no_prepare(world: World, obj: Obj, old: Obj | None) -> None:
    return None


def _no_hook(world: World, obj: Obj) -> None:
    return None


def _no_render(world: World, obj: Obj, expand: bool) -> None:
    return None


@dataclass(frozen=True)
class Kind:
    namespace: str
    type: str
    children: tuple[str, ...] = ()  # inline arrays under properties, each item with an id
    writable_children: tuple[str, ...] = ()  # children with PUT/DELETE of their own
    prepare: Prepare = _no_prepare
    finish: Hook = _no_hook
    render: Render = _no_render
    check_delete: Hook = _no_hook
    deleted: Hook = _no_hook
    lro: bool = True  # PUT and DELETE are long-running (availability sets' are not)
    sync_put: bool = False  # a PUT completes at once, no operation to poll (NICs')
    put_updates: bool = False  # a PUT on an existing one merges into it (Compute's VMs, sets)

    @property
    def full_type(self) -> str:
        return f"{self.namespace}/{self.type}"

    @property
    def compute(self) -> bool:
        return self.namespace == "Microsoft.Compute"

    def child_prop(self, segment: str) -> str | None:
        """The inline array a path segment names (``subnets`` -> ``subnets``), any case."""
        return next((c for c in self.children if c.lower() == segment.lower()), None)


def _vmss_deleted(world: World, obj: Obj) -> None:
    for vm in compute.instances_of(world, obj):
        compute.drop_instance(world, vm)


def _vmss_finish(world: World, obj: Obj) -> None:
    compute.reconcile_capacity(world, obj)


NETWORK = "Microsoft.Network"
COMPUTE = "Microsoft.Compute"

_ALL = (
    Kind(
        NETWORK,
        "loadBalancers",
        children=network_lb.LB_CHILDREN,
        writable_children=("backendAddressPools",),
        prepare=network_lb.prepare_lb,
        render=network_lb.render_lb,
        check_delete=network_lb.check_delete_lb,
        deleted=network_lb.deleted_lb,
    ),
    Kind(
        NETWORK,
        "publicIPAddresses",
        prepare=network.prepare_public_ip,
        finish=network.finish_public_ip,
        render=network.render_public_ip,
        check_delete=network.check_delete_public_ip,
        deleted=network.release_public_ip,
    ),
    Kind(
        NETWORK,
        "networkInterfaces",
        children=("ipConfigurations",),
        sync_put=True,
        prepare=network.prepare_nic,
        render=network.render_nic,
        check_delete=network.check_delete_nic,
    ),
    Kind(
        NETWORK,
        "networkSecurityGroups",
        children=("securityRules",),
        writable_children=("securityRules",),
        prepare=network_sec.prepare_nsg,
        render=network_sec.render_nsg,
    ),
    Kind(
        NETWORK,
        "routeTables",
        children=("routes",),
        writable_children=("routes",),
        prepare=network_sec.prepare_route_table,
        render=network_sec.render_route_table,
    ),
    Kind(
        NETWORK,
        "virtualNetworks",
        children=("subnets",),
        writable_children=("subnets",),
        prepare=network_sec.prepare_vnet,
        check_delete=network_sec.check_delete_vnet,
    ),
    Kind(
        COMPUTE,
        "virtualMachines",
        put_updates=True,
        prepare=compute.prepare_vm,
        render=compute.render_vm,
    ),
    Kind(
        COMPUTE,
        "availabilitySets",
        lro=False,
        prepare=compute.prepare_availability_set,
        render=compute.render_availability_set,
    ),
    Kind(
        COMPUTE,
        "virtualMachineScaleSets",
        put_updates=True,
        prepare=compute.prepare_vmss,
        finish=_vmss_finish,
        deleted=_vmss_deleted,
    ),
    Kind(
        COMPUTE,
        "virtualMachineScaleSets/virtualMachines",
        render=compute.render_vmss_vm,
        deleted=compute.vmss_vm_deleted,
    ),
)

KINDS: dict[tuple[str, str], Kind] = {(k.namespace.lower(), k.type.lower()): k for k in _ALL}


def kind_of_type(full_type: str) -> Kind | None:
    """The kind of a stored resource's ``type`` (``Microsoft.Network/loadBalancers``)."""
    namespace, _, type_ = full_type.partition("/")
    return KINDS.get((namespace.lower(), type_.lower()))
