"""What ``kccm explain`` concludes from objects alone: whether a Service is this kccm's to
handle (and why not), which Nodes back its load balancer (and why the others do not), and
whether a Node is initialised. Pure functions over JSON-shaped objects; the rules are
upstream's (``controllers/service``: ``wantsLoadBalancer``, ``stableNodeSetPredicates``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.api.wellknown import (
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_NODE_SHUTDOWN,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
    TAINT_UNINITIALIZED,
)
from kccm.controllers.service_nodes import parse_go_bool

__all__ = [
    "CLASS_ANNOTATION",
    "Handling",
    "NodeSet",
    "handling",
    "node_initialisation",
    "node_set",
]

CLASS_ANNOTATION = "service.kubernetes.io/load-balancer-class"
"""KEP-1959's first draft named a class with this annotation (label in some guides); Kubernetes
shipped the field ``spec.loadBalancerClass`` instead, and upstream's service controller reads
only the field. A Service carrying the annotation is told so."""


@dataclass(frozen=True)
class Handling:
    """Whether this kccm handles a Service; ``why`` in words either way."""

    handled: bool
    why: str
    notes: tuple[str, ...] = ()


def _served(classes: Collection[str], class_only: bool) -> str:
    names = ", ".join(sorted(classes))
    if not classes:
        return "this kccm serves only Services without spec.loadBalancerClass"
    if class_only:
        return f"this kccm serves only spec.loadBalancerClass in [{names}]"
    return f"this kccm serves Services without a class and spec.loadBalancerClass in [{names}]"


def handling(
    service: Mapping[str, Any], classes: Collection[str] = (), *, class_only: bool = False
) -> Handling:
    """Upstream ``wantsLoadBalancer`` widened by ``--load-balancer-class``: type LoadBalancer,
    and no ``spec.loadBalancerClass`` key (even ``""`` is another implementation's) unless it
    names a served class."""
    spec = service.get("spec") or {}
    annotations = (service.get("metadata") or {}).get("annotations") or {}
    labels = (service.get("metadata") or {}).get("labels") or {}
    notes = tuple(
        f"the {where} {CLASS_ANNOTATION}={value!r} is not read: Kubernetes uses the field "
        "spec.loadBalancerClass (KEP-1959), and so does every cloud-controller-manager"
        for where, value in (
            ("annotation", annotations.get(CLASS_ANNOTATION)),
            ("label", labels.get(CLASS_ANNOTATION)),
        )
        if value is not None
    )
    kind = spec.get("type") or "ClusterIP"
    if kind != "LoadBalancer":
        return Handling(False, f"spec.type is {kind}, not LoadBalancer: no balancer wanted", notes)
    cls = spec.get("loadBalancerClass")
    if cls is None:
        if class_only:
            return Handling(False, f"no spec.loadBalancerClass; {_served(classes, True)}", notes)
        return Handling(True, "type LoadBalancer without spec.loadBalancerClass", notes)
    if cls in classes:
        return Handling(True, f"spec.loadBalancerClass {cls!r} is served here", notes)
    why = (
        f"spec.loadBalancerClass is {cls!r}: another load-balancer implementation owns it "
        f"({_served(classes, class_only)})"
    )
    return Handling(False, why, notes)


@dataclass(frozen=True)
class NodeSet:
    """The Nodes that may back a load balancer, as the service controller filters them."""

    eligible: tuple[str, ...]
    excluded: Mapping[str, str] = field(default_factory=dict)
    uninitialised: tuple[str, ...] = ()
    """Eligible but not yet initialised (no providerID): a provider may not target them yet."""


def _taint_keys(node: Mapping[str, Any]) -> set[str]:
    return {str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or ()}


def _exclusion(node: Mapping[str, Any]) -> str | None:
    """Why upstream's stable node set predicates leave ``node`` out (None: it is in)."""
    meta = node.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "being deleted"
    labels = meta.get("labels") or {}
    if LABEL_EXCLUDE_FROM_EXTERNAL_LB in labels:
        value = str(labels[LABEL_EXCLUDE_FROM_EXTERNAL_LB])
        try:
            if parse_go_bool(value):
                return f"label {LABEL_EXCLUDE_FROM_EXTERNAL_LB}={value}"
        except ValueError:
            return f"label {LABEL_EXCLUDE_FROM_EXTERNAL_LB}={value!r} (not a bool: excludes)"
    if TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER in _taint_keys(node):
        return f"taint {TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER} (the autoscaler removes it)"
    return None


def node_set(nodes: Iterable[Mapping[str, Any]]) -> NodeSet:
    eligible: list[str] = []
    excluded: dict[str, str] = {}
    uninitialised: list[str] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        why = _exclusion(node)
        if why is not None:
            excluded[name] = why
            continue
        eligible.append(name)
        if not node_initialisation(node)[0]:
            uninitialised.append(name)
    return NodeSet(tuple(sorted(eligible)), dict(sorted(excluded.items())), tuple(uninitialised))


def node_initialisation(node: Mapping[str, Any]) -> tuple[bool, str]:
    """(initialised, why): the cloud node controller removes the uninitialized taint once it
    has set the providerID, addresses and labels."""
    taints = _taint_keys(node)
    provider_id = (node.get("spec") or {}).get("providerID") or ""
    if TAINT_UNINITIALIZED in taints:
        return (
            False,
            f"taint {TAINT_UNINITIALIZED} still present: "
            "the cloud node controller has not initialised it",
        )
    if not provider_id:
        return False, "no spec.providerID (registered without --cloud-provider=external?)"
    why = "initialised (no uninitialized taint, providerID set)"
    if TAINT_NODE_SHUTDOWN in taints:
        why += f"; taint {TAINT_NODE_SHUTDOWN}: the cloud reports the instance shut down"
    return True, why
