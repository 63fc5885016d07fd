"""The ``azure`` provider: a drop-in for sigs.k8s.io/cloud-provider-azure v1.36
(cloud-controller-manager; Node initialisation as its cloud-node-manager does it, centrally):
InstancesV2 from ARM (availability-set VMs and scale sets), routes on the configured route
table, Services on the shared ``kubernetes`` load balancer (the ``loadbalancer`` subpackage);
upstream's ``azure.json`` unchanged. See docs/providers/azure.md. Only this package imports
azure-core and azure-identity.
"""

from kccm.providers.azure.provider import PROVIDER_NAME, AzureCloud, new_azure_cloud

__all__ = ["PROVIDER_NAME", "AzureCloud", "new_azure_cloud"]
