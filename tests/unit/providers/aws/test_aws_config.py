"""The aws cloud config: upstream's [Global] keys, endpoint overrides, every problem named."""

from __future__ import annotations

import io

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.registry import get_cloud_provider, known_cloud_providers
from kccm.providers.aws import AWSCloud, new_aws_cloud
from kccm.providers.aws.config import load_aws_config

FULL = """
[Global]
Zone = eu-west-1b
VPC = vpc-1
SubnetID = subnet-1
RouteTableID = rtb-1
KubernetesClusterID = prod
NodeIPFamilies = ipv4
NodeIPFamilies = ipv6

[ServiceOverride "1"]
Service = ec2
Region = eu-west-1
URL = http://127.0.0.1:5000
SigningRegion = eu-west-1

[ServiceOverride "2"]
Service = elasticloadbalancing
URL = http://127.0.0.1:5001
"""


def test_upstream_keys_are_read() -> None:
    config = load_aws_config(FULL)
    glob = config.global_
    assert (glob.vpc, glob.subnet_id, glob.route_table_id) == ("vpc-1", "subnet-1", "rtb-1")
    assert config.cluster_id == "prod"
    assert config.region == "eu-west-1"  # derived from Zone
    assert config.ip_families == ("ipv4", "ipv6")
    ec2, elbv2 = config.endpoint("ec2"), config.endpoint("elbv2")
    assert ec2 is not None
    assert ec2.url == "http://127.0.0.1:5000"
    assert elbv2 is not None
    assert elbv2.url == "http://127.0.0.1:5001"


def test_the_legacy_cluster_tag_is_the_cluster_id_when_alone() -> None:
    text = "[Global]\nRegion = us-east-1\nKubernetesClusterTag = old\n"
    assert load_aws_config(text).cluster_id == "old"
    cloud = new_aws_cloud(io.StringIO(text))
    assert cloud.tagging.uses_legacy_tag
    assert cloud.tagging.build({})["KubernetesCluster"] == "old"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "[Global]\nVPC = vpc-1\n", "Region (or Zone) is required", id="no-region-nor-zone"
        ),
        pytest.param(
            "[Global]\nZone = moon\n", "'moon' is not an availability zone", id="zone-is-not-a-zone"
        ),
        pytest.param(
            "[Global]\nZone = eu-west-1a\nRegion = us-east-1\n",
            "'eu-west-1a' is not in Region 'us-east-1'",
            id="zone-outside-the-region",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nKubernetesClusterTag = a\nKubernetesClusterID = b\n",
            "KubernetesClusterTag 'a' and KubernetesClusterID 'b' differ",
            id="two-different-cluster-ids",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nNodeIPFamilies = ipv5\n",
            "'ipv5' is not ipv4 or ipv6",
            id="unknown-ip-family",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nRoleARN = arn:aws:iam::1:role/x\n",
            "RoleARN: not supported",
            id="role-arn-is-refused-with-the-alternative",
        ),
        pytest.param(
            '[Global]\nRegion = us-east-1\n[ServiceOverride "x"]\nService = s3\nURL = http://h\n',
            '[ServiceOverride "x"] Region: is required',
            id="override-in-upstream-form-without-region",
        ),
        pytest.param(
            '[Global]\nRegion = us-east-1\n[ServiceOverride "x"]\nService = EC2\nURL = http://h\n'
            "Region = us-east-1\n",
            '[ServiceOverride "x"] SigningRegion: is required',
            id="upstream-service-id-without-signing-region",
        ),
        pytest.param(
            '[Global]\nRegion = us-east-1\n[ServiceOverride "a"]\nService = ec2\nURL = http://h\n'
            '[ServiceOverride "b"]\nService = ec2\nURL = http://i\n',
            "duplicate override of 'ec2' in region (any)",
            id="duplicate-override",
        ),
        pytest.param(
            "[Global]\nRegion = mars-north-1\n",
            "'mars-north-1' is not an AWS region known to botocore",
            id="unknown-region",
        ),
        pytest.param(
            '[Global]\nRegion = us-east-1\n[ServiceOverride "x"]\nService = ec2\nURL = ftp://h\n',
            "'ftp://h' is not an http(s) URL",
            id="override-url-not-http",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nClusterServiceLoadBalancerHealthProbeMode = Sometimes\n",
            "'Sometimes' is not ServiceNodePort or Shared",
            id="unknown-health-probe-mode",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nAPIMaxAttempts = 0\n",
            "APIMaxAttempts: 0 must be at least 1",
            id="no-attempts",
        ),
        pytest.param(
            "[Global]\nRegion = us-east-1\nSupportedTopologyInstanceTypePattern = ^(p|trn\n",
            "SupportedTopologyInstanceTypePattern: '^(p|trn' is not a regular expression",
            id="topology-pattern-not-a-regex",
        ),
        pytest.param("[Global]\nRegion = us-east-1\nColour = blue\n", "Colour", id="unknown-key"),
    ],
)
def test_a_bad_config_is_refused_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_aws_config(text)
    assert message in str(caught.value)


UPSTREAM_FORM = """
[Global]
Region = eu-west-1

[ServiceOverride "1"]
Service = EC2
Region = eu-west-1
URL = https://ec2.example.internal
SigningRegion = eu-west-1

[ServiceOverride "2"]
Service = Elastic Load Balancing
Region = eu-west-1
URL = https://elb.example.internal
SigningRegion = eu-west-1

[ServiceOverride "3"]
Service = Elastic Load Balancing v2
Region = eu-west-1
URL = https://elbv2.example.internal
SigningRegion = eu-central-1

[ServiceOverride "4"]
Service = EC2
Region = us-east-1
URL = https://elsewhere.example.internal
SigningRegion = us-east-1

[ServiceOverride "5"]
Service = S3
Region = eu-west-1
URL = https://s3.example.internal
SigningRegion = eu-west-1
"""


def test_upstream_service_ids_configure_the_clients_of_their_region() -> None:
    config = load_aws_config(UPSTREAM_FORM)
    found = {client: config.endpoint(client) for client in ("ec2", "elb", "elbv2")}
    assert {c: o.url if o else None for c, o in found.items()} == {
        "ec2": "https://ec2.example.internal",
        "elb": "https://elb.example.internal",
        "elbv2": "https://elbv2.example.internal",
    }
    cloud = AWSCloud(config)
    assert cloud.api.elbv2.meta.region_name == "eu-central-1"  # the SigningRegion


def test_a_private_region_is_accepted_when_its_endpoints_are_overridden() -> None:
    text = (
        "[Global]\nRegion = private-1\n"
        '[ServiceOverride "a"]\nService = ec2\nURL = http://h\n'
        '[ServiceOverride "b"]\nService = elasticloadbalancing\nURL = http://h\n'
    )
    assert load_aws_config(text).region == "private-1"


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(CloudConfigError) as caught:
        load_aws_config("[Global]\nNodeIPFamilies = ipv5\nAPIMaxAttempts = 0\n")
    assert len(caught.value.issues) == 3


def test_without_a_cluster_id_the_provider_says_so() -> None:
    cloud = new_aws_cloud(io.StringIO("[Global]\nRegion = us-east-1\n"))
    assert not cloud.has_cluster_id()
    assert cloud.tagging.owns([])  # upstream: an untagged cloud considers every resource


def test_the_provider_is_registered_as_aws() -> None:
    assert "aws" in known_cloud_providers()
    cloud = get_cloud_provider("aws", io.StringIO("[Global]\nZone = us-east-1a\n"))
    assert isinstance(cloud, AWSCloud)
    assert cloud.provider_name() == "aws"
