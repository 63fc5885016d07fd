"""The ``openstack`` provider: a drop-in for openstack-cloud-controller-manager v1.36
(kubernetes/cloud-provider-openstack): InstancesV2 from Nova and Neutron, routes on a Neutron
router, Services as Octavia load balancers with floating IPs; OCCM's ``cloud.conf`` unchanged.
See docs/providers/openstack.md. Only this package imports keystoneauth1."""

from kccm.providers.openstack.provider import PROVIDER_NAME, OpenStackCloud, new_openstack_cloud

__all__ = ["PROVIDER_NAME", "OpenStackCloud", "new_openstack_cloud"]
