"""The ``aws`` provider: InstancesV2 from EC2, routes in the VPC route table, Services as
Network Load Balancers (ELBv2), following upstream cloud-provider-aws. See
docs/providers/aws.md. Only this package imports boto3/botocore."""

from kccm.providers.aws.provider import PROVIDER_NAME, AWSCloud, new_aws_cloud

__all__ = ["PROVIDER_NAME", "AWSCloud", "new_aws_cloud"]
