"""Which Services the load-balancer controller manages, and when a Service update is worth a
sync (upstream ``controllers/service``).

:func:`wants_load_balancer`, :func:`has_lb_finalizer`, :func:`needs_cleanup` and
:func:`needs_update` (with :func:`ports_equal_for_lb`). Objects are JSON-shaped mappings and
are never modified here.

kccm serves ``spec.loadBalancerClass`` values besides upstream's class-less Services
(``--load-balancer-class``, ``--load-balancer-class-only``): :class:`LoadBalancerClasses` says
which; :data:`UPSTREAM_CLASSES` (no flag) is upstream's rule. :func:`may_hold_released_balancer`
and :func:`lost_finalizer` are the two extra triggers a class switch needs (docs/behaviour.md,
"Serving a load-balancer class").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.api.wellknown import FINALIZER_LB_CLEANUP

__all__ = [
    "UPSTREAM_CLASSES",
    "LoadBalancerClasses",
    "generic_finalizer",
    "has_lb_finalizer",
    "lost_finalizer",
    "may_hold_released_balancer",
    "needs_cleanup",
    "needs_update",
    "ports_equal_for_lb",
    "service_key",
    "wants_load_balancer",
]

LOAD_BALANCER = "LoadBalancer"

_log = logging.getLogger(__name__)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def service_key(service: Mapping[str, Any]) -> str:
    """``namespace/name`` (client-go ``MetaNamespaceKeyFunc``)."""
    meta = _meta(service)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# -- which services are ours ------------------------------------------------------------------


@dataclass(frozen=True)
class LoadBalancerClasses:
    """The ``spec.loadBalancerClass`` values one kccm serves: ``names``, and the class-less
    Services (no ``loadBalancerClass`` key at all: even ``""`` is another implementation's)
    unless ``class_only``. The default is upstream's rule: class-less Services only."""

    names: frozenset[str] = frozenset()
    class_only: bool = False

    @classmethod
    def of(cls, names: Collection[str], class_only: bool = False) -> LoadBalancerClasses:
        return cls(frozenset(names), class_only)

    def serving(self, names: Collection[str]) -> LoadBalancerClasses:
        """These classes and ``names`` (the ones the provider serves by itself)."""
        return LoadBalancerClasses(self.names | frozenset(names), self.class_only)

    def serves_class(self, service: Mapping[str, Any]) -> bool:
        """Whether the Service's class (whatever its type) is one this kccm serves."""
        value = _spec(service).get("loadBalancerClass")
        if value is None:
            return not self.class_only
        return value in self.names

    def keeps_status(self, service: Mapping[str, Any]) -> bool:
        """Whether ``status.loadBalancer`` is this kccm's to write: not once the Service is
        ``type: LoadBalancer`` with a class another implementation serves."""
        return _spec(service).get("type") != LOAD_BALANCER or self.serves_class(service)


UPSTREAM_CLASSES = LoadBalancerClasses()


def wants_load_balancer(
    service: Mapping[str, Any], classes: LoadBalancerClasses = UPSTREAM_CLASSES
) -> bool:
    """``type: LoadBalancer`` and a class this kccm serves; with :data:`UPSTREAM_CLASSES`
    no ``loadBalancerClass`` key at all, as upstream ``wantsLoadBalancer``."""
    return _spec(service).get("type") == LOAD_BALANCER and classes.serves_class(service)


def may_hold_released_balancer(
    service: Mapping[str, Any],
    classes: LoadBalancerClasses = UPSTREAM_CLASSES,
    finalizer_of: Callable[[Mapping[str, Any]], str] | None = None,
) -> bool:
    """kccm: a ``type: LoadBalancer`` Service of a class this kccm does not serve that
    carries the cleanup finalizer. It may have been ours before a class switch (LoadBalancer
    -> ClusterIP -> LoadBalancer with another class) this process never saw: its sync looks
    for our balancer and deletes it (upstream ``syncLoadBalancerIfNeeded``'s
    ``!wantsLoadBalancer`` branch). Checked when a Service is added (a start), not on resync.
    ``finalizer_of``: the provider's finalizer for the Service (as :func:`has_lb_finalizer`)."""
    return (
        has_lb_finalizer(service, finalizer_of or generic_finalizer)
        and _spec(service).get("type") == LOAD_BALANCER
        and not classes.serves_class(service)
        and not _meta(service).get("deletionTimestamp")
    )


def lost_finalizer(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    classes: LoadBalancerClasses = UPSTREAM_CLASSES,
    finalizer_of: Callable[[Mapping[str, Any]], str] | None = None,
) -> bool:
    """kccm, only when it serves classes (``--load-balancer-class``): a Service we serve lost
    its cleanup finalizer (the previous owner of a class switch released its own balancer and
    removed the shared finalizer, as upstream does): sync to put it back.

    Without the flag kccm is upstream (v0.36.3), which does not sync on a finalizer-only
    change: ``needsUpdate`` (kubernetes/cloud-provider ``controllers/service/controller.go``
    lines 557-617 at 4666611) compares spec fields, annotations and the UID, never finalizers,
    and the ``UpdateFunc`` (lines 145-151) enqueues only on ``needsUpdate`` or ``needsCleanup``. A
    finalizer a user strips stays off until the next sync for another reason, whose
    ``syncLoadBalancerIfNeeded`` adds it before ensuring (lines 404-408); a Service deleted
    meanwhile leaves its balancer (docs/behaviour.md, "Quirks: decisions")."""
    if not classes.names:
        return False
    mine = finalizer_of or generic_finalizer
    return (
        has_lb_finalizer(old, mine)
        and not has_lb_finalizer(new, mine)
        and wants_load_balancer(new, classes)
    )


def generic_finalizer(service: Mapping[str, Any]) -> str:
    """The finalizer upstream's controller uses for every Service."""
    return FINALIZER_LB_CLEANUP


def has_lb_finalizer(
    service: Mapping[str, Any], finalizer_of: Callable[[Mapping[str, Any]], str] = generic_finalizer
) -> bool:
    """The generic cleanup finalizer, or the one ``finalizer_of`` names for the Service (a
    provider's, :class:`~kccm.controllers.service_marks.ServiceMarks`), is present."""
    held = _meta(service).get("finalizers") or ()
    return FINALIZER_LB_CLEANUP in held or finalizer_of(service) in held


def needs_cleanup(
    service: Mapping[str, Any], finalizer_of: Callable[[Mapping[str, Any]], str] = generic_finalizer
) -> bool:
    """The cleanup finalizer is present and the service is being deleted or is no longer
    ``type: LoadBalancer`` (upstream ``needsCleanup``)."""
    if not has_lb_finalizer(service, finalizer_of):
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
    classes: LoadBalancerClasses = UPSTREAM_CLASSES,
) -> bool:
    """Upstream ``needsUpdate`` (v0.36): whether an informer update is worth a sync.

    It records no Event: every reason is only logged (upstream at V(2), here at debug level,
    which ``-v`` >= 4 shows). ``ignored_annotations`` are left out of the annotation
    comparison (the spec-hash annotation an earlier kccm wrote: kccm removes it, and that
    removal is no reason to sync)."""
    old_wants, new_wants = wants_load_balancer(old, classes), wants_load_balancer(new, classes)
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
