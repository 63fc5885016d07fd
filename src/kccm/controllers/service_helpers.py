"""Pure helpers of the service load-balancer controller (upstream ``controllers/service``).

Which services the controller manages (:func:`wants_load_balancer`, :func:`needs_cleanup`,
:func:`needs_update`), which nodes back a load balancer (the *stable node set* predicates),
when a node change is worth a node sync (:func:`should_sync_updated_node`,
:func:`nodes_sufficiently_equal`) and the exact shape of the strategic-merge patches upstream's
``servicehelper.PatchService`` sends (:func:`finalizer_patch`, :func:`status_patch`).
Objects are JSON-shaped mappings and are never modified here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kccm.api.wellknown import (
    FINALIZER_LB_CLEANUP,
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
)
from kccm.cloudprovider.types import LoadBalancerStatus

__all__ = [
    "MAX_NODE_NAMES_TO_LOG",
    "STABLE_NODE_SET_PREDICATES",
    "NodePredicate",
    "UpdateReason",
    "filter_with_predicates",
    "finalizer_patch",
    "has_lb_finalizer",
    "load_balancer_status_equal",
    "loggable_node_names",
    "needs_cleanup",
    "needs_update",
    "node_included",
    "node_not_deleted",
    "node_untainted",
    "nodes_sufficiently_equal",
    "parse_go_bool",
    "ports_equal_for_lb",
    "respects_predicates",
    "service_key",
    "should_sync_updated_node",
    "status_patch",
    "wants_load_balancer",
]

MAX_NODE_NAMES_TO_LOG = 20
"""Upstream ``maxNodeNamesToLog``: node names in an UpdateLoadBalancerFailed event."""

LOAD_BALANCER = "LoadBalancer"

NodePredicate = Callable[[Mapping[str, Any]], bool]

UpdateReason = tuple[str, str]
"""An informational ``(reason, message)`` event ``needsUpdate`` records on the new service."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def service_key(service: Mapping[str, Any]) -> str:
    """``namespace/name`` (client-go ``MetaNamespaceKeyFunc``)."""
    meta = _meta(service)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# -- which services are ours ------------------------------------------------------------------


def wants_load_balancer(service: Mapping[str, Any]) -> bool:
    """``type: LoadBalancer`` and no ``loadBalancerClass`` key at all (even ``""`` means
    another implementation owns it), as upstream ``wantsLoadBalancer``."""
    spec = _spec(service)
    return spec.get("type") == LOAD_BALANCER and spec.get("loadBalancerClass") is None


def has_lb_finalizer(service: Mapping[str, Any]) -> bool:
    return FINALIZER_LB_CLEANUP in (_meta(service).get("finalizers") or ())


def needs_cleanup(service: Mapping[str, Any]) -> bool:
    """The cleanup finalizer is present and the service is being deleted or is no longer
    ``type: LoadBalancer`` (upstream ``needsCleanup``)."""
    if not has_lb_finalizer(service):
        return False
    if _meta(service).get("deletionTimestamp"):
        return True
    return _spec(service).get("type") != LOAD_BALANCER


_PORT_FIELDS = ("name", "protocol", "port", "nodePort", "targetPort", "appProtocol")


def _port_view(port: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(port.get(field) for field in _PORT_FIELDS)


def ports_equal_for_lb(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Same number of ports and, in order, the same name, protocol, port, nodePort,
    targetPort and appProtocol (upstream ``portsEqualForLB``)."""
    old_ports = _spec(old).get("ports") or []
    new_ports = _spec(new).get("ports") or []
    if len(old_ports) != len(new_ports):
        return False
    return all(_port_view(a) == _port_view(b) for a, b in zip(old_ports, new_ports, strict=True))


def _go_list(value: Sequence[Any] | None) -> str:
    """Go's ``%v`` of a slice: ``[a b]``."""
    return "[" + " ".join(str(v) for v in value or ()) + "]"


def _external_ips_reason(old: Mapping[str, Any], new: Mapping[str, Any]) -> UpdateReason | None:
    old_ips = _spec(old).get("externalIPs") or []
    new_ips = _spec(new).get("externalIPs") or []
    if len(old_ips) != len(new_ips):
        return ("ExternalIP", f"Count: {len(old_ips)} -> {len(new_ips)}")
    for before, after in zip(old_ips, new_ips, strict=True):
        if before != after:
            return ("ExternalIP", f"Added: {after}")
    return None


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], field: str) -> bool:
    return _spec(old).get(field) != _spec(new).get(field)


def _arrow(old: Mapping[str, Any], new: Mapping[str, Any], field: str, default: Any = "") -> str:
    return f"{_spec(old).get(field, default)} -> {_spec(new).get(field, default)}"


def needs_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> tuple[bool, UpdateReason | None]:
    """Upstream ``needsUpdate``: whether an informer update is worth a sync, and the
    informational event upstream records for some of the reasons (``Type``,
    ``LoadBalancerSourceRanges``, ``LoadbalancerIP``, ``ExternalIP``, ``UID``,
    ``ExternalTrafficPolicy``, ``HealthCheckNodePort``, ``IPFamilies``)."""
    old_wants, new_wants = wants_load_balancer(old), wants_load_balancer(new)
    if not old_wants and not new_wants:
        return False, None
    if old_wants != new_wants:
        return True, ("Type", _arrow(old, new, "type"))
    for check in _UPDATE_CHECKS:
        verdict = check(old, new)
        if verdict is not None:
            return verdict
    return False, None


_Verdict = tuple[bool, UpdateReason | None] | None


def _check_source_ranges(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    before = _spec(old).get("loadBalancerSourceRanges")
    after = _spec(new).get("loadBalancerSourceRanges")
    if (before or None) != (after or None):
        message = f"{_go_list(before)} -> {_go_list(after)}"
        return True, ("LoadBalancerSourceRanges", message)
    return None


def _check_ports_and_affinity(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    if not ports_equal_for_lb(old, new) or _changed(old, new, "sessionAffinity"):
        return True, None
    if _changed(old, new, "sessionAffinityConfig"):
        return True, None
    return None


def _check_load_balancer_ip(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    if _spec(old).get("loadBalancerIP", "") != _spec(new).get("loadBalancerIP", ""):
        return True, ("LoadbalancerIP", _arrow(old, new, "loadBalancerIP"))
    return None


def _check_external_ips(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    reason = _external_ips_reason(old, new)
    return None if reason is None else (True, reason)


def _check_annotations(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    if (_meta(old).get("annotations") or {}) != (_meta(new).get("annotations") or {}):
        return True, None
    return None


def _check_uid(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    before, after = _meta(old).get("uid", ""), _meta(new).get("uid", "")
    if before != after:
        return True, ("UID", f"{before} -> {after}")
    return None


def _check_traffic_policy(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    if _spec(old).get("externalTrafficPolicy", "") != _spec(new).get("externalTrafficPolicy", ""):
        return True, ("ExternalTrafficPolicy", _arrow(old, new, "externalTrafficPolicy"))
    if _spec(old).get("healthCheckNodePort", 0) != _spec(new).get("healthCheckNodePort", 0):
        return True, ("HealthCheckNodePort", _arrow(old, new, "healthCheckNodePort", 0))
    return None


def _check_ip_families(old: Mapping[str, Any], new: Mapping[str, Any]) -> _Verdict:
    before = len(_spec(old).get("ipFamilies") or ())
    after = len(_spec(new).get("ipFamilies") or ())
    if before != after:
        return True, ("IPFamilies", f"Count: {before} -> {after}")
    return None


_UPDATE_CHECKS: tuple[Callable[[Mapping[str, Any], Mapping[str, Any]], _Verdict], ...] = (
    _check_source_ranges,
    _check_ports_and_affinity,
    _check_load_balancer_ip,
    _check_external_ips,
    _check_annotations,
    _check_uid,
    _check_traffic_policy,
    _check_ip_families,
)


# -- which nodes back a load balancer ---------------------------------------------------------


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_go_bool(value: str) -> bool:
    """Go's ``strconv.ParseBool``; raises ValueError for anything else (``""`` included)."""
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{value}": invalid syntax')


def node_not_deleted(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeNotDeletedPredicate``: no deletionTimestamp."""
    return not _meta(node).get("deletionTimestamp")


def node_included(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeIncludedPredicate``: the exclude-from-external-load-balancers label is
    absent, or its value parses (Go ``ParseBool``) as false; unparsable values exclude."""
    labels = _meta(node).get("labels") or {}
    if LABEL_EXCLUDE_FROM_EXTERNAL_LB not in labels:
        return True
    try:
        return not parse_go_bool(str(labels[LABEL_EXCLUDE_FROM_EXTERNAL_LB]))
    except ValueError:
        return False


def node_untainted(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeUnTaintedPredicate``: no ``ToBeDeletedByClusterAutoscaler`` taint."""
    taints = _spec(node).get("taints") or ()
    return all(t.get("key") != TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER for t in taints)


STABLE_NODE_SET_PREDICATES: tuple[NodePredicate, ...] = (
    node_not_deleted,
    node_included,
    node_untainted,
)
"""Upstream ``stableNodeSetPredicates``: readiness, providerID and ETP are not filters."""


def respects_predicates(node: Mapping[str, Any], *predicates: NodePredicate) -> bool:
    return all(predicate(node) for predicate in predicates)


def filter_with_predicates(
    nodes: Iterable[Mapping[str, Any]], *predicates: NodePredicate
) -> list[Mapping[str, Any]]:
    return [node for node in nodes if respects_predicates(node, *predicates)]


def _provider_id(node: Mapping[str, Any]) -> str:
    return str(_spec(node).get("providerID") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name", ""))


def should_sync_updated_node(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Upstream ``shouldSyncUpdatedNode``: the exclude-label eligibility or the providerID
    changed. Readiness, taints, other labels and deletion do not trigger a node sync."""
    if node_included(old) != node_included(new):
        return True
    return _provider_id(old) != _provider_id(new)


def nodes_sufficiently_equal(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> bool:
    """Upstream ``nodesSufficientlyEqual``: same count and the same name → providerID map."""
    if len(old) != len(new):
        return False
    return {_name(n): _provider_id(n) for n in old} == {_name(n): _provider_id(n) for n in new}


def loggable_node_names(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """At most 20 node names, then ``<N more>`` (upstream ``loggableNodeNames``)."""
    names = [_name(node) for node in nodes[:MAX_NODE_NAMES_TO_LOG]]
    if len(nodes) > MAX_NODE_NAMES_TO_LOG:
        names.append(f"<{len(nodes) - MAX_NODE_NAMES_TO_LOG} more>")
    return names


# -- the patches PatchService sends -----------------------------------------------------------


def load_balancer_status_equal(previous: Mapping[str, Any], new: LoadBalancerStatus) -> bool:
    """Semantic equality of ``.ingress`` only (ip, hostname, ipMode, ports), as upstream
    ``LoadBalancerStatusEqual``; an absent list equals an empty one."""
    return LoadBalancerStatus.from_dict(previous).ingress == new.ingress


def finalizer_patch(old: Sequence[str], new: Sequence[str]) -> dict[str, Any]:
    """The strategic-merge patch a two-way diff of ``metadata.finalizers`` produces
    (patch strategy ``merge`` on a list of strings), as upstream ``PatchService`` sends it.

    From none to some: the list itself. From some to none: ``null``. Otherwise the added
    values, a ``$deleteFromPrimitiveList`` of the removed ones and the new order.
    """
    if not old:
        return {"metadata": {"finalizers": list(new)}}
    if not new:
        return {"metadata": {"finalizers": None}}
    meta: dict[str, Any] = {"$setElementOrder/finalizers": list(new)}
    added = [value for value in new if value not in old]
    removed = [value for value in old if value not in new]
    if added:
        meta["finalizers"] = added
    if removed:
        meta["$deleteFromPrimitiveList/finalizers"] = removed
    return {"metadata": meta}


def status_patch(new: LoadBalancerStatus) -> dict[str, Any]:
    """The strategic-merge patch setting ``status.loadBalancer`` to ``new``: the ingress list
    is atomic, so it is replaced whole; an empty status removes it (``null``)."""
    ingress = new.to_dict().get("ingress")
    return {"status": {"loadBalancer": {"ingress": ingress}}}
