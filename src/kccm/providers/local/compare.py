"""Read-compare-write for the local provider: whether what the state file holds already is
what a Service asks for, so an ensure, update or delete that would change nothing writes
nothing (and the data plane, which reloads on every write, is left alone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kccm.providers.local.backendsets import canonical_text
from kccm.providers.local.store import IPClaim, LoadBalancerRecord

__all__ = ["backends_are_current", "balancer_is_current", "nothing_to_delete"]


def balancer_is_current(
    current: LoadBalancerRecord | None,
    claims: Sequence[IPClaim],
    desired: LoadBalancerRecord,
    *,
    requested_ip: str | None,
    retain: bool,
) -> bool:
    """True when ``current`` (the stored row) and the service's ``claims`` already are what
    :meth:`LocalStore.ensure_load_balancer` would write for ``desired``: the one claim is the
    balancer's VIP (and the requested IP, if any) with the same retain flag, and every
    other field (ports, backends, health check, source ranges, affinity) is equal."""
    if current is None or len(claims) != 1:
        return False
    (claim,) = claims
    if claim.ip != current.vip or claim.retain != retain:
        return False
    if requested_ip and requested_ip != current.vip:
        return False
    return current.same_spec(replace(desired, vip=current.vip))


def backends_are_current(
    current: LoadBalancerRecord, backends: Sequence[Mapping[str, Any]]
) -> bool:
    """True when ``current`` already sends to exactly ``backends`` (compared as the state
    file's canonical JSON, which is remembered for the shared tuples: no per-node work)."""
    return canonical_text(current.backends) == canonical_text(backends)


def nothing_to_delete(
    current: LoadBalancerRecord | None,
    claims: Sequence[IPClaim],
    *,
    keep_claim: bool,
    shared: bool = False,
) -> bool:
    """True when :meth:`LocalStore.delete_load_balancer` would change nothing: no row, and
    no claim to free (or, keeping the claim, every claim already retained). A share group's
    claim (``shared``) is freed with its last row, never without one."""
    if current is not None:
        return False
    if shared:
        return True
    return all(claim.retain for claim in claims) if keep_claim else not claims
