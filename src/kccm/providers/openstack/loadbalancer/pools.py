"""The default pool of each listener (upstream ``buildPoolCreateOpt`` and
``ensureOctaviaPool`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

The pool protocol is the listener's, ``PROXY``/``PROXYV2`` with ``proxy-protocol``, ``HTTP``
with ``x-forwarded-for`` or TLS termination; a pool of the wrong protocol is deleted and made
again; a changed ``lb-method`` is one PUT; ``sessionAffinity: ClientIP`` is ``SOURCE_IP``
persistence on create.

An ``lb-method`` Octavia refuses, on a pool that exists, is upstream's (``ensureOctaviaPool``
lines 905-924): the refused PUT is logged and recorded as a ``LoadBalancerLbMethodUnknown``
Warning Event, and the members are still brought in line with the Nodes, on an update as on
an ensure. Only where a pool would be made (upstream: ``CreatePool``, or the balancer's
fully populated create, which Octavia answers 400 and the sync fails) does kccm refuse it,
before any write (:func:`refuse_unknown_method`): before the POST of a new balancer, and
before a pool of the wrong protocol is deleted, so the old pool keeps serving (upstream
deletes it, then fails to make the new one).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import Node, Service
from kccm.providers.openstack.api import OpenStackError
from kccm.providers.openstack.loadbalancer.annotations import (
    LB_METHOD,
    LB_METHODS,
    LBAnnotationError,
)
from kccm.providers.openstack.loadbalancer.events import LB_METHOD_UNKNOWN, occm_event
from kccm.providers.openstack.loadbalancer.members import ensure_members
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["build_pool", "ensure_pool", "pool_protocol", "refuse_unknown_method"]

log = logging.getLogger(__name__)


def pool_protocol(listener_protocol: str, conf: ServiceConfig) -> str:
    if conf.proxy_protocol is not None:
        return conf.proxy_protocol
    if (conf.keep_client_ip or conf.tls_container_ref) and listener_protocol != "HTTP":
        return "HTTP"
    return listener_protocol


def build_pool(
    listener_protocol: str, service: Service, conf: ServiceConfig, default_method: str, name: str
) -> dict[str, Any]:
    """Upstream ``buildPoolCreateOpt`` as gophercloud serialises it."""
    body: dict[str, Any] = {
        "name": name,
        "protocol": pool_protocol(listener_protocol, conf),
        "lb_algorithm": conf.lb_method or default_method,
    }
    if (service.get("spec") or {}).get("sessionAffinity") == "ClientIP":
        body["session_persistence"] = {"type": "SOURCE_IP"}
    return body


def refuse_unknown_method(conf: ServiceConfig) -> None:
    """Before a pool is made: an ``lb-method`` annotation Octavia would refuse (400) fails the
    sync, naming it, before any write."""
    method = conf.lb_method
    if method and method not in LB_METHODS:
        raise LBAnnotationError(
            f"annotation {LB_METHOD}: {method!r} is not one of {', '.join(LB_METHODS)}; "
            "Octavia refuses it for a new pool"
        )


def _fix_method(octavia: Octavia, lb_id: str, pool: LB, method: str) -> None:
    if pool.get("lb_algorithm") == method:
        return
    log.info("Updating LoadBalancer LBMethod of pool %s to %s", pool.get("id"), method)
    try:
        octavia.update_pool(lb_id, str(pool["id"]), {"lb_algorithm": method})
    except OpenStackError as err:
        log.error("Error updating LB method of pool %s: %s", pool.get("id"), err)
        occm_event(LB_METHOD_UNKNOWN, f"Error updating LB method for LoadBalancer: {err}")
    else:
        pool["lb_algorithm"] = method


def ensure_pool(
    octavia: Octavia,
    lb_id: str,
    name: str,
    listener: LB,
    service: Service,
    port: Mapping[str, Any],
    nodes: Sequence[Node],
    conf: ServiceConfig,
    default_method: str,
    serial: bool,
) -> LB:
    """Upstream ``ensureOctaviaPool``: the pool, its method and its members."""
    pool = octavia.pool_of_listener(lb_id, str(listener["id"]))
    wanted = pool_protocol(str(listener.get("protocol")), conf)
    if pool is None or pool.get("protocol") != wanted:
        refuse_unknown_method(conf)  # a pool is to be made
    if pool is not None and pool.get("protocol") != wanted:
        log.info("Deleting unused pool %s of listener %s", pool.get("id"), listener.get("id"))
        octavia.delete_pool(lb_id, str(pool["id"]))
        pool = None
    method = conf.lb_method or default_method
    if pool is not None:
        _fix_method(octavia, lb_id, pool, method)
    else:
        body = build_pool(str(listener.get("protocol")), service, conf, default_method, name)
        log.info(
            "Creating pool for listener %s using protocol %s", listener.get("id"), body["protocol"]
        )
        pool = octavia.create_pool(lb_id, {**body, "listener_id": listener["id"]})
    ensure_members(octavia, lb_id, pool, port, nodes, conf, serial)
    return pool
