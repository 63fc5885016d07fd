"""The ``vsphere`` provider: InstancesV2, Instances and Zones from vCenter, following the
upstream vSphere CPI (kubernetes/cloud-provider-vsphere). See docs/providers/vsphere.md.
Only this package imports pyvmomi."""

from kccm.providers.vsphere.provider import PROVIDER_NAME, VSphereCloud, new_vsphere_cloud

__all__ = ["PROVIDER_NAME", "VSphereCloud", "new_vsphere_cloud"]
