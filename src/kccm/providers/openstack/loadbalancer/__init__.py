"""The openstack provider's ``LoadBalancer``: Service load balancers through Octavia, with
Neutron floating IPs, ports and security groups (upstream ``pkg/openstack/loadbalancer.go``
v1.36.0 and its helpers).

The entry is :class:`~.sharing.OctaviaSharing` (:class:`~.balancers.OctaviaLoadBalancers`
with kccm's share groups); :class:`~.servicepatch.KubeServicePatcher`
writes OCCM's ``load-balancer-id``/``-address`` annotations back. What a Service asks of its
balancer is read once, in :mod:`.annotations` (the annotations) and :mod:`.svcconf` (with the
``[LoadBalancer]`` options); the Octavia and Neutron calls are in :mod:`.octavia` and
:mod:`.neutron`.
"""

from kccm.providers.openstack.loadbalancer.balancers import OctaviaLoadBalancers
from kccm.providers.openstack.loadbalancer.servicepatch import KubeServicePatcher
from kccm.providers.openstack.loadbalancer.sharing import OctaviaSharing

__all__ = ["KubeServicePatcher", "OctaviaLoadBalancers", "OctaviaSharing"]
