"""A vCenter's VMs and their ancestors, read with one PropertyCollector retrieval.

Upstream looks each VM up on its own (``SearchIndex.FindByUuid`` / ``FindAllByDnsName`` /
``FindByIp`` per datacenter, then ``vm.Properties``, then ``mo.Ancestors`` per zone lookup:
``connectionmanager/search.go``, ``nodemanager.go`` ``DiscoverNode``, ``zones.go``). kccm reads
every VM of the configured datacenters, with the names and parents of every inventory object,
in one ``RetrievePropertiesEx`` over a ``ContainerView`` (plus its continuation pages), and
answers lookups from that snapshot for a few seconds: initialising or refreshing 1,000 nodes
costs a handful of calls instead of several per node.

A VM missing from the snapshot is confirmed absent with ``SearchIndex.FindByUuid`` in each
datacenter before anyone is told it is gone (only a sure "gone" may delete a Node). A configured
datacenter the vCenter does not have is an error, as upstream ``vclib.GetDatacenter``
(``finder.Datacenter``: ``datacenter 'DC9' not found``) makes it in ``WhichVCandDCByNodeID``
(``connectionmanager/search.go``): a VM found in another datacenter is still found, but "not
found" can no longer be said (issue 25: a typo in a datacenter name deleted Nodes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim, vmodl

from kccm.providers.vsphere.session import VCenterSession, VSphereAPIError

__all__ = ["DatacenterNotFound", "GuestNic", "Inventory", "Snapshot", "VMInfo"]

PC: Any = vmodl.query.PropertyCollector  # pyvmomi's stubs leave these untyped

VM_PROPERTIES = (
    "name",
    "parent",
    "config.uuid",
    "config.extraConfig",
    "guest.hostName",
    "guest.net",
    "runtime.powerState",
    "runtime.host",
    "resourcePool",
    "summary.config.guestId",
    "summary.config.numCpu",
    "summary.config.memorySizeMB",
)
PAGE_SIZE = 500
GUESTINFO_KEYS = ("guestinfo.metadata", "guestinfo.metadata.encoding")


class DatacenterNotFound(VSphereAPIError):
    """A configured datacenter the vCenter does not have (upstream ``find.NotFoundError``)."""

    def __init__(self, tenant: str, missing: Iterable[str]) -> None:
        names = ", ".join(f"datacenter '{name}' not found" for name in missing)
        super().__init__(f"vCenter {tenant}: {names}", "NotFound")


@dataclass(frozen=True)
class GuestNic:
    network: str
    addresses: tuple[str, ...]
    device_config_id: int


@dataclass(frozen=True)
class VMInfo:
    """What kccm needs of one VM (``NodeInfo`` upstream)."""

    vcenter: str
    moref: str
    name: str
    uuid: str
    hostname: str
    power_state: str
    guest_id: str
    num_cpu: int
    memory_mb: int
    nics: tuple[GuestNic, ...]
    guestinfo: Mapping[str, str]
    datacenter: str
    chains: tuple[tuple[tuple[str, str], ...], ...]
    """Ancestor chains for the zone lookup, each from the object up to the root folder, as
    ``(type, moref)``: the host's, the resource pool's, the VM's folders'."""


@dataclass
class Snapshot:
    taken: float
    vms: list[VMInfo] = field(default_factory=list)
    by_uuid: dict[str, VMInfo] = field(default_factory=dict)
    by_name: dict[str, list[VMInfo]] = field(default_factory=dict)
    by_ip: dict[str, VMInfo] = field(default_factory=dict)
    datacenters: dict[str, str] = field(default_factory=dict)
    """Datacenter name -> moref."""
    unresolved: DatacenterNotFound | None = None
    """The configured datacenters the vCenter does not have, as an error; a lookup that finds
    nothing raises it, for the VM may be in one of them."""

    def add(self, vm: VMInfo) -> None:
        self.vms.append(vm)
        self.by_uuid.setdefault(vm.uuid, vm)
        if vm.hostname:
            self.by_name.setdefault(vm.hostname.lower(), []).append(vm)
        for nic in vm.nics:
            for address in nic.addresses:
                self.by_ip.setdefault(address, vm)


@dataclass
class _Entity:
    type: str
    name: str
    parent: str


def _moid(ref: Any) -> str:
    return str(ref._moId) if ref is not None else ""


def _type(ref: Any) -> str:
    return str(ref._wsdlName)


def _nics(net: Iterable[Any] | None) -> tuple[GuestNic, ...]:
    return tuple(
        GuestNic(
            network=str(n.network or ""),
            addresses=tuple(str(a) for a in (n.ipAddress or ())),
            device_config_id=int(n.deviceConfigId if n.deviceConfigId is not None else -1),
        )
        for n in net or ()
    )


def _guestinfo(extra: Iterable[Any] | None) -> dict[str, str]:
    return {str(o.key): str(o.value) for o in extra or () if o.key in GUESTINFO_KEYS and o.value}


def _chain(start: str, entities: Mapping[str, _Entity]) -> tuple[tuple[str, str], ...]:
    chain: list[tuple[str, str]] = []
    seen: set[str] = set()
    current = start
    while current and current in entities and current not in seen:
        seen.add(current)
        chain.append((entities[current].type, current))
        current = entities[current].parent
    return tuple(chain)


def _datacenter(chain: Iterable[tuple[str, str]], entities: Mapping[str, _Entity]) -> str:
    for kind, moref in chain:
        if kind == "Datacenter":
            return entities[moref].name
    return ""


class Inventory:
    """Snapshots of one vCenter's VMs, shared by every thread."""

    def __init__(self, session: VCenterSession, *, max_age: float) -> None:
        self.session = session
        self.max_age = max_age
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._clock: Callable[[], float] = time.monotonic

    @property
    def tenant(self) -> str:
        return self.session.vc.tenant_ref

    def snapshot(self, max_age: float | None = None) -> Snapshot:
        """A snapshot no older than ``max_age`` seconds (the configured age by default)."""
        limit = self.max_age if max_age is None else max_age
        with self._lock:
            current = self._snapshot
            if current is not None and self._clock() - current.taken <= limit:
                return current
            fresh = self._take()
            self._snapshot = fresh
            return fresh

    def invalidate(self) -> None:
        with self._lock:
            self._snapshot = None

    def _take(self) -> Snapshot:
        taken = self._clock()
        objects = self.session.call("read the VM inventory", self._retrieve)
        entities: dict[str, _Entity] = {}
        vms: list[tuple[str, dict[str, Any]]] = []
        for obj, props in objects:
            moref = _moid(obj)
            entities[moref] = _Entity(_type(obj), str(props.get("name", "")), "")
            entities[moref].parent = _moid(props.get("parent"))
            if isinstance(obj, vim.VirtualMachine):
                vms.append((moref, props))
        snap = Snapshot(taken=taken)
        snap.datacenters = {e.name: m for m, e in entities.items() if e.type == "Datacenter"}
        wanted = set(self.session.vc.datacenters)
        if missing := sorted(wanted - snap.datacenters.keys()):
            snap.unresolved = DatacenterNotFound(self.tenant, missing)
        for moref, props in vms:
            vm = self._vm(moref, props, entities)
            if vm.uuid and (not wanted or vm.datacenter in wanted):
                snap.add(vm)
        return snap

    def _vm(self, moref: str, props: Mapping[str, Any], entities: Mapping[str, _Entity]) -> VMInfo:
        host = _moid(props.get("runtime.host"))
        pool = _moid(props.get("resourcePool"))
        chains = tuple(c for c in (_chain(host, entities), _chain(pool, entities)) if c)
        own = _chain(moref, entities)
        return VMInfo(
            vcenter=self.tenant,
            moref=moref,
            name=str(props.get("name", "")),
            uuid=str(props.get("config.uuid") or "").strip().lower(),
            hostname=str(props.get("guest.hostName") or ""),
            power_state=str(props.get("runtime.powerState") or ""),
            guest_id=str(props.get("summary.config.guestId") or ""),
            num_cpu=int(props.get("summary.config.numCpu") or 0),
            memory_mb=int(props.get("summary.config.memorySizeMB") or 0),
            nics=_nics(props.get("guest.net")),
            guestinfo=_guestinfo(props.get("config.extraConfig")),
            datacenter=_datacenter(own, entities),
            chains=(*chains, own),
        )

    @staticmethod
    def _retrieve(content: Any) -> list[tuple[Any, dict[str, Any]]]:
        view = content.viewManager.CreateContainerView(
            content.rootFolder, [vim.ManagedEntity], True
        )
        try:
            spec = PC.FilterSpec(
                objectSet=[
                    PC.ObjectSpec(
                        obj=view,
                        skip=True,
                        selectSet=[
                            PC.TraversalSpec(
                                name="view", path="view", skip=False, type=vim.view.ContainerView
                            )
                        ],
                    )
                ],
                propSet=[
                    PC.PropertySpec(type=vim.VirtualMachine, pathSet=list(VM_PROPERTIES)),
                    PC.PropertySpec(type=vim.ManagedEntity, pathSet=["name", "parent"]),
                ],
            )
            collector = content.propertyCollector
            result = collector.RetrievePropertiesEx(
                [spec], PC.RetrieveOptions(maxObjects=PAGE_SIZE)
            )
            out: list[tuple[Any, dict[str, Any]]] = [
                (content.rootFolder, {"name": "Datacenters", "parent": None})
            ]
            while result is not None:
                out.extend(
                    (oc.obj, {p.name: p.val for p in oc.propSet or ()}) for oc in result.objects
                )
                token = result.token
                result = collector.ContinueRetrievePropertiesEx(token) if token else None
            return out
        finally:
            view.DestroyView()

    # -- confirming absence ---------------------------------------------------------------------

    def confirm_absent(self, uuid: str) -> bool:
        """True when ``SearchIndex.FindByUuid`` finds no VM with ``uuid`` in any datacenter."""

        def search(content: Any) -> bool:
            for dc in self._datacenters(content):
                if content.searchIndex.FindByUuid(dc, uuid, True, False) is not None:
                    return False
            return True

        return self.session.call("find a VM by UUID", search)

    def _datacenters(self, content: Any) -> list[Any]:
        """The configured datacenters (by moref from the last snapshot), or ``None``: all;
        :class:`DatacenterNotFound` when one of them is not in the vCenter."""
        wanted = self.session.vc.datacenters
        if not wanted:
            return [None]
        snap = self.snapshot()
        if snap.unresolved is not None:  # never "absent" from a datacenter nobody searched
            raise snap.unresolved
        stub = content.rootFolder._stub
        datacenter: Any = vim.Datacenter
        return [datacenter(snap.datacenters[name], stub) for name in wanted]
