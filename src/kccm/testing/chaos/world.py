"""What the chaos bench needs from a provider's cloud (:class:`ChaosWorld`) and the verdict on
it (:func:`verdict`): every LoadBalancer Service with exactly one balancer that matches its
current spec and the current Nodes and whose address is in its status; no balancer without a
Service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kccm.kube.interface import Obj
from kccm.testing.chaos.leadership import Mutation

__all__ = ["Balancer", "ChaosWorld", "Verdict", "ingress_addresses", "verdict"]


@dataclass(frozen=True)
class Balancer:
    """A balancer as the cloud holds it, in provider-neutral terms."""

    name: str
    owner: str
    """``namespace/name`` of the Service it was made for (row column or tag)."""
    address: str
    """The VIP or DNS name a Service's status must show."""
    detail: Mapping[str, Any] = field(default_factory=dict)
    """What :meth:`ChaosWorld.stale` compares with the Service (ports, backends, ...)."""


class ChaosWorld(Protocol):
    """One provider's cloud for the bench."""

    provider: str
    annotation: str
    """An annotation that changes the balancer (the workload sets it to random values)."""

    def cloud_config(self) -> Path: ...

    def env_for(self, index: int) -> Mapping[str, str]:
        """Process ``index``'s environment (its own credentials where the cloud has any)."""
        ...

    def daemon_flags(self) -> Sequence[str]: ...

    def annotation_value(self, pick: int) -> str: ...

    def service_annotations(self) -> Mapping[str, str]: ...

    def new_node(self) -> Obj | None:
        """A Node to register (None: none free right now)."""
        ...

    def node_deleted(self, name: str) -> None: ...

    def balancers(self) -> list[Balancer]:
        """Every balancer of this cluster in the cloud (blocking: call in a thread)."""
        ...

    def stale(self, service: Obj, nodes: Sequence[Obj], balancer: Balancer) -> list[str]:
        """How ``balancer`` differs from what ``service`` and ``nodes`` ask for."""
        ...

    def other_leftovers(self, services: Sequence[Obj]) -> list[str]:
        """Cloud objects besides balancers that no Service accounts for (claims, groups)."""
        ...

    def mutations(self, logs: Mapping[int, Path]) -> list[Mutation]:
        """Every mutating cloud call, attributed to a process of the fleet."""
        ...

    def made_and_deleted(self, mutations: Sequence[Mutation]) -> tuple[int, int]:
        """Balancers created and deleted, from the mutations."""
        ...

    def close(self) -> None: ...


def ingress_addresses(service: Obj) -> list[str]:
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(i.get("ip") or i.get("hostname") or "") for i in ingress]


def _key(service: Obj) -> str:
    meta = service["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


@dataclass
class Verdict:
    without: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    """Services still being deleted, Nodes not yet initialised: not converged yet."""

    @property
    def clean(self) -> bool:
        return not (self.without or self.duplicated or self.stale or self.leaked or self.pending)

    def counts(self) -> dict[str, int]:
        return {
            "without": len(self.without),
            "duplicated": len(self.duplicated),
            "stale": len(self.stale),
            "leaked": len(self.leaked),
            "pending": len(self.pending),
        }


def verdict(
    world: ChaosWorld,
    services: Sequence[Obj],
    nodes: Sequence[Obj],
    balancers: Sequence[Balancer],
    other_leftovers: Sequence[str],
) -> Verdict:
    """Judge the cloud against the Services (of the bench's namespace) and Nodes."""
    found = Verdict()
    found.pending += [
        f"terminating {_key(s)}" for s in services if s["metadata"].get("deletionTimestamp")
    ]
    found.pending += [
        f"uninitialised node {n['metadata']['name']}"
        for n in nodes
        if not (n.get("spec") or {}).get("providerID")
    ]
    wanted = {
        _key(s): s
        for s in services
        if (s.get("spec") or {}).get("type") == "LoadBalancer"
        and not s["metadata"].get("deletionTimestamp")
    }
    by_owner: dict[str, list[Balancer]] = {}
    for balancer in balancers:
        by_owner.setdefault(balancer.owner, []).append(balancer)
    for key, service in sorted(wanted.items()):
        owned = by_owner.get(key, [])
        current = [b for b in owned if b.name == _uid_name(service)]
        if len(owned) > 1:  # two balancers for one Service (also one of an earlier UID)
            found.duplicated.append(f"{key}: {[b.name for b in owned]}")
        if not current:
            found.without.append(key)
            continue
        balancer = current[0]
        problems = world.stale(service, nodes, balancer)
        if ingress_addresses(service) != [balancer.address]:
            problems.append(f"status {ingress_addresses(service)} != {balancer.address}")
        if problems:
            found.stale.append(f"{key}: {'; '.join(problems)}")
    found.leaked += [
        f"{b.name} ({owner})"
        for owner, theirs in sorted(by_owner.items())
        if owner not in wanted
        for b in theirs
    ]
    found.leaked += list(other_leftovers)
    return found


def _uid_name(service: Obj) -> str:
    """Upstream's default balancer name: ``a`` + the UID without dashes, 32 characters."""
    return ("a" + str(service["metadata"].get("uid", ""))).replace("-", "")[:32]
