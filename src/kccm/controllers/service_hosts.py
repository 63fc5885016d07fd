"""A load balancer's hosts after a node change (upstream ``lockedUpdateLoadBalancerHosts``'s
cloud call and its events)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kccm.cloudprovider.errors import ImplementedElsewhere
from kccm.cloudprovider.gate import Priority
from kccm.cloudprovider.gated import GatedLoadBalancer
from kccm.controllers.service_nodes import loggable_node_names
from kccm.controllers.service_predicates import service_key
from kccm.kube.interface import Obj
from kccm.runtime.events import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EventRecorder, ObjectRef

__all__ = ["service_ref", "update_hosts"]

_log = logging.getLogger("kccm.controllers.service")


def service_ref(service: Mapping[str, Any]) -> ObjectRef:
    """The Event's involvedObject. Listed objects carry no kind/apiVersion, so they are set
    here, as client-go's reference.GetReference fills them from the scheme."""
    return replace(ObjectRef.of(service), kind="Service", api_version="v1")


async def update_hosts(
    balancer: GatedLoadBalancer,
    cluster_name: str,
    recorder: EventRecorder,
    service: Obj,
    hosts: Sequence[Mapping[str, Any]],
) -> None:
    """``update_load_balancer`` with upstream's events; raises when the update failed and the
    load balancer still exists."""
    try:
        await balancer.update_load_balancer(cluster_name, service, hosts, priority=Priority.NORMAL)
    except ImplementedElsewhere:
        return
    except Exception as err:
        if not await _still_exists(balancer, cluster_name, service):
            return
        names = " ".join(loggable_node_names(hosts))
        message = (
            f"Error updating load balancer with new hosts [{names}] [node names limited, "
            f"total number of nodes: {len(hosts)}], error: {err}"
        )
        recorder.event(
            service_ref(service), EVENT_TYPE_WARNING, "UpdateLoadBalancerFailed", message
        )
        raise
    if hosts:
        reason, kind, message = (
            "UpdatedLoadBalancer",
            EVENT_TYPE_NORMAL,
            "Updated load balancer with new hosts",
        )
    else:
        reason, kind, message = (
            "UnAvailableLoadBalancer",
            EVENT_TYPE_WARNING,
            "There are no available nodes for LoadBalancer",
        )
    recorder.event(service_ref(service), kind, reason, message)


async def _still_exists(balancer: GatedLoadBalancer, cluster_name: str, service: Obj) -> bool:
    """After a failed update: only an existing LB makes it a failure. A failed check is
    logged and counts as a failure, as upstream."""
    try:
        _, exists = await balancer.get_load_balancer(
            cluster_name, service, priority=Priority.NORMAL
        )
    except Exception as err:
        _log.error(
            "failed to check if load balancer exists for service %s: %s", service_key(service), err
        )
        return True
    return exists
