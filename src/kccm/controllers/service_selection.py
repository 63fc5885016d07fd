"""Target Nodes per Service: the ``service.kccm.io/target-node-selector`` annotation.

A LoadBalancer Service may hold a label selector (Kubernetes string syntax, parsed by
:mod:`kccm.util.labelselector`) in :data:`ANNOTATION_TARGET_NODE_SELECTOR`. Its balancer's
backends are then the Nodes of the stable node set (upstream's predicates: not being deleted,
not excluded by label, not tainted by the autoscaler) whose labels the selector matches: the
selection AND upstream's rules. Without the annotation (or with an empty one, which selects
everything as upstream's empty selector does) a Service gets the whole set, as upstream.

:class:`NodeSelections` makes each Service's view of the set (a :class:`NodeSetSnapshot` with
a ``basis``), once per selector and change of the set or of its Nodes' labels, so Services
with the same selector share one view and a node sync compares it in O(1) when nothing
changed. A selector that does not parse is an :class:`InvalidServiceConfig` naming the
annotation: the sync fails with a Warning and the balancer keeps the Nodes it had.

The providers' own selectors (aws ``target-node-labels``, openstack ``node-selector``) apply
to the Nodes the framework passes them, so both annotations together give the intersection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kccm.api.wellknown import ANNOTATION_TARGET_NODE_SELECTOR
from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.nodes import node_name
from kccm.controllers.service_endpoints import LocalEndpointsCheck
from kccm.controllers.service_nodes import BackendNodeSet, NodeSetSnapshot, node_labels_changed
from kccm.kube.interface import KubeClient
from kccm.runtime.events import EventRecorder
from kccm.util.labelselector import Selector, SelectorError, parse

__all__ = [
    "ANNOTATION_TARGET_NODE_SELECTOR",
    "NodeSelection",
    "NodeSelections",
    "TargetNodes",
    "node_selection",
    "selection_exclusion",
]


@dataclass(frozen=True)
class NodeSelection:
    """A Service's node selector: the annotation's text and what it parsed to."""

    text: str
    selector: Selector

    def matches(self, node: Mapping[str, Any]) -> bool:
        return self.selector.matches((node.get("metadata") or {}).get("labels"))

    @property
    def why_not(self) -> str:
        """Why a Node the selector does not match is left out."""
        return f"not selected by annotation {ANNOTATION_TARGET_NODE_SELECTOR}={self.text}"


@lru_cache(maxsize=1024)
def _parsed(text: str) -> NodeSelection | InvalidServiceConfig | None:
    try:
        selector = parse(text)
    except SelectorError as err:
        return InvalidServiceConfig(
            ANNOTATION_TARGET_NODE_SELECTOR,
            f"annotation {ANNOTATION_TARGET_NODE_SELECTOR}={text!r} is not a label selector: {err}",
        )
    return None if selector.empty else NodeSelection(text, selector)


def node_selection(service: Mapping[str, Any]) -> NodeSelection | None:
    """The Service's node selection, None without one (the whole set); raises
    :class:`InvalidServiceConfig` naming the annotation and the parse error."""
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_TARGET_NODE_SELECTOR)
    if text is None:
        return None
    found = _parsed(str(text))
    if isinstance(found, InvalidServiceConfig):
        raise found
    return found


def selection_exclusion(service: Mapping[str, Any]) -> NodeSelection | None:
    """The selection, or None without one or when it does not parse (``kccm explain`` and
    the sync records then say the annotation is invalid instead)."""
    try:
        return node_selection(service)
    except InvalidServiceConfig:
        return None


class NodeSelections:
    """Each selector's view of the backend node set, remade only when the set, its node
    objects or its Nodes' labels changed. A view's ``version`` is negative (never one of the
    set's own) and kept while the chosen Nodes' identities stay the same."""

    MAX_VIEWS = 1024
    """Views kept (one per selector text); past it they are all remade on demand."""

    def __init__(self) -> None:
        self._views: dict[str, tuple[tuple[Mapping[str, Any], ...], NodeSetSnapshot]] = {}
        self._next_version = -2  # -1 is EMPTY_NODE_SET's

    def view(
        self, selection: NodeSelection | None, nodes: NodeSetSnapshot, backends: BackendNodeSet
    ) -> NodeSetSnapshot:
        """``nodes`` (the set's current snapshot) as ``selection`` chooses them."""
        if selection is None:
            return nodes
        basis = (nodes.version, backends.labels_version)
        source, known = self._views.get(selection.text, ((), None))
        if known is not None and known.basis == basis and source is nodes.nodes:
            return known
        chosen = tuple(node for node in nodes.nodes if selection.matches(node))
        identities = {node_name(n): nodes.identities[node_name(n)] for n in chosen}
        if known is not None and known.identities == identities:
            version = known.version
        else:
            version, self._next_version = self._next_version, self._next_version - 1
        view = NodeSetSnapshot(version, chosen, identities, basis)
        if len(self._views) >= self.MAX_VIEWS:
            self._views.clear()
        self._views[selection.text] = (nodes.nodes, view)
        return view

    @staticmethod
    def behind(synced: NodeSetSnapshot | None, backends: BackendNodeSet) -> bool:
        """Whether a Service last given ``synced`` may need another node set now."""
        if synced is None:
            return True
        if synced.basis is None:
            return synced.version != backends.version
        return synced.basis != (backends.version, backends.labels_version)


class TargetNodes:
    """The node set each Service is given: the whole backend set, or its selection; and,
    after the balancer got it, the ``externalTrafficPolicy: Local`` check
    (:mod:`.service_endpoints`)."""

    def __init__(self, backends: BackendNodeSet, kube: KubeClient, recorder: EventRecorder) -> None:
        self.backends = backends
        self.local_endpoints = LocalEndpointsCheck(kube, recorder)
        self.views = NodeSelections()
        self.selecting: set[str] = set()
        """Services whose last ensure had a selector: a Node's relabel is worth a node sync."""

    def for_ensure(self, service: Mapping[str, Any], key: str) -> NodeSetSnapshot:
        """The Service's nodes for an ensure; raises :class:`InvalidServiceConfig` when its
        selector does not parse (the sync fails; the balancer keeps the Nodes it had)."""
        selection = node_selection(service)
        if selection is None:
            self.selecting.discard(key)
        else:
            self.selecting.add(key)
        return self.views.view(selection, self.backends.snapshot(), self.backends)

    def for_node_sync(
        self, service: Mapping[str, Any], nodes: NodeSetSnapshot
    ) -> NodeSetSnapshot | None:
        """A node sync's share of ``nodes`` for the Service; None when its selector does not
        parse (its sync failed: the balancer keeps its Nodes until the annotation is fixed)."""
        try:
            return self.views.view(node_selection(service), nodes, self.backends)
        except InvalidServiceConfig:
            return None

    def relabel_matters(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """A Node update that may change some Service's selection."""
        return bool(self.selecting) and node_labels_changed(old, new)

    def behind(self, synced: NodeSetSnapshot | None) -> bool:
        return self.views.behind(synced, self.backends)

    async def given(self, service: Mapping[str, Any], nodes: NodeSetSnapshot) -> None:
        """The Service's balancer now targets ``nodes``."""
        await self.local_endpoints.check(service, nodes)

    def forget(self, key: str) -> None:
        self.selecting.discard(key)
        self.local_endpoints.forget(key)
