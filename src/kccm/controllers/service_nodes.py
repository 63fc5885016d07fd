"""Which nodes back a load balancer (upstream ``controllers/service``): the *stable node set*
predicates, when a node change is worth a node sync (:func:`should_sync_updated_node`,
:func:`nodes_sufficiently_equal`) and the backend node set kept up to date event by event
(:class:`BackendNodeSet`). Objects are JSON-shaped mappings and are never modified here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kccm.api.wellknown import (
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
)
from kccm.cloudprovider.nodes import node_name, node_provider_id
from kccm.util.gostrconv import parse_bool

__all__ = [
    "EMPTY_NODE_SET",
    "MAX_NODE_NAMES_TO_LOG",
    "STABLE_NODE_SET_PREDICATES",
    "BackendNodeSet",
    "NodeIdentity",
    "NodePredicate",
    "NodeSetSnapshot",
    "filter_with_predicates",
    "loggable_node_names",
    "node_addresses",
    "node_identities",
    "node_identity",
    "node_included",
    "node_labels_changed",
    "node_not_deleted",
    "node_untainted",
    "nodes_sufficiently_equal",
    "respects_predicates",
    "should_sync_updated_node",
]

MAX_NODE_NAMES_TO_LOG = 20
"""Upstream ``maxNodeNamesToLog``: node names in an UpdateLoadBalancerFailed event."""

NodePredicate = Callable[[Mapping[str, Any]], bool]


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return (node.get("metadata") or {}).get("labels") or {}


def node_labels_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a node update changed its labels (a Service's node selection may change)."""
    return _labels(old) != _labels(new)


def node_not_deleted(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeNotDeletedPredicate``: no deletionTimestamp."""
    return not (node.get("metadata") or {}).get("deletionTimestamp")


def node_included(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeIncludedPredicate``: the exclude-from-external-load-balancers label is
    absent, or its value parses (Go ``ParseBool``) as false; unparsable values exclude."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if LABEL_EXCLUDE_FROM_EXTERNAL_LB not in labels:
        return True
    try:
        return not parse_bool(str(labels[LABEL_EXCLUDE_FROM_EXTERNAL_LB]))
    except ValueError:
        return False


def node_untainted(node: Mapping[str, Any]) -> bool:
    """Upstream ``nodeUnTaintedPredicate``: no ``ToBeDeletedByClusterAutoscaler`` taint."""
    taints = (node.get("spec") or {}).get("taints") or ()
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


NodeIdentity = tuple[str, tuple[tuple[str, str], ...]]
"""What a load balancer's backend is made of: the providerID and the addresses."""


def node_addresses(node: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``status.addresses`` as ``(type, address)`` pairs, in order."""
    addresses = (node.get("status") or {}).get("addresses") or ()
    return tuple((str(a.get("type", "")), str(a.get("address", ""))) for a in addresses)


def node_identity(node: Mapping[str, Any]) -> NodeIdentity:
    """A node as a backend: providerID and addresses (upstream's ``protoNode`` has only the
    providerID; kccm adds the addresses, see docs/behaviour.md)."""
    return (node_provider_id(node), node_addresses(node))


def should_sync_updated_node(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Upstream ``shouldSyncUpdatedNode`` (the exclude-label eligibility or the providerID
    changed) plus a change of ``status.addresses``: a node initialised after it registered
    gets its addresses after its providerID, and the load balancers must learn them.
    Readiness, taints, other labels and deletion do not trigger a node sync."""
    if node_included(old) != node_included(new):
        return True
    if node_provider_id(old) != node_provider_id(new):
        return True
    return node_addresses(old) != node_addresses(new)


def node_identities(nodes: Iterable[Mapping[str, Any]]) -> dict[str, NodeIdentity]:
    return {node_name(node): node_identity(node) for node in nodes}


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
    names = sorted({node_name(node) for node in nodes[:MAX_NODE_NAMES_TO_LOG]})
    if len(nodes) > MAX_NODE_NAMES_TO_LOG:
        names.append(f"<{len(nodes) - MAX_NODE_NAMES_TO_LOG} more>")
    return names


# -- the backend node set, kept up to date event by event -------------------------------------


@dataclass(frozen=True)
class NodeSetSnapshot:
    """The eligible nodes at one version of :class:`BackendNodeSet` (shared: do not mutate)."""

    version: int
    nodes: tuple[Mapping[str, Any], ...]
    identities: Mapping[str, NodeIdentity]
    basis: tuple[int, int] | None = None
    """A Service's selection of the set (:mod:`.service_selection`): the set's ``version``
    and ``labels_version`` it was chosen from; None for the whole set."""

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
    ``labels_version`` changes when a node of the set changes its labels (a Service's node
    selection must be made again; the set itself is the same).
    """

    def __init__(self) -> None:
        self._eligible: dict[str, Mapping[str, Any]] = {}
        self._identities: dict[str, NodeIdentity] = {}
        self._objects_changed = False
        self.version = 0
        self.labels_version = 0
        self.recomputations = 0
        self._snapshot: NodeSetSnapshot | None = None

    def __len__(self) -> int:
        return len(self._eligible)

    def __contains__(self, name: object) -> bool:
        """Whether the Node of that name is in the set."""
        return name in self._eligible

    def apply(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        """One informer event: add (``old`` None), update, or delete (``new`` None)."""
        name = node_name(new if new is not None else old or {})
        if new is None or not respects_predicates(new, *STABLE_NODE_SET_PREDICATES):
            if self._eligible.pop(name, None) is not None:
                del self._identities[name]
                self.version += 1
            return
        before = self._eligible.get(name)
        if before is not None and _labels(before) != _labels(new):
            self.labels_version += 1
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
