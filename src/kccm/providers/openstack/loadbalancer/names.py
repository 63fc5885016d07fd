"""OCCM's names for Octavia objects (``pkg/openstack/loadbalancer.go`` v1.36.0 constants
``lbFormat``, ``listenerFormat``, ``poolFormat``, ``monitorFormat``; ``loadbalancer_sg.go``
``getSecurityGroupName``; ``loadbalancer_rename.go`` ``getClusterName``).

Every name is cut to 255 characters (``util.Sprintf255``), byte-wise as Go slices strings.
"""

from __future__ import annotations

import re
from typing import Any

from kccm.cloudprovider import Service, default_load_balancer_name

__all__ = [
    "LISTENER_PREFIX",
    "MONITOR_PREFIX",
    "POOL_PREFIX",
    "SERVICE_PREFIX",
    "cluster_name_of",
    "cut255",
    "fip_description",
    "lb_description",
    "legacy_name",
    "listener_name",
    "load_balancer_name",
    "monitor_name",
    "pool_name",
    "security_group_description",
    "security_group_name",
    "service_key",
]

SERVICE_PREFIX = "kube_service_"
LISTENER_PREFIX = "listener_"
POOL_PREFIX = "pool_"
MONITOR_PREFIX = "monitor_"
FIP_DESCRIPTION_MARK = "Floating IP for Kubernetes external service"
"""What upstream's ``deleteFIPIfCreatedByProvider`` looks for before deleting a floating IP."""


def cut255(text: str) -> str:
    """Upstream ``util.CutString255``: the first 255 bytes (never splitting a character here:
    a cut inside a UTF-8 sequence drops that character)."""
    raw = text.encode()
    if len(raw) <= 255:
        return text
    return raw[:255].decode(errors="ignore")


def _meta(service: Service) -> Any:
    return service.get("metadata") or {}


def service_key(service: Service) -> str:
    """``<namespace>/<name>``."""
    meta = _meta(service)
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def load_balancer_name(cluster_name: str, service: Service) -> str:
    """Upstream ``GetLoadBalancerName``: ``kube_service_<cluster>_<namespace>_<name>``."""
    meta = _meta(service)
    return cut255(
        f"{SERVICE_PREFIX}{cluster_name}_{meta.get('namespace', '')}_{meta.get('name', '')}"
    )


def legacy_name(service: Service) -> str:
    """Upstream ``getLoadBalancerLegacyName``: ``cloudprovider.DefaultLoadBalancerName``
    (``a`` + the UID without dashes, 32 characters), still looked up for old balancers."""
    return default_load_balancer_name(service)


def listener_name(index: int, lb_name: str) -> str:
    return cut255(f"{LISTENER_PREFIX}{index}_{lb_name}")


def pool_name(index: int, lb_name: str) -> str:
    return cut255(f"{POOL_PREFIX}{index}_{lb_name}")


def monitor_name(index: int, lb_name: str) -> str:
    return cut255(f"{MONITOR_PREFIX}{index}_{lb_name}")


def lb_description(cluster_name: str, service: Service) -> str:
    """The description ``createOctaviaLoadBalancer`` gives a new balancer."""
    return f"Kubernetes external service {service_key(service)} from cluster {cluster_name}"


def fip_description(cluster_name: str, service: Service) -> str:
    """The description ``ensureFloatingIP`` gives a floating IP it creates."""
    return f"{FIP_DESCRIPTION_MARK} {service_key(service)} from cluster {cluster_name}"


def security_group_name(service: Service) -> str:
    """Upstream ``getSecurityGroupName``: ``lb-sg-<uid>-<namespace>-<name>``."""
    meta = _meta(service)
    name = f"lb-sg-{meta.get('uid', '')}-{meta.get('namespace', '')}-{meta.get('name', '')}"
    return cut255(name)


def security_group_description(cluster_name: str, service: Service) -> str:
    meta = _meta(service)
    return (
        f"Security Group for {meta.get('namespace', '')}/{meta.get('name', '')} "
        f"Service LoadBalancer in cluster {cluster_name}"
    )


def cluster_name_of(object_name: str, resource_prefix: str = "") -> str:
    """Upstream ``getClusterName``: the cluster part of an OCCM name (``""`` if none)."""
    pattern = re.compile(f"{resource_prefix}{SERVICE_PREFIX}(.+?)_[^_]+(_[^_]+)?$")
    match = pattern.search(object_name)
    return match.group(1) if match else ""
