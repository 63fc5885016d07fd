"""Health monitors (upstream ``buildMonitorCreateOpts``, ``ensureOctaviaHealthMonitor`` in
``pkg/openstack/loadbalancer.go`` v1.36.0).

The type follows the port's protocol (``UDP-CONNECT`` for UDP); with
``externalTrafficPolicy: Local`` (and a monitor enabled) it is an HTTP ``GET /healthz``
expecting 200 on the healthCheckNodePort, where the provider allows HTTP monitors. A monitor
of the wrong type is replaced; other differences are one PUT.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kccm.providers.openstack.loadbalancer.members import can_use_http_monitor
from kccm.providers.openstack.loadbalancer.octavia import LB, Octavia
from kccm.providers.openstack.loadbalancer.svcconf import ServiceConfig

__all__ = ["build_monitor", "ensure_monitor"]

log = logging.getLogger(__name__)


def build_monitor(
    octavia: Octavia, conf: ServiceConfig, port: Mapping[str, Any], name: str
) -> dict[str, Any]:
    """Upstream ``buildMonitorCreateOpts`` as gophercloud serialises it (``max_retries_down``
    and the HTTP fields only when set)."""
    protocol = str(port.get("protocol") or "TCP")
    body: dict[str, Any] = {
        "name": name,
        "type": "UDP-CONNECT" if protocol == "UDP" else protocol,
        "delay": conf.monitor_delay,
        "timeout": conf.monitor_timeout,
        "max_retries": conf.monitor_max_retries,
    }
    if conf.monitor_max_retries_down:
        body["max_retries_down"] = conf.monitor_max_retries_down
    if conf.health_check_node_port > 0 and can_use_http_monitor(octavia, port):
        body.update(type="HTTP", url_path="/healthz", http_method="GET", expected_codes="200")
    return body


def _changes(monitor: LB, name: str, conf: ServiceConfig) -> dict[str, Any]:
    wanted = {
        "delay": conf.monitor_delay,
        "timeout": conf.monitor_timeout,
        "max_retries": conf.monitor_max_retries,
        "max_retries_down": conf.monitor_max_retries_down,
    }
    differs = name != monitor.get("name") or any(
        value != (monitor.get(key) or 0) for key, value in wanted.items()
    )
    if not differs:
        return {}
    # gophercloud's UpdateOpts: the name always, zero values left out.
    return {"name": name, **{k: v for k, v in wanted.items() if v}}


def ensure_monitor(
    octavia: Octavia, lb_id: str, name: str, pool: LB, port: Mapping[str, Any], conf: ServiceConfig
) -> None:
    """Upstream ``ensureOctaviaHealthMonitor``."""
    monitor_id = str(pool.get("healthmonitor_id") or "")
    if not monitor_id:
        if conf.enable_monitor:
            log.info("Creating monitor for pool %s", pool.get("id"))
            octavia.create_health_monitor(
                lb_id, {**build_monitor(octavia, conf, port, name), "pool_id": pool["id"]}
            )
        return
    if not conf.enable_monitor:
        log.info("Deleting health monitor %s for pool %s", monitor_id, pool.get("id"))
        octavia.delete_health_monitor(lb_id, monitor_id)
        return
    monitor = octavia.health_monitor(monitor_id)
    wanted = build_monitor(octavia, conf, port, name)
    if wanted["type"] != monitor.get("type"):
        log.info("Recreating health monitor %s for pool %s", monitor_id, pool.get("id"))
        octavia.delete_health_monitor(lb_id, monitor_id)
        octavia.create_health_monitor(lb_id, {**wanted, "pool_id": pool["id"]})
        return
    changes = _changes(monitor, name, conf)
    if changes:
        log.info("Updating health monitor %s: %s", monitor_id, sorted(changes))
        octavia.update_health_monitor(lb_id, monitor_id, changes)
