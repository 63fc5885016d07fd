"""Before switching from OCCM: which balancer annotations of a Service kccm reads differently
from OCCM v1.36.0, or which neither reads (``kccm explain openstack-annotations``).

Reads the Service only (no cloud, no ``cloud.conf``), with the same rules as
:mod:`.annotations`: each :class:`Finding` names the annotation, its value, what OCCM does with
it and what kccm does. ``differs`` is True where the outcome differs (an ``lb-method`` Octavia
refuses: the same on a pool that exists, but refused before any write where a pool would be
made, where OCCM fails half-way); False where both read it the same way, which is
still worth a look: a value OCCM cannot parse (``True``, ``1``, ``enabled``) was never read
by OCCM either, and kccm reports it with a Warning Event on every sync; a
``loadbalancer.openstack.org/`` annotation neither knows is most likely misspelt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kccm.cloudprovider.annotations import annotations_of
from kccm.providers.openstack.loadbalancer import annotations as ann
from kccm.util.gostrconv import go_quote, parse_bool, parse_int

__all__ = ["Finding", "checked_services", "findings"]

_BOOL_DEFAULTS = {
    ann.INTERNAL: "[LoadBalancer] internal-lb, false unless set",
    ann.ENABLE_HEALTH_MONITOR: "[LoadBalancer] create-monitor, false unless set",
    ann.X_FORWARDED_FOR: "false",
    ann.KEEP_FLOATING_IP: "false",
}
_INT_DEFAULTS = {
    ann.CONN_LIMIT: "-1",
    ann.TIMEOUT_CLIENT_DATA: "50000",
    ann.TIMEOUT_MEMBER_CONNECT: "5000",
    ann.TIMEOUT_MEMBER_DATA: "50000",
    ann.TIMEOUT_TCP_INSPECT: "0",
    ann.HEALTH_MONITOR_DELAY: "[LoadBalancer] monitor-delay, 5",
    ann.HEALTH_MONITOR_TIMEOUT: "[LoadBalancer] monitor-timeout, 3",
    ann.HEALTH_MONITOR_MAX_RETRIES: "[LoadBalancer] monitor-max-retries, 1",
    ann.HEALTH_MONITOR_MAX_RETRIES_DOWN: "[LoadBalancer] monitor-max-retries-down, 3",
}
_SAME = "the same, and a Warning Event InvalidAnnotation on every sync"
_KNOWN = frozenset(
    getattr(ann, name)
    for name in ann.__all__
    if name.isupper() and isinstance(getattr(ann, name), str)
)


@dataclass(frozen=True)
class Finding:
    """One annotation kccm reads differently from OCCM, or that neither reads."""

    service: str
    annotation: str
    value: str
    occm: str
    kccm: str
    differs: bool


def _bool(key: str, value: str) -> tuple[str, str, bool] | None:
    if value in ann.OCCM_BOOLS:
        return None
    occm = f"not true or false: the default is used ({_BOOL_DEFAULTS[key]})"
    try:
        if parse_bool(value):
            occm += "; never read as true"
    except ValueError:
        pass
    return occm, _SAME, False


def _int(key: str, value: str) -> tuple[str, str, bool] | None:
    try:
        parse_int(value)
    except ValueError:
        return f"strconv.Atoi fails: the default is used ({_INT_DEFAULTS[key]})", _SAME, False
    return None


def _proxy(value: str) -> tuple[str, str, bool] | None:
    if value in ann.PROXY_VERSIONS:
        return None
    return "not true, v1, v2 or false: no proxy protocol", _SAME, False


def _lb_method(value: str) -> tuple[str, str, bool] | None:
    if not value or value in ann.LB_METHODS:
        return None
    return (
        "sent to Octavia, which refuses it: on a pool that exists, a LoadBalancerLbMethodUnknown "
        "Warning Event and the sync goes on (members follow the Nodes); a new pool fails the "
        "sync (400) after the balancer and its listener are made",
        "the same on a pool that exists; where a pool would be made, refused before any write, "
        "naming the annotation",
        True,
    )


def _unknown(key: str) -> tuple[str, str, bool] | None:
    if not key.startswith("loadbalancer.openstack.org/") or key in _KNOWN:
        return None
    return "not read (no such annotation)", "not read either", False


def _check(key: str, value: str) -> tuple[str, str, bool] | None:
    if key in _BOOL_DEFAULTS:
        return _bool(key, value)
    if key in _INT_DEFAULTS:
        return _int(key, value)
    if key == ann.PROXY_PROTOCOL:
        return _proxy(value)
    if key == ann.LB_METHOD:
        return _lb_method(value)
    return _unknown(key)


def findings(service: Mapping[str, Any]) -> list[Finding]:
    """What to look at in ``service``'s annotations, in annotation order."""
    meta = service.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    found = []
    for key, value in sorted(annotations_of(service).items()):
        checked = _check(str(key), str(value))
        if checked is not None:
            occm, kccm, differs = checked
            found.append(Finding(name, str(key), go_quote(str(value)), occm, kccm, differs))
    return found


def checked_services(services: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Services OCCM's service controller balances: ``type: LoadBalancer`` without a
    ``spec.loadBalancerClass``."""
    return [
        svc
        for svc in services
        if (svc.get("spec") or {}).get("type") == "LoadBalancer"
        and not (svc.get("spec") or {}).get("loadBalancerClass")
    ]
