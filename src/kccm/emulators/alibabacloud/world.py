"""What the Alibaba Cloud emulator holds: access keys, ECS instances with their primary network
interfaces, VPC route tables and entries, the SLB (:mod:`.slbmodel`), the NLB
(:mod:`.nlbmodel`), the request log and the faults not yet met."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from kccm.emulators.alibabacloud.nlbmodel import NlbWorld
from kccm.emulators.alibabacloud.slbmodel import SlbWorld

__all__ = ["Fault", "Instance", "RouteEntry", "RouteTable", "World"]


@dataclass
class Instance:
    """An ECS instance in a VPC, with its primary ENI."""

    id: str
    region: str
    zone: str
    vpc: str
    vswitch: str
    private_ip: str
    instance_type: str = "ecs.g7.large"
    status: str = "Running"
    public_ip: str = ""
    eni: str = ""
    secondary_ips: list[str] = field(default_factory=list)
    """More private IPs of the primary ENI (pod IPs, as ENI backends use them)."""
    source_dest_check: bool = True
    charge_type: str = "PostPaid"
    spot_strategy: str = "NoSpot"
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class RouteEntry:
    id: str
    cidr: str
    next_hop: str
    next_hop_type: str = "Instance"
    type: str = "Custom"
    status: str = "Available"


@dataclass
class RouteTable:
    id: str
    vpc: str
    region: str
    entries: list[RouteEntry] = field(default_factory=list)
    type: str = "System"


@dataclass
class Fault:
    """The next ``times`` calls of ``action`` (``*``: any; ``nlb:Action``: that product's
    only; 0 times: every one) answer ``code`` with HTTP ``status`` (after ``latency`` seconds;
    ``code`` empty: only the latency). An NLB write met by a fault without a ``code`` starts a
    job that answers ``Processing`` for ``job_reads`` reads (-1: the world's number) and then
    ``job_status`` (``Failed``; "" succeeds)."""

    action: str
    code: str = ""
    status: int = 400
    message: str = "injected by the emulator"
    times: int = 1
    latency: float = 0.0
    job_reads: int = -1
    job_status: str = ""


@dataclass
class World:
    region: str = "cn-hangzhou"
    keys: dict[str, str] = field(default_factory=lambda: {"kccm-ak": "kccm-secret"})
    """AccessKeyId -> AccessKeySecret."""
    role: str = "KubernetesWorkerRole"
    """The RAM role the metadata service hands credentials of."""
    metadata_instance: str = ""
    """The instance the metadata service answers for."""
    instances: dict[str, Instance] = field(default_factory=dict)
    route_tables: dict[str, RouteTable] = field(default_factory=dict)
    slb: SlbWorld = field(default_factory=SlbWorld)
    nlb: NlbWorld = field(default_factory=NlbWorld)
    page_size: int = 100
    requests: list[dict[str, Any]] = field(default_factory=list)
    seq: int = 0
    fault_list: list[Fault] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    call_fault: Fault | None = None
    """The fault the call being handled met (an NLB write's job reads it)."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def faults(self) -> list[Fault]:
        return self.fault_list

    def expire_tokens(self) -> int:
        """Every metadata-service token issued so far is refused from now on."""
        expired = len(self.tokens)
        self.tokens.clear()
        return expired

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):06d}{uuid.uuid4().hex[:12]}"

    def log(self, entry: dict[str, Any]) -> None:
        self.seq += 1
        self.requests.append({**entry, "seq": self.seq})

    def take_fault(self, action: str, product: str = "") -> Fault | None:
        for fault in self.fault_list:
            if fault.action in ("*", action, f"{product}:{action}"):
                if fault.times == 1:
                    self.fault_list.remove(fault)
                elif fault.times > 1:
                    fault.times -= 1
                return fault
        return None

    def state(self) -> dict[str, list[str]]:
        """What a leak check compares: every instance, route table and route entry, and the
        SLB's balancers, listeners, vServer groups, domain extensions and EIP bindings, the
        NLB's balancers, listeners, server groups and their servers."""
        return {
            "instances": sorted(self.instances),
            "route_tables": sorted(self.route_tables),
            "route_entries": sorted(
                f"{t.id}:{e.cidr}:{e.next_hop}"
                for t in self.route_tables.values()
                for e in t.entries
            ),
            **self.slb.state(),
            **self.nlb.state(),
        }
