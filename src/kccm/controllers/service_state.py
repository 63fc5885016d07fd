"""What the service controller records of each sync (``kccm explain service``).

After every sync of a Service the controller loop reports the outcome (``on_outcome``) and
:class:`ServiceSyncRecorder` records it in the daemon's
:class:`~kccm.controllers.syncstate.SyncStates`: success or the classified failure, the
retry the queue scheduled, and the node set as the Service's balancer sees it — how many
Nodes are eligible and, for each excluded Node, why:

- being deleted, the ``node.kubernetes.io/exclude-from-external-load-balancers`` label, the
  ``ToBeDeletedByClusterAutoscaler`` taint (upstream's stable node set predicates);
- not initialised (the ``node.cloudprovider.kubernetes.io/uninitialized`` taint, or no
  ``spec.providerID``): given to the provider, which has no instance to target yet;
- the Service's ``service.kccm.io/target-node-selector`` (:mod:`.service_selection`);
- the provider's own selector (aws ``target-node-labels``), when the provider implements
  :class:`~kccm.cloudprovider.backends.BackendNodeSelector`.

A sync that succeeds with no eligible Node is recorded as ``no-eligible-nodes`` (and counted
as such), since the balancer then serves nothing. The Service-independent exclusions are
computed once per change of the Nodes, not once per Service.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from kccm.api.wellknown import (
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
    TAINT_UNINITIALIZED,
)
from kccm.cloudprovider.backends import BackendNodeSelector, as_backend_node_selector
from kccm.cloudprovider.reasons import Reason, classify
from kccm.controllers.nodeutil import node_name
from kccm.controllers.service_marks import ServiceMarks
from kccm.controllers.service_nodes import node_included, node_not_deleted, node_untainted
from kccm.controllers.service_predicates import needs_cleanup, wants_load_balancer
from kccm.controllers.service_selection import selection_exclusion
from kccm.controllers.syncstate import Kind, SyncStates
from kccm.kube.interface import Obj
from kccm.runtime.informers import EventHandler, Informer

__all__ = [
    "MAX_EXCLUDED_LISTED",
    "NO_NODES_MESSAGE",
    "SERVICE",
    "ServiceSyncRecorder",
    "framework_exclusion",
]

SERVICE: Kind = "service"
MAX_EXCLUDED_LISTED = 100
"""Excluded Nodes named per Service (``excluded_count`` has them all)."""
NO_NODES_MESSAGE = "There are no available nodes for LoadBalancer"

Node = Mapping[str, Any]


def _taint_keys(node: Node) -> set[str]:
    return {str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or ()}


def framework_exclusion(node: Node) -> str | None:
    """Why no balancer targets ``node`` whatever the Service, or None."""
    if not node_not_deleted(node):
        return "being deleted"
    if not node_included(node):
        value = ((node.get("metadata") or {}).get("labels") or {})[LABEL_EXCLUDE_FROM_EXTERNAL_LB]
        return f"label {LABEL_EXCLUDE_FROM_EXTERNAL_LB}={value}"
    if not node_untainted(node):
        return f"taint {TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER} (the cluster autoscaler)"
    if TAINT_UNINITIALIZED in _taint_keys(node):
        return f"not initialised: taint {TAINT_UNINITIALIZED}"
    if not (node.get("spec") or {}).get("providerID"):
        return "not initialised: no spec.providerID"
    return None


def _exclusion_view(node: Node) -> tuple[Any, ...]:
    """What the exclusions (and a provider's label selector) read of a Node."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    return (
        meta.get("labels"),
        meta.get("deletionTimestamp"),
        spec.get("taints"),
        spec.get("providerID"),
    )


class ServiceSyncRecorder:
    """Records each service sync; :meth:`outcome` is the service queue's ``on_outcome``."""

    def __init__(
        self,
        states: SyncStates,
        controller: str,
        services: Informer,
        nodes: Informer,
        balancer: object = None,
        wants: Callable[[Obj], bool] = wants_load_balancer,
    ) -> None:
        """``balancer``: the provider's LoadBalancer (its optional BackendNodeSelector is
        used); ``wants``: whether this controller serves a Service (its classes)."""
        self.states = states
        self.controller = controller
        self._services = services
        self._nodes = nodes
        self._selector: BackendNodeSelector | None = as_backend_node_selector(balancer)
        self._wants = wants
        finalizer_of = ServiceMarks.of(balancer).finalizer  # a provider's own, if it names one
        self._needs_cleanup = partial(needs_cleanup, finalizer_of=finalizer_of)
        self._framework: tuple[dict[str, str], list[Node]] | None = None
        nodes.add_event_handler(
            EventHandler(
                on_add=self._nodes_changed,
                on_update=self._node_updated,
                on_delete=self._nodes_changed,
            )
        )

    def _nodes_changed(self, _node: Node) -> None:
        self._framework = None

    def _node_updated(self, old: Node, new: Node) -> None:
        """Status updates (heartbeats, conditions) leave the exclusions as they were."""
        if _exclusion_view(old) != _exclusion_view(new):
            self._framework = None

    def outcome(self, key: str, error: Exception | None, retry_in: float | None) -> None:
        """Record the sync of ``key`` that just ended (with ``error``, retried in
        ``retry_in`` seconds); a Service gone or no longer wanting a balancer is forgotten
        once its clean-up succeeded."""
        service = self._services.get(key)
        serves = service is not None and self._wants(service) and not self._needs_cleanup(service)
        if error is None and not serves:
            self.states.forget(SERVICE, key, self.controller)
            return
        detail = self.node_detail(service) if serves and service is not None else {}
        reason = self._reason(error, detail)
        message = NO_NODES_MESSAGE if error is None and reason is not None else None
        self.states.record(
            SERVICE,
            key,
            self.controller,
            error=error,
            reason=reason,
            message=message,
            retry_in=retry_in,
            detail=detail,
        )

    @staticmethod
    def _reason(error: Exception | None, detail: Mapping[str, Any]) -> Reason | None:
        no_nodes = detail.get("eligible_nodes") == 0
        if error is None:
            return Reason.NO_NODES if no_nodes else None
        reason = classify(error)
        if no_nodes and reason in (Reason.OTHER, Reason.CLOUD_API):
            return Reason.NO_NODES
        return reason

    def node_detail(self, service: Mapping[str, Any]) -> dict[str, Any]:
        """``eligible_nodes`` (a count), ``excluded`` (``{node: why}``, the first
        :data:`MAX_EXCLUDED_LISTED` by name) and ``excluded_count``."""
        excluded, candidates = self._framework_exclusions()
        excluded = dict(excluded)
        selection = selection_exclusion(service)
        if selection is not None:
            for node in candidates:
                if not selection.matches(node):
                    excluded[node_name(node)] = selection.why_not
            candidates = [n for n in candidates if node_name(n) not in excluded]
        exclusion = self._selector.backend_node_exclusion(service) if self._selector else None
        eligible = len(candidates)
        if exclusion is not None:
            for node in candidates:
                why = exclusion(node)
                if why is not None:
                    excluded[node_name(node)] = why
                    eligible -= 1
        listed = sorted(excluded)[:MAX_EXCLUDED_LISTED]
        return {
            "eligible_nodes": eligible,
            "excluded": {name: excluded[name] for name in listed},
            "excluded_count": len(excluded),
        }

    def _framework_exclusions(self) -> tuple[dict[str, str], list[Node]]:
        """The Service-independent exclusions and the Nodes left, cached until a Node event."""
        if self._framework is None:
            excluded: dict[str, str] = {}
            candidates: list[Node] = []
            for node in self._nodes.items():
                why = framework_exclusion(node)
                if why is None:
                    candidates.append(node)
                else:
                    excluded[node_name(node)] = why
            self._framework = (excluded, candidates)
        return self._framework
