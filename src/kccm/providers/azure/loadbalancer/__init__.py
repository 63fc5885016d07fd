"""The azure provider's ``LoadBalancer``: one shared balancer per cluster (and one for
internal Services), public IPs, security group rules and backend pool membership, as
sigs.k8s.io/cloud-provider-azure v1.36.5 makes them.

The entry is :class:`~.balancers.AzureLoadBalancers`. What a Service asks is read once in
:mod:`.annotations`; names are in :mod:`.names`; the JSON each part wants is computed without
calls in :mod:`.lbrules`, :mod:`.lbmerge`, :mod:`.pips`, :mod:`.nsgrules` and :mod:`.access`;
the calls go through the :class:`~.armapi.ArmApi` Protocol (:mod:`.frontends`,
:mod:`.pools`, :mod:`.securitygroup`).
"""

from kccm.providers.azure.loadbalancer.armapi import ArmApi, PreconditionFailed
from kccm.providers.azure.loadbalancer.balancers import AzureLoadBalancers
from kccm.providers.azure.loadbalancer.names import LBSettings

__all__ = ["ArmApi", "AzureLoadBalancers", "LBSettings", "PreconditionFailed"]
