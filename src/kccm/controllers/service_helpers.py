"""Pure helpers of the service load-balancer controller (upstream ``controllers/service``).

Which services the controller manages (:func:`wants_load_balancer`, :func:`needs_cleanup`,
:func:`needs_update`), which nodes back a load balancer (the *stable node set* predicates),
when a node change is worth a node sync (:func:`should_sync_updated_node`,
:func:`nodes_sufficiently_equal`) and the exact shape of the strategic-merge patches upstream's
``servicehelper.PatchService`` sends (:func:`finalizer_patch`, :func:`status_patch`).
Objects are JSON-shaped mappings and are never modified here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kccm.api.wellknown import (
    ANNOTATION_LB_SPEC_HASH,
    FINALIZER_LB_CLEANUP,
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
)
from kccm.cloudprovider.types import LoadBalancerStatus

__all__ = [
    "EMPTY_NODE_SET",
    "LEGACY_ANNOTATIONS",
    "MAX_NODE_NAMES_TO_LOG",
    "STABLE_NODE_SET_PREDICATES",
    "BackendNodeSet",
    "NodeIdentity",
    "NodePredicate",
    "NodeSetSnapshot",
    "filter_with_predicates",
    "finalizer_patch",
    "has_lb_finalizer",
    "legacy_annotations_patch",
    "load_balancer_status_equal",
    "loggable_node_names",
    "needs_cleanup",
    "needs_update",
    "node_addresses",
    "node_identities",
    "node_identity",
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

_log = logging.getLogger(__name__)

NodePredicate = Callable[[Mapping[str, Any]], bool]


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


def _key(service: Mapping[str, Any]) -> str:
    """``klog.KObj``: ``namespace/name``."""
    return service_key(service)


def needs_update(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    ignored_annotations: Collection[str] = (),
) -> bool:
    """Upstream ``needsUpdate`` (v0.36): whether an informer update is worth a sync.

    It records no Event: every reason is only logged (upstream at V(2), here at debug level,
    which ``-v`` >= 4 shows). ``ignored_annotations`` are left out of the annotation
    comparison (the spec-hash annotation an earlier kccm wrote: kccm removes it, and that
    removal is no reason to sync)."""
    old_wants, new_wants = wants_load_balancer(old), wants_load_balancer(new)
    if not old_wants and not new_wants:
        return False
    if old_wants != new_wants:
        _log.debug(
            "Service %s wants load balancer changed from %s to %s",
            _key(old),
            _spec(old).get("type", ""),
            _spec(new).get("type", ""),
        )
        return True
    if any(check(old, new) for check in _UPDATE_CHECKS):
        return True
    if _annotations(old, ignored_annotations) != _annotations(new, ignored_annotations):
        return True
    return _later_checks(old, new)


def _annotations(service: Mapping[str, Any], ignored: Collection[str]) -> dict[str, Any]:
    annotations = _meta(service).get("annotations") or {}
    return {k: v for k, v in annotations.items() if k not in ignored}


def _check_source_ranges(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    before = _spec(old).get("loadBalancerSourceRanges")
    after = _spec(new).get("loadBalancerSourceRanges")
    if (before or None) != (after or None):
        _log.debug(
            "Service %s LoadBalancerSourceRanges changed from %s to %s",
            _key(new),
            _go_list(before),
            _go_list(after),
        )
        return True
    return False


def _check_ports_and_affinity(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    if not ports_equal_for_lb(old, new) or _changed(old, new, "sessionAffinity"):
        return True
    return _changed(old, new, "sessionAffinityConfig")


def _check_load_balancer_ip(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    before = _spec(old).get("loadBalancerIP", "")
    after = _spec(new).get("loadBalancerIP", "")
    if before != after:
        _log.debug("Service %s LoadBalancerIP changed from %s to %s", _key(new), before, after)
        return True
    return False


def _check_external_ips(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    old_ips = _spec(old).get("externalIPs") or []
    new_ips = _spec(new).get("externalIPs") or []
    if len(old_ips) != len(new_ips):
        _log.debug(
            "Service %s ExternalIPs' count changed from %d to %d",
            _key(new),
            len(old_ips),
            len(new_ips),
        )
        return True
    for i, (before, after) in enumerate(zip(old_ips, new_ips, strict=True)):
        if before != after:
            _log.debug(
                "Service %s ExternalIPs[%d] changed from %s to %s", _key(new), i, before, after
            )
            return True
    return False


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], field: str) -> bool:
    return _spec(old).get(field) != _spec(new).get(field)


_UPDATE_CHECKS: tuple[Callable[[Mapping[str, Any], Mapping[str, Any]], bool], ...] = (
    _check_source_ranges,
    _check_ports_and_affinity,
    _check_load_balancer_ip,
    _check_external_ips,
)
"""The checks before the annotation comparison, in upstream's order."""


def _later_checks(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """The checks after the annotation comparison: UID, traffic policy, health-check node
    port, IP family count."""
    fields = (
        ("UID", _meta(old).get("uid", ""), _meta(new).get("uid", "")),
        (
            "ExternalTrafficPolicy",
            _spec(old).get("externalTrafficPolicy", ""),
            _spec(new).get("externalTrafficPolicy", ""),
        ),
        (
            "HealthCheckNodePort",
            _spec(old).get("healthCheckNodePort", 0),
            _spec(new).get("healthCheckNodePort", 0),
        ),
    )
    for name, before, after in fields:
        if before != after:
            _log.debug("Service %s %s changed from %s to %s", _key(new), name, before, after)
            return True
    before_families = len(_spec(old).get("ipFamilies") or ())
    after_families = len(_spec(new).get("ipFamilies") or ())
    if before_families != after_families:
        _log.debug(
            "Service %s IPFamilies' count changed from %d to %d",
            _key(new),
            before_families,
            after_families,
        )
        return True
    return False


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


NodeIdentity = tuple[str, tuple[tuple[str, str], ...]]
"""What a load balancer's backend is made of: the providerID and the addresses."""


def node_addresses(node: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``status.addresses`` as ``(type, address)`` pairs, in order."""
    addresses = (node.get("status") or {}).get("addresses") or ()
    return tuple((str(a.get("type", "")), str(a.get("address", ""))) for a in addresses)


def node_identity(node: Mapping[str, Any]) -> NodeIdentity:
    """A node as a backend: providerID and addresses (upstream's ``protoNode`` has only the
    providerID; kccm adds the addresses, see docs/behaviour.md)."""
    return (_provider_id(node), node_addresses(node))


def should_sync_updated_node(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Upstream ``shouldSyncUpdatedNode`` (the exclude-label eligibility or the providerID
    changed) plus a change of ``status.addresses``: a node initialised after it registered
    gets its addresses after its providerID, and the load balancers must learn them.
    Readiness, taints, other labels and deletion do not trigger a node sync."""
    if node_included(old) != node_included(new):
        return True
    if _provider_id(old) != _provider_id(new):
        return True
    return node_addresses(old) != node_addresses(new)


def node_identities(nodes: Iterable[Mapping[str, Any]]) -> dict[str, NodeIdentity]:
    return {_name(node): node_identity(node) for node in nodes}


def nodes_sufficiently_equal(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> bool:
    """Upstream ``nodesSufficientlyEqual``: same count and the same name → identity map
    (providerID and, in kccm, the addresses)."""
    if len(old) != len(new):
        return False
    return node_identities(old) == node_identities(new)


def loggable_node_names(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Upstream ``loggableNodeNames``: the names of the first 20 nodes as a sorted set, then
    ``<N more>``."""
    names = sorted({_name(node) for node in nodes[:MAX_NODE_NAMES_TO_LOG]})
    if len(nodes) > MAX_NODE_NAMES_TO_LOG:
        names.append(f"<{len(nodes) - MAX_NODE_NAMES_TO_LOG} more>")
    return names


# -- what an earlier kccm left on Services ----------------------------------------------------

LEGACY_ANNOTATIONS = frozenset({ANNOTATION_LB_SPEC_HASH})
"""Annotations an earlier kccm wrote on Services (the load-balancer spec hash, issue 10).
kccm writes none now: they are left out of :func:`needs_update` (their removal is no reason
to sync) and removed by the next patch kccm sends anyway (:func:`legacy_annotations_patch`)."""


def legacy_annotations_patch(service: Mapping[str, Any]) -> dict[str, Any]:
    """The ``metadata`` part of a patch removing the :data:`LEGACY_ANNOTATIONS` the service
    still carries (``{}`` when it carries none)."""
    present = sorted(LEGACY_ANNOTATIONS & set(_meta(service).get("annotations") or {}))
    if not present:
        return {}
    return {"annotations": dict.fromkeys(present)}


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


# -- the backend node set, kept up to date event by event -------------------------------------


@dataclass(frozen=True)
class NodeSetSnapshot:
    """The eligible nodes at one version of :class:`BackendNodeSet` (shared: do not mutate)."""

    version: int
    nodes: tuple[Mapping[str, Any], ...]
    identities: Mapping[str, NodeIdentity]

    def same_backends(self, other: NodeSetSnapshot | None) -> bool:
        """``nodesSufficientlyEqual`` of two snapshots: O(1) for the same version."""
        if other is None:
            return False
        return other.version == self.version or other.identities == self.identities


EMPTY_NODE_SET = NodeSetSnapshot(version=-1, nodes=(), identities={})


class BackendNodeSet:
    """The nodes that pass the stable node set predicates, maintained from informer events
    in O(1) each, so a node sync or an ensure never filters every node again.

    ``version`` changes whenever a node enters or leaves the set or its identity
    (providerID, addresses) changes; :meth:`snapshot` builds one immutable view per version
    (``recomputations`` counts them) and always carries the newest node objects.
    """

    def __init__(self) -> None:
        self._eligible: dict[str, Mapping[str, Any]] = {}
        self._identities: dict[str, NodeIdentity] = {}
        self._objects_changed = False
        self.version = 0
        self.recomputations = 0
        self._snapshot: NodeSetSnapshot | None = None

    def __len__(self) -> int:
        return len(self._eligible)

    def apply(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """One informer event: add (``old`` None), update, or delete (``new`` None)."""
        name = _name(new if new is not None else old or {})
        if new is None or not respects_predicates(new, *STABLE_NODE_SET_PREDICATES):
            if self._eligible.pop(name, None) is not None:
                del self._identities[name]
                self.version += 1
            return
        self._eligible[name] = new
        self._objects_changed = True
        identity = node_identity(new)
        if self._identities.get(name) != identity:
            self._identities[name] = identity
            self.version += 1

    def snapshot(self) -> NodeSetSnapshot:
        """The current set; rebuilt only when the set or one of its nodes changed."""
        current = self._snapshot
        if current is not None and current.version == self.version:
            if not self._objects_changed:
                return current
            # Same backends, newer objects (labels, conditions): keep identities, refresh nodes.
            current = replace(current, nodes=tuple(self._eligible.values()))
        else:
            self.recomputations += 1
            current = NodeSetSnapshot(
                version=self.version,
                nodes=tuple(self._eligible.values()),
                identities=dict(self._identities),
            )
        self._objects_changed = False
        self._snapshot = current
        return current
