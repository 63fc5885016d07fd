"""What the emulator's NLB (API ``2022-04-30``) holds: network load balancers with their zone
mappings (a vSwitch and an allocated address per zone), listeners, server groups with their
servers, and the asynchronous jobs the writes start.

A job is ``Processing`` for its first ``reads`` reads, then settles (``Succeeded``, or
``Failed`` when a fault said so) and its resource leaves its transitional status
(``Provisioning``/``Configuring``/``Creating``...). A read is a ``GetJobStatus`` or
``ListAsynJobs`` naming the job, or any answer that shows the resource the job changes; so with
``reads`` 1 (the default) the first look says the work is under way and the next one that it is
done, whoever looks. A failed create leaves nothing behind; other changes are not rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "Job",
    "NlbBalancer",
    "NlbListener",
    "NlbWorld",
    "ServerGroup",
    "ServerMember",
    "ZoneMapping",
]


@dataclass
class ZoneMapping:
    zone: str
    vswitch: str
    private_ip: str
    eni: str
    allocation: str = ""
    """An EIP's allocation ID (an internet balancer's public address); "" intranet."""
    public_ip: str = ""


@dataclass
class NlbBalancer:
    id: str
    region: str
    name: str
    vpc: str
    address_type: str = "Internet"
    ip_version: str = "ipv4"
    ipv6_type: str = "Intranet"
    status: str = "Active"
    resource_group: str = "rg-default"
    zones: list[ZoneMapping] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)
    cross_zone: bool = True
    bandwidth_package: str = ""
    deletion_protection: bool = False
    deletion_reason: str = ""
    modification_status: str = "NonProtection"
    modification_reason: str = ""
    created: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def dns_name(self) -> str:
        return f"{self.id}.{self.region}.nlb.aliyuncsslb.com"


@dataclass
class NlbListener:
    id: str
    lb: str
    protocol: str
    port: int
    group: str
    status: str = "Running"
    description: str = ""
    start_port: int = 0
    end_port: int = 0
    fields: dict[str, str] = field(default_factory=dict)
    """Every other parameter as last sent (``IdleTimeout``, ``Cps``, ``CertificateIds.1``...)."""
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class ServerMember:
    """A server group member; ``(server_id, server_ip, port)`` names it."""

    server_id: str
    server_type: str
    port: int
    server_ip: str = ""
    weight: int = 100
    description: str = ""
    status: str = "Available"

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.server_id, self.server_ip, self.port)


@dataclass
class ServerGroup:
    id: str
    region: str
    name: str
    vpc: str
    type: str = "Instance"
    protocol: str = "TCP"
    status: str = "Available"
    fields: dict[str, str] = field(default_factory=dict)
    """``Scheduler``, ``HealthCheckConfig.*``, ``ConnectionDrain*``... as last sent."""
    servers: list[ServerMember] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    id: str
    action: str
    resource: str
    reads: int
    """How many more reads answer ``Processing``."""
    fails: bool = False
    status: str = "Processing"
    settle: Callable[[bool], None] | None = None
    """Called once with ``True`` (succeeded) or ``False`` (failed)."""


@dataclass
class NlbWorld:
    balancers: dict[str, NlbBalancer] = field(default_factory=dict)
    listeners: dict[str, NlbListener] = field(default_factory=dict)
    groups: dict[str, ServerGroup] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)
    job_reads: int = 1
    """How many reads a new job answers ``Processing`` (a fault may say otherwise)."""
    client_tokens: dict[str, str] = field(default_factory=dict)
    addresses: int = 0

    def pending(self, resource: str) -> list[Job]:
        return [
            j for j in self.jobs.values() if j.resource == resource and j.status == "Processing"
        ]

    def state(self) -> dict[str, list[str]]:
        return {
            "nlb_balancers": sorted(self.balancers),
            "nlb_listeners": sorted(
                f"{i.lb}:{i.port}/{i.protocol}" for i in self.listeners.values()
            ),
            "nlb_server_groups": sorted(self.groups),
            "nlb_servers": sorted(
                f"{g.id}:{m.server_id}:{m.port}" for g in self.groups.values() for m in g.servers
            ),
        }
