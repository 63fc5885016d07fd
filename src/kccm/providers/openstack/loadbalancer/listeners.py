"""One listener per Service port (upstream ``getListenerProtocol``,
``buildListenerCreateOpt``, ``ensureOctaviaListener``, ``checkListenerPorts``,
``deleteOctaviaListeners`` in ``pkg/openstack/loadbalancer.go`` v1.36.0).

A listener is found by (protocol, port); an existing one is compared field by field with what
the Service asks (tags, connection limit, ``X-Forwarded-For``, TLS container, the four
timeouts when Octavia >= 2.1, ``allowed_cidrs`` when >= 2.12) and one PUT sends only what
differs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kccm.cloudprovider import CloudProviderError
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = [
    "ListenerKey",
    "build_listener",
    "check_listener_ports",
    "delete_service_listeners",
    "ensure_listener",
    "listener_key",
    "listener_map",
    "listener_protocol",
]

log = logging.getLogger(__name__)

X_FORWARDED_FOR = "X-Forwarded-For"
ListenerKey = tuple[str, int]


def listener_protocol(protocol: str, conf: ServiceConfig | None) -> str:
    """Upstream ``getListenerProtocol``."""
    if conf is not None:
        if conf.tls_container_ref:
            return "TERMINATED_HTTPS"
        if conf.keep_client_ip:
            return "HTTP"
    return protocol or "TCP"


def listener_key(port: Mapping[str, Any], conf: ServiceConfig | None) -> ListenerKey:
    return listener_protocol(str(port.get("protocol") or "TCP"), conf), int(port.get("port", 0))


def listener_map(listeners: Sequence[LB]) -> dict[ListenerKey, LB]:
    return {
        (str(item.get("protocol")), int(item.get("protocol_port", 0))): item for item in listeners
    }


def build_listener(
    octavia: Octavia, port: Mapping[str, Any], conf: ServiceConfig, name: str
) -> dict[str, Any]:
    """Upstream ``buildListenerCreateOpt`` (as gophercloud serialises it)."""
    body: dict[str, Any] = {
        "name": name,
        "protocol": listener_protocol(str(port.get("protocol") or "TCP"), conf),
        "protocol_port": int(port.get("port", 0)),
        "connection_limit": conf.conn_limit,
    }
    if conf.support_tags:
        body["tags"] = [conf.lb_name]
    if conf.timeouts:
        body.update(conf.timeouts)
    if conf.keep_client_ip:
        body["insert_headers"] = {X_FORWARDED_FOR: "true"}
    if conf.tls_container_ref:
        body["default_tls_container_ref"] = conf.tls_container_ref
    if octavia.supports("vip_acl") and conf.allowed_cidrs:
        body["allowed_cidrs"] = list(conf.allowed_cidrs)
    return body


def _header_changes(listener: LB, conf: ServiceConfig) -> dict[str, Any]:
    headers = dict(listener.get("insert_headers") or {})
    if (headers.get(X_FORWARDED_FOR) == "true") == conf.keep_client_ip:
        return {}
    if conf.keep_client_ip:
        headers[X_FORWARDED_FOR] = "true"
    else:
        headers.pop(X_FORWARDED_FOR, None)
    return {"insert_headers": headers}


def listener_changes(octavia: Octavia, listener: LB, conf: ServiceConfig) -> dict[str, Any]:
    """The update ``ensureOctaviaListener`` sends for an existing listener (``{}``: none)."""
    changes: dict[str, Any] = {}
    if conf.support_tags and conf.lb_name not in (listener.get("tags") or ()):
        # Upstream copies the old tags into a nil slice (copying nothing): the PUT carries
        # the Service's tag alone. Kept, so the requests match OCCM's.
        changes["tags"] = [conf.lb_name]
    if conf.conn_limit != (listener.get("connection_limit") or 0):
        changes["connection_limit"] = conf.conn_limit
    changes.update(_header_changes(listener, conf))
    if conf.tls_container_ref != (listener.get("default_tls_container_ref") or ""):
        changes["default_tls_container_ref"] = conf.tls_container_ref
    for key, value in conf.timeouts.items():
        if value != (listener.get(key) or 0):
            changes[key] = value
    cidrs = set(listener.get("allowed_cidrs") or ())
    if octavia.supports("vip_acl") and set(conf.allowed_cidrs) != cidrs:
        changes["allowed_cidrs"] = list(conf.allowed_cidrs)
    return changes


def ensure_listener(
    octavia: Octavia,
    lb_id: str,
    name: str,
    current: Mapping[ListenerKey, LB],
    port: Mapping[str, Any],
    conf: ServiceConfig,
) -> LB:
    """Upstream ``ensureOctaviaListener``: create it, or update what differs."""
    listener = current.get(listener_key(port, conf))
    if listener is None:
        body = {**build_listener(octavia, port, conf, name), "loadbalancer_id": lb_id}
        log.info(
            "Creating listener for port %s using protocol %s",
            body["protocol_port"],
            body["protocol"],
        )
        return octavia.create_listener(lb_id, body)
    changes = listener_changes(octavia, listener, conf)
    if changes:
        log.info(
            "Updating listener %s of load balancer %s: %s",
            listener.get("id"),
            lb_id,
            sorted(changes),
        )
        octavia.update_listener(lb_id, str(listener["id"]), changes)
    return listener


def _used_by(listener: LB, owner: bool, lb_name: str) -> bool:
    tags = listener.get("tags") or ()
    return lb_name in tags or (owner and not tags)


def check_listener_ports(
    ports: Sequence[Mapping[str, Any]], current: Mapping[ListenerKey, LB], owner: bool, lb_name: str
) -> None:
    """Upstream ``checkListenerPorts``: a port another Service's listener uses is refused."""
    for port in ports:
        listener = current.get((str(port.get("protocol") or "TCP"), int(port.get("port", 0))))
        if listener is not None and not _used_by(listener, owner, lb_name):
            raise CloudProviderError(f"the listener port {port.get('port')} already exists")


def delete_service_listeners(
    octavia: Octavia, lb_id: str, listeners: Sequence[LB], owner: bool, lb_name: str
) -> None:
    """Upstream ``deleteOctaviaListeners``: this Service's leftover listeners and pools go."""
    for listener in listeners:
        if not _used_by(listener, owner, lb_name):
            continue
        pool = octavia.pool_of_listener(lb_id, str(listener["id"]))
        if pool is not None:
            octavia.delete_pool(lb_id, str(pool["id"]))
        octavia.delete_listener(lb_id, str(listener["id"]))
