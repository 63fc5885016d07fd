"""The ``alibabacloud`` provider: meant as a drop-in for kubernetes/cloud-provider-alibaba-cloud
v2.14.0 (in progress): upstream's cloud config unchanged, its credential sources, a thin signed
RPC client on the standard library, InstancesV2 on ECS and routes in the VPC's route tables.
See docs/providers/alibabacloud.md.
"""

from kccm.providers.alibabacloud.provider import PROVIDER_NAME, AlibabaCloud, new_alibabacloud_cloud

__all__ = ["PROVIDER_NAME", "AlibabaCloud", "new_alibabacloud_cloud"]
