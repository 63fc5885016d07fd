"""What ``kccm explain`` concludes from objects alone: whether a Service is this kccm's to
handle (and why not), which Nodes back its load balancer (and why the others do not), and
whether a Node is initialised. Pure functions over JSON-shaped objects; the rules are
upstream's (``controllers/service``: ``wantsLoadBalancer``, ``stableNodeSetPredicates``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kccm.api.wellknown import (
    ANNOTATION_LEASE_LB_CLASSES,
    LABEL_EXCLUDE_FROM_EXTERNAL_LB,
    TAINT_NODE_SHUTDOWN,
    TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER,
    TAINT_UNINITIALIZED,
)
from kccm.cloudprovider.drain import ANNOTATION_DRAIN_SECONDS, drain_time_of
from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.retention import ANNOTATION_RETAIN_ADDRESS, retention_of
from kccm.cloudprovider.sharing import ANNOTATION_SHARE_GROUP, share_group_of
from kccm.controllers.service_predicates import (
    UPSTREAM_CLASSES,
    LoadBalancerClasses,
    wants_load_balancer,
)
from kccm.controllers.service_selection import NodeSelection, node_selection
from kccm.controllers.service_sharing import group_members
from kccm.util.gostrconv import parse_bool

__all__ = [
    "CLASS_ANNOTATION",
    "Handling",
    "NodeSet",
    "class_owners",
    "handling",
    "node_initialisation",
    "node_set",
    "selection_note",
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


def _served(classes: LoadBalancerClasses) -> str:
    names = ", ".join(sorted(classes.names))
    if not classes.names:
        return "this kccm serves only Services without spec.loadBalancerClass"
    if classes.class_only:
        return f"this kccm serves only spec.loadBalancerClass in [{names}]"
    return f"this kccm serves Services without a class and spec.loadBalancerClass in [{names}]"


def _class_notes(service: Mapping[str, Any]) -> tuple[str, ...]:
    meta = service.get("metadata") or {}
    found = (
        ("annotation", (meta.get("annotations") or {}).get(CLASS_ANNOTATION)),
        ("label", (meta.get("labels") or {}).get(CLASS_ANNOTATION)),
    )
    return tuple(
        f"the {where} {CLASS_ANNOTATION}={value!r} is not read: Kubernetes uses the field "
        "spec.loadBalancerClass (KEP-1959), and so does every cloud-controller-manager"
        for where, value in found
        if value is not None
    )


def handling(
    service: Mapping[str, Any], classes: LoadBalancerClasses = UPSTREAM_CLASSES
) -> Handling:
    """The service controller's own decision (:func:`wants_load_balancer`: type
    LoadBalancer and a served class; upstream's rule without ``--load-balancer-class``),
    worded."""
    spec = service.get("spec") or {}
    notes = _class_notes(service)
    kind = spec.get("type") or "ClusterIP"
    cls = spec.get("loadBalancerClass")
    if wants_load_balancer(service, classes):
        if cls is None:
            return Handling(True, "type LoadBalancer without spec.loadBalancerClass", notes)
        return Handling(True, f"spec.loadBalancerClass {cls!r} is served here", notes)
    if kind != "LoadBalancer":
        return Handling(False, f"spec.type is {kind}, not LoadBalancer: no balancer wanted", notes)
    if cls is None:
        return Handling(False, f"no spec.loadBalancerClass; {_served(classes)}", notes)
    why = (
        f"spec.loadBalancerClass is {cls!r}: another load-balancer implementation owns it "
        f"({_served(classes)})"
    )
    return Handling(False, why, notes)


@dataclass(frozen=True)
class NodeSet:
    """The Nodes that may back a load balancer, as the service controller filters them."""

    eligible: tuple[str, ...]
    excluded: Mapping[str, str] = field(default_factory=dict)
    uninitialised: tuple[str, ...] = ()
    """Eligible but not yet initialised (no providerID): a provider may not target them yet."""
    selector: str | None = None
    """The Service's target-node selector (or why it is invalid), None without one."""


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
            if parse_bool(value):
                return f"label {LABEL_EXCLUDE_FROM_EXTERNAL_LB}={value}"
        except ValueError:
            return f"label {LABEL_EXCLUDE_FROM_EXTERNAL_LB}={value!r} (not a bool: excludes)"
    if TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER in _taint_keys(node):
        return f"taint {TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER} (the autoscaler removes it)"
    return None


def selection_note(service: Mapping[str, Any] | None) -> tuple[NodeSelection | None, str | None]:
    """The Service's target-node selection and how ``kccm explain`` words it: the selector,
    or why it is invalid (the sync then fails and the balancer keeps the Nodes it had)."""
    if service is None:
        return None, None
    try:
        selection = node_selection(service)
    except InvalidServiceConfig as err:
        return None, f"invalid: {err}; the balancer keeps the Nodes it had"
    return selection, None if selection is None else selection.text


def node_set(
    nodes: Iterable[Mapping[str, Any]], service: Mapping[str, Any] | None = None
) -> NodeSet:
    """The Nodes that back ``service``'s balancer (upstream's rules, then the Service's
    target-node selector) and why the others do not; every Service's without ``service``."""
    selection, note = selection_note(service)
    eligible: list[str] = []
    excluded: dict[str, str] = {}
    uninitialised: list[str] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        why = _exclusion(node)
        if why is None and selection is not None and not selection.matches(node):
            why = selection.why_not
        if why is not None:
            excluded[name] = why
            continue
        eligible.append(name)
        if not node_initialisation(node)[0]:
            uninitialised.append(name)
    return NodeSet(
        tuple(sorted(eligible)), dict(sorted(excluded.items())), tuple(uninitialised), note
    )


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


def _renewed(spec: Mapping[str, Any]) -> float | None:
    raw = spec.get("renewTime")
    if not raw:
        return None
    return datetime.datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()


def class_owners(leases: Iterable[Mapping[str, Any]], cls: str, now: float) -> dict[str, Any]:
    """The kccm deployments whose Lease says they serve ``cls`` (``serving``: Lease names and
    their holders; ``stale``: a Lease that names the class but was not renewed within its
    duration, so no running kccm holds it); ``none`` when no Lease names it."""
    serving: dict[str, str] = {}
    stale: list[str] = []
    for lease in leases:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        names = (meta.get("annotations") or {}).get(ANNOTATION_LEASE_LB_CLASSES)
        if names is None or cls not in str(names).split(","):
            continue
        renewed = _renewed(spec)
        duration = float(spec.get("leaseDurationSeconds") or 0)
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if renewed is None or renewed + duration < now or not spec.get("holderIdentity"):
            stale.append(where)
        else:
            serving[where] = str(spec.get("holderIdentity"))
    if serving:
        return {"class": cls, "serving": serving, "stale": stale}
    return {"class": cls, "serving": {}, "stale": stale, "none": f"no running kccm serves {cls!r}"}


def address_retention(
    service: Mapping[str, Any], default: bool, supported: bool, provider: str
) -> dict[str, Any]:
    """What happens to the Service's address when its balancer is released
    (docs/behaviour.md, "Keeping a balancer's address"): kept, released, or asked for by a
    provider that cannot keep it."""
    try:
        retention = retention_of(service, default)
    except InvalidServiceConfig as err:
        return {"keep": None, "source": ANNOTATION_RETAIN_ADDRESS, "note": str(err)}
    if not retention.keep:
        note = f"released with the balancer ({retention.source})"
    elif supported:
        note = f"kept on release, marked with the Service's namespace/name ({retention.because()})"
    else:
        note = (
            f"{retention.because()}, but provider {provider} cannot keep addresses: released "
            "with the balancer, with a Warning Event"
        )
    return {"keep": retention.keep and supported, "source": retention.source, "note": note}


def target_drain(
    service: Mapping[str, Any],
    default: int,
    supported: bool,
    provider: str,
    draining: Mapping[str, str],
) -> dict[str, Any]:
    """How a Node leaving the Service's node set goes (docs/behaviour.md, "Draining a Node's
    targets"), and ``draining``: the Nodes draining now, each with when its drain ends."""
    try:
        drain = drain_time_of(service, default)
    except InvalidServiceConfig as err:
        return {"seconds": None, "source": ANNOTATION_DRAIN_SECONDS, "note": str(err)}
    if drain.seconds <= 0:
        note = f"a leaving Node is removed at once, as upstream ({drain.source})"
    elif supported:
        note = f"a leaving Node drains {drain.seconds}s, then is removed ({drain.source})"
    else:
        note = (
            f"{drain.seconds}s asked by {drain.source}, but provider {provider} has no "
            "draining state: a leaving Node is removed at once"
        )
    seconds = drain.seconds if supported else 0
    return {"seconds": seconds, "source": drain.source, "note": note, "draining": dict(draining)}


def share_group(
    service: Mapping[str, Any],
    services: Iterable[Mapping[str, Any]],
    supported: bool,
    provider: str,
) -> dict[str, Any] | None:
    """The Service's share group (docs/behaviour.md, "Sharing one balancer") with its members
    in the order that decides who keeps a port; ``None`` without the annotation."""
    try:
        group = share_group_of(service)
    except InvalidServiceConfig as err:
        return {"group": None, "members": [], "note": str(err)}
    if group is None:
        return None
    members = [
        f"{m['metadata'].get('namespace')}/{m['metadata'].get('name')}"
        for m in group_members(services, group)
    ]
    if supported:
        note = (
            f"one balancer and one address for the {len(members)} Service(s) of group "
            f"{group.name} in {group.namespace}; on a port clash the earlier one keeps the port"
        )
    else:
        note = f"{ANNOTATION_SHARE_GROUP} is not supported by provider {provider}: no balancer"
    return {"group": group.name, "members": members, "note": note}
