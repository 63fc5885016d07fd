"""OCCM's seven Kubernetes Event reasons (``pkg/openstack/events.go`` v1.36.0), recorded as
``Warning`` Events on the Service with OCCM's messages where kccm has the behaviour: through
:func:`~kccm.cloudprovider.servicewarnings.warn_service`, which the service controller turns
into an Event on the Service of the call (and which is logged outside one).
"""

from __future__ import annotations

import logging

from kccm.cloudprovider.servicewarnings import warn_service

__all__ = [
    "AZ_IGNORED",
    "EXTERNAL_NETWORK_SEARCH_FAILED",
    "FLOATING_IP_SKIPPED",
    "FORCED_INTERNAL",
    "LB_METHOD_UNKNOWN",
    "RENAME",
    "SOURCE_RANGES_IGNORED",
    "occm_event",
]

log = logging.getLogger(__name__)

FORCED_INTERNAL = "LoadBalancerForcedInternal"
EXTERNAL_NETWORK_SEARCH_FAILED = "LoadBalancerExternalNetworkSearchFailed"
SOURCE_RANGES_IGNORED = "LoadBalancerSourceRangesIgnored"
AZ_IGNORED = "LoadBalancerAvailabilityZonesIgnored"
FLOATING_IP_SKIPPED = "LoadBalancerFloatingIPSkipped"
RENAME = "LoadBalancerRename"
LB_METHOD_UNKNOWN = "LoadBalancerLbMethodUnknown"


def occm_event(reason: str, message: str) -> None:
    """A Warning Event with OCCM's reason and message on the Service being reconciled."""
    warn_service(reason, message)
