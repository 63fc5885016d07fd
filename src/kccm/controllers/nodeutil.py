"""Node helpers shared by the cloud controllers (upstream ``cloud-provider/node/helpers`` and
``component-helpers/node/util``).

Mirrored upstream behaviour:

- :func:`add_or_update_taint_on_node` / :func:`remove_taint_off_node` (``taints.go``): taints
  match on key+effect; nothing is written when nothing changes; the write is a strategic merge
  patch of ``spec.taints`` that carries the node's resourceVersion (optimistic concurrency),
  retried on Conflict (5 steps of 100 ms, jitter 1.0);
- :func:`add_or_update_labels_on_node` (``labels.go``): a strategic merge label patch, retried on
  Conflict with the same backoff;
- :func:`patch_node_status` (``PatchNodeStatus``): a status-subresource patch whose addresses are
  *replaced*, never merged;
- :func:`set_node_condition` (``SetNodeCondition``): stamps ``lastHeartbeatTime`` and patches one
  condition through the status subresource;
- :func:`has_cloud_taint` (``getCloudTaint``): the node still carries the uninitialized taint;
- :func:`parse_node_ip_annotation` (``ParseNodeIPAnnotation``),
  :func:`get_node_addresses_from_node_ip` (``GetNodeAddressesFromNodeIP``) and
  :func:`node_addresses_change_detected`.

All sleeps go through the clock seam.
"""

from __future__ import annotations

import copy
import ipaddress
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kccm.api.wellknown import TAINT_UNINITIALIZED
from kccm.cloudprovider.metadata import ProviderIDError, get_instance_provider_id
from kccm.cloudprovider.nodes import node_name
from kccm.kube.errors import Conflict
from kccm.kube.interface import KubeClient, Obj, PatchType
from kccm.kube.resources import NODES
from kccm.util.clock import REAL_CLOCK, Clock

__all__ = [
    "UPDATE_LABEL_BACKOFF",
    "UPDATE_TAINT_BACKOFF",
    "Backoff",
    "IPAddress",
    "NodeIPError",
    "ProviderIDError",
    "add_or_update_labels_on_node",
    "add_or_update_taint_on_node",
    "format_time",
    "get_instance_provider_id",
    "get_node_addresses_from_node_ip",
    "get_node_condition",
    "has_cloud_taint",
    "node_addresses_change_detected",
    "node_name",
    "parse_ip_sloppy",
    "parse_node_ip_annotation",
    "patch_node_status",
    "remove_taint_off_node",
    "retry_on_conflict",
    "set_node_condition",
    "taint_matches",
    "taints_equal",
]

T = TypeVar("T")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


# -- retry on conflict ----------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """``wait.Backoff`` with Factor 0: ``steps`` attempts, ``duration`` (+ up to
    ``jitter`` * duration) between them."""

    steps: int
    duration: float
    jitter: float = 1.0

    def delay(self, rng: random.Random | None = None) -> float:
        r = (rng or random).random()
        return self.duration + (self.duration * self.jitter * r if self.jitter > 0 else 0.0)


UPDATE_TAINT_BACKOFF = Backoff(steps=5, duration=0.1, jitter=1.0)
UPDATE_LABEL_BACKOFF = Backoff(steps=5, duration=0.1, jitter=1.0)


async def retry_on_conflict(
    backoff: Backoff, fn: Callable[[], Awaitable[T]], *, clock: Clock = REAL_CLOCK
) -> T:
    """client-go ``retry.RetryOnConflict``: call ``fn`` up to ``backoff.steps`` times while it
    raises :class:`Conflict`; any other error (and the last Conflict) propagates."""
    for attempt in range(1, backoff.steps + 1):
        try:
            return await fn()
        except Conflict:
            if attempt >= backoff.steps:
                raise
        await clock.sleep(backoff.delay())
    raise AssertionError("unreachable")  # pragma: no cover


def format_time(clock: Clock) -> str:
    """``metav1.Time`` wire format (RFC 3339, second precision, UTC)."""
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


# -- taints ---------------------------------------------------------------------------------


def has_cloud_taint(node: Mapping[str, Any]) -> bool:
    """Upstream ``getCloudTaint``: any taint whose key is the uninitialized taint."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(t.get("key") == TAINT_UNINITIALIZED for t in taints)


def taint_matches(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """``Taint.MatchTaint``: same key and same effect (value is ignored)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def _taint_norm(t: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    return (
        str(t.get("key", "")),
        str(t.get("value") or ""),
        str(t.get("effect", "")),
        t.get("timeAdded") or None,
    )


def taints_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Semantic equality of two taints (absent value / timeAdded equal the zero value)."""
    return _taint_norm(a) == _taint_norm(b)


def _node_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or ()]


def _with_taint(taints: list[dict[str, Any]], taint: Mapping[str, Any]) -> tuple[list[Any], bool]:
    """``taintutils.AddOrUpdateTaint``: replace the key+effect match, or append."""
    result: list[dict[str, Any]] = []
    updated = False
    for existing in taints:
        if taint_matches(existing, taint):
            if taints_equal(existing, taint):
                return taints, False
            result.append(dict(taint))
            updated = True
        else:
            result.append(existing)
    if not updated:
        result.append(dict(taint))
    return result, True


def _without_taint(
    taints: list[dict[str, Any]], taint: Mapping[str, Any]
) -> tuple[list[Any], bool]:
    """``taintutils.RemoveTaint``: drop every taint matching key+effect."""
    kept = [t for t in taints if not taint_matches(t, taint)]
    return kept, len(kept) != len(taints)


async def _patch_node_taints(
    kube: KubeClient, node_name: str, old: Mapping[str, Any], taints: list[Any]
) -> None:
    """``PatchNodeTaints``: a strategic merge patch of spec.taints that carries the node's
    resourceVersion, so a concurrent writer makes it fail with Conflict."""
    patch = {
        "metadata": {"resourceVersion": (old.get("metadata") or {}).get("resourceVersion")},
        "spec": {"taints": taints or None},
    }
    await kube.patch(NODES, node_name, patch, patch_type=PatchType.STRATEGIC)


_TaintOp = Callable[[list[dict[str, Any]], Mapping[str, Any]], tuple[list[Any], bool]]


def _apply_each(
    op: _TaintOp, taints: tuple[Mapping[str, Any], ...], current: list[dict[str, Any]]
) -> tuple[list[Any], bool]:
    """``op`` applied for each of ``taints`` in turn; True when any of them changed the list."""
    any_update = False
    for taint in taints:
        current, updated = op(current, taint)
        any_update = any_update or updated
    return current, any_update


async def _change_taints(
    kube: KubeClient,
    node_name: str,
    op: _TaintOp,
    taints: tuple[Mapping[str, Any], ...],
    clock: Clock,
) -> bool:
    changed = False

    async def attempt() -> None:
        nonlocal changed
        node = await kube.get(NODES, node_name)
        result, updated = _apply_each(op, taints, _node_taints(node))
        if not updated:
            changed = False
            return
        await _patch_node_taints(kube, node_name, node, result)
        changed = True

    await retry_on_conflict(UPDATE_TAINT_BACKOFF, attempt, clock=clock)
    return changed


async def add_or_update_taint_on_node(
    kube: KubeClient,
    node_name: str,
    *taints: Mapping[str, Any],
    clock: Clock = REAL_CLOCK,
) -> bool:
    """Add each taint (replacing the key+effect match); no write when all are already there.

    Returns True when the node was patched.
    """
    if not taints:
        return False
    return await _change_taints(kube, node_name, _with_taint, taints, clock)


async def remove_taint_off_node(
    kube: KubeClient,
    node_name: str,
    node: Mapping[str, Any] | None,
    *taints: Mapping[str, Any],
    clock: Clock = REAL_CLOCK,
) -> bool:
    """Remove every taint matching one of ``taints`` on key+effect.

    When ``node`` (e.g. the cached copy) carries none of them, no API call is made at all.
    Returns True when the node was patched.
    """
    if not taints:
        return False
    if node is not None and not carries_taint(node, *taints):
        return False
    return await _change_taints(kube, node_name, _without_taint, taints, clock)


def carries_taint(node: Mapping[str, Any], *taints: Mapping[str, Any]) -> bool:
    """Whether ``node`` has a taint matching one of ``taints`` on key+effect (no copies)."""
    present = (node.get("spec") or {}).get("taints") or ()
    return any(taint_matches(t, want) for t in present for want in taints)


# -- labels ---------------------------------------------------------------------------------


async def add_or_update_labels_on_node(
    kube: KubeClient,
    node_name: str,
    labels: Mapping[str, str],
    *,
    clock: Clock = REAL_CLOCK,
) -> None:
    """``AddOrUpdateLabelsOnNode``: strategic merge patch of the changed labels, retried on
    Conflict (5 steps of 100 ms, jittered). Errors propagate to the caller."""

    async def attempt() -> None:
        node = await kube.get(NODES, node_name)
        current = (node.get("metadata") or {}).get("labels") or {}
        changed = {k: v for k, v in labels.items() if current.get(k) != v}
        if not changed:
            return
        await kube.patch(
            NODES, node_name, {"metadata": {"labels": changed}}, patch_type=PatchType.STRATEGIC
        )

    await retry_on_conflict(UPDATE_LABEL_BACKOFF, attempt, clock=clock)


# -- status ---------------------------------------------------------------------------------


def _merge_diff(old: Any, new: Any) -> Any:
    """A JSON merge patch (RFC 7386) turning ``old`` into ``new``; lists are replaced whole."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return copy.deepcopy(new)
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = copy.deepcopy(value)
        elif old[key] != value:
            patch[key] = _merge_diff(old[key], value)
    return patch


async def patch_node_status(
    kube: KubeClient, node_name: str, old: Mapping[str, Any], new: Mapping[str, Any]
) -> Obj:
    """``PatchNodeStatus``: patch the status subresource from ``old.status`` to ``new.status``.

    Addresses are *replaced*, not merged by type: upstream appends a ``{"$patch":"replace"}``
    element to a strategic merge patch; kccm sends the equivalent JSON merge patch, in which a
    list value always replaces the whole list (same result on the API server).
    """
    diff = _merge_diff(old.get("status") or {}, new.get("status") or {})
    return await kube.patch(
        NODES, node_name, {"status": diff}, patch_type=PatchType.MERGE, subresource="status"
    )


async def set_node_condition(
    kube: KubeClient,
    node_name: str,
    condition: Mapping[str, Any],
    *,
    clock: Clock = REAL_CLOCK,
) -> Obj:
    """``SetNodeCondition``: set ``lastHeartbeatTime`` to now and strategic-merge the one
    condition (merged by type) through the status subresource."""
    cond = dict(condition)
    cond["lastHeartbeatTime"] = format_time(clock)
    return await kube.patch(
        NODES,
        node_name,
        {"status": {"conditions": [cond]}},
        patch_type=PatchType.STRATEGIC,
        subresource="status",
    )


def get_node_condition(node: Mapping[str, Any], condition_type: str) -> dict[str, Any] | None:
    """The node's condition of ``condition_type``, or None (upstream ``GetNodeCondition``)."""
    cond = node_condition(node, condition_type)
    return None if cond is None else dict(cond)


def node_condition(node: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """:func:`get_node_condition` without the copy: the cached condition itself, read-only."""
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == condition_type:
            return cond  # type: ignore[no-any-return]
    return None


# -- node IPs and addresses -----------------------------------------------------------------


class NodeIPError(ValueError):
    """The provided-node-ip annotation is malformed or does not match the cloud addresses."""


def parse_ip_sloppy(text: str) -> IPAddress | None:
    """``netutils.ParseIPSloppy``: like Go's ``net.ParseIP`` but IPv4 octets may carry leading
    zeros (read as decimal). IPv4-mapped IPv6 addresses count as IPv4. None when invalid."""
    if not text or "%" in text or text.strip() != text:
        return None
    if ":" not in text:
        parts = text.split(".")
        if len(parts) != 4 or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        if any(int(p) > 255 for p in parts):
            return None
        return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))
    try:
        ip = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    return ip.ipv4_mapped or ip


def parse_node_ip_annotation(value: str) -> list[IPAddress]:
    """``ParseNodeIPAnnotation``: one IP, or a comma-separated dual-stack pair.

    Rejected (``NodeIPError``): any unparsable entry (no whitespace trimming, so ``""`` and
    ``"1.2.3.4, ::1"`` fail); more than two IPs; two IPs of the same family; a dual-stack pair
    containing ``0.0.0.0`` or ``::``.
    """
    ips: list[IPAddress] = []
    for item in value.split(","):
        ip = parse_ip_sloppy(item)
        if ip is None:
            raise NodeIPError(f"could not parse {_go_quote(item)}")
        ips.append(ip)
    if len(ips) > 2 or (len(ips) == 2 and ips[0].version == ips[1].version):
        raise NodeIPError("must contain either a single IP or a dual-stack pair of IPs")
    if len(ips) == 2 and (ips[0].is_unspecified or ips[1].is_unspecified):
        raise NodeIPError("dual-stack node IP cannot include '0.0.0.0' or '::'")
    return ips


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def get_node_addresses_from_node_ip(
    provided_node_ip: str, cloud_addresses: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """``GetNodeAddressesFromNodeIP``: for each annotation IP in order, every cloud address equal
    to it comes first (keeping its type); then every cloud address whose type matched none, in
    cloud order. So a matched type keeps only the node IP. Raises :class:`NodeIPError`."""
    try:
        node_ips = parse_node_ip_annotation(provided_node_ip)
    except NodeIPError as err:
        raise NodeIPError(f"failed to parse node IP {_go_quote(provided_node_ip)}: {err}") from err
    enforced: list[dict[str, str]] = []
    matched_types: set[str] = set()
    for node_ip in node_ips:
        matched = False
        for addr in cloud_addresses:
            if parse_ip_sloppy(str(addr.get("address", ""))) == node_ip:
                enforced.append(_address(addr))
                matched_types.add(str(addr.get("type", "")))
                matched = True
        if not matched:
            raise NodeIPError(
                f"failed to get node address from cloud provider that matches ip: {node_ip}"
            )
    enforced.extend(
        _address(a) for a in cloud_addresses if str(a.get("type", "")) not in matched_types
    )
    return enforced


def _address(addr: Mapping[str, Any]) -> dict[str, str]:
    return {"type": str(addr.get("type", "")), "address": str(addr.get("address", ""))}


def node_addresses_change_detected(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]
) -> bool:
    """``nodeAddressesChangeDetected``: true when the lengths differ or some new entry's address
    differs from the old address of its type (the last old value per type wins). A pure
    reordering is not a change."""
    old_list, new_list = list(old), list(new)
    if len(old_list) != len(new_list):
        return True
    by_type = {str(a.get("type", "")): str(a.get("address", "")) for a in old_list}
    return any(
        by_type.get(str(a.get("type", "")), "") != str(a.get("address", "")) for a in new_list
    )
