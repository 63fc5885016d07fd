"""The default pool of each listener (upstream ``buildPoolCreateOpt`` and
``ensureOctaviaPool`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

The pool protocol is the listener's, ``PROXY``/``PROXYV2`` with ``proxy-protocol``, ``HTTP``
with ``x-forwarded-for`` or TLS termination; a pool of the wrong protocol is deleted and made
again; a changed ``lb-method`` is one PUT (a refused method is logged, as upstream does);
``sessionAffinity: ClientIP`` is ``SOURCE_IP`` persistence on create.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import Node, Service
from kccm.providers.openstack.api import OpenStackError
from kccm.providers.openstack.loadbalancer.events import LB_METHOD_UNKNOWN, occm_event
from kccm.providers.openstack.loadbalancer.members import ensure_members
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["build_pool", "ensure_pool", "pool_protocol"]

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
