"""The Alibaba Cloud Python SDKs (``alibabacloud-ecs20140526``, ``-vpc20160428``,
``-slb20140515`` on ``alibabacloud-tea-openapi`` 0.4) as judges of the emulator: by default they
sign with v3 (``ACS3-HMAC-SHA256``, the action in ``x-acs-action``), with
``signature_algorithm="v2"`` with the classic v1 (HMAC-SHA1, ``Action`` a parameter); the
emulator answers both, refuses a wrong secret either way with ``SignatureDoesNotMatch``, and
its answers parse into the SDKs' models."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest
from alibaba_emu_support import VPC, VSWITCH, parts, seeded
from alibabacloud_ecs20140526 import models as ecs_models
from alibabacloud_ecs20140526.client import Client as EcsClient
from alibabacloud_slb20140515 import models as slb_models
from alibabacloud_slb20140515.client import Client as SlbClient
from alibabacloud_tea_openapi.exceptions import ClientException
from alibabacloud_tea_openapi.models import Config
from alibabacloud_vpc20160428 import models as vpc_models
from alibabacloud_vpc20160428.client import Client as VpcClient

from kccm.emulators.alibabacloud import AlibabaEmulator
from kccm.providers.alibabacloud.loadbalancer.endpoint_members import eni_ids

REGION = "cn-hangzhou"
SIGNATURES = {"v3-the-sdks-default": (None, "v3"), "v1-classic": ("v2", "v1")}


def config(emu: AlibabaEmulator, algorithm: str | None, secret: str = "kccm-secret") -> Config:
    return Config(
        access_key_id="kccm-ak",
        access_key_secret=secret,
        endpoint=urllib.parse.urlsplit(emu.url).netloc,
        protocol="http",
        region_id=REGION,
        signature_algorithm=algorithm,
    )


@pytest.fixture
def instance(clean: AlibabaEmulator) -> Iterator[str]:
    for made in seeded(clean, "10.0.6.1"):
        yield str(made["InstanceId"])


def signatures(emu: AlibabaEmulator, since: int) -> set[str]:
    return {r["signature"] for r in emu.admin.requests(since)}


@pytest.mark.parametrize("signature", list(SIGNATURES), ids=list(SIGNATURES))
def test_ecs_answers_the_sdk(clean: AlibabaEmulator, instance: str, signature: str) -> None:
    algorithm, sent = SIGNATURES[signature]
    since = clean.admin.last_seq()
    request = ecs_models.DescribeInstancesRequest(region_id=REGION, instance_ids=f'["{instance}"]')
    body = EcsClient(config(clean, algorithm)).describe_instances(request).body
    assert body.total_count == 1
    found = body.instances.instance[0]
    assert (found.instance_id, found.vpc_attributes.vpc_id) == (instance, VPC)
    assert found.vpc_attributes.v_switch_id == VSWITCH
    assert signatures(clean, since) == {sent}


@pytest.mark.parametrize("signature", list(SIGNATURES), ids=list(SIGNATURES))
def test_a_wrong_secret_is_refused(clean: AlibabaEmulator, signature: str) -> None:
    algorithm, _ = SIGNATURES[signature]
    client = EcsClient(config(clean, algorithm, secret="not-the-secret"))
    with pytest.raises(ClientException) as err:
        client.describe_instances(ecs_models.DescribeInstancesRequest(region_id=REGION))
    assert err.value.code == "SignatureDoesNotMatch"


@pytest.mark.parametrize("signature", list(SIGNATURES), ids=list(SIGNATURES))
def test_a_balancer_its_listener_and_group_through_the_slb_sdk(
    clean: AlibabaEmulator, instance: str, signature: str
) -> None:
    algorithm, sent = SIGNATURES[signature]
    slb = SlbClient(config(clean, algorithm))
    since = clean.admin.last_seq()
    made = slb.create_load_balancer(
        slb_models.CreateLoadBalancerRequest(region_id=REGION, load_balancer_name="sdk")
    ).body
    lb_id = made.load_balancer_id
    try:
        group = slb.create_vserver_group(
            slb_models.CreateVServerGroupRequest(
                region_id=REGION,
                load_balancer_id=lb_id,
                vserver_group_name="g",
                backend_servers=f'[{{"ServerId": "{instance}", "Port": 30080}}]',
            )
        ).body.vserver_group_id
        slb.create_load_balancer_tcplistener(
            slb_models.CreateLoadBalancerTCPListenerRequest(
                region_id=REGION,
                load_balancer_id=lb_id,
                listener_port=80,
                bandwidth=-1,
                vserver_group_id=group,
                health_check_interval=5,
            )
        )
        listed = slb.describe_load_balancer_listeners(
            slb_models.DescribeLoadBalancerListenersRequest(
                region_id=REGION, load_balancer_id=[lb_id]
            )
        ).body.listeners
        assert [(i.listener_port, i.status, i.vserver_group_id) for i in listed] == [
            (80, "stopped", group)
        ]
        assert listed[0].tcplistener_config.health_check_interval == 5
        found = slb.describe_load_balancers(
            slb_models.DescribeLoadBalancersRequest(region_id=REGION, load_balancer_name="sdk")
        ).body.load_balancers.load_balancer
        assert [(b.load_balancer_id, b.address) for b in found] == [(lb_id, made.address)]
    finally:
        slb.delete_load_balancer(
            slb_models.DeleteLoadBalancerRequest(region_id=REGION, load_balancer_id=lb_id)
        )
    assert signatures(clean, since) == {sent}


def test_a_balancers_eips_through_the_vpc_sdk(clean: AlibabaEmulator) -> None:
    eip = clean.admin.add_eip("39.0.1.1", "lb-sdk")
    try:
        request = vpc_models.DescribeEipAddressesRequest(
            region_id=REGION,
            associated_instance_type="SlbInstance",
            associated_instance_id="lb-sdk",
        )
        body = VpcClient(config(clean, None)).describe_eip_addresses(request).body
        assert [e.ip_address for e in body.eip_addresses.eip_address] == ["39.0.1.1"]
        assert body.total_count == 1
    finally:
        clean.admin.delete_eip(eip)


@pytest.mark.parametrize("signature", list(SIGNATURES), ids=list(SIGNATURES))
def test_enis_by_private_ip_through_the_ecs_sdk_and_kccm(
    clean: AlibabaEmulator, signature: str
) -> None:
    """ENI backends find each pod IP's ENI by ``PrivateIpAddress.N`` (upstream ecs.go
    ``DescribeNetworkInterfaces``): secondary IPs count, other VPCs' ENIs do not."""
    algorithm, _ = SIGNATURES[signature]
    pods = ["10.0.6.20", "10.0.6.21"]
    for made in seeded(clean, "10.0.6.2", secondary_ips=pods):
        request = ecs_models.DescribeNetworkInterfacesRequest(
            region_id=REGION,
            vpc_id=VPC,
            status="InUse",
            private_ip_address=["10.0.6.21", "10.0.9.9"],
            max_results=100,
        )
        client = EcsClient(config(clean, algorithm))
        body = client.describe_network_interfaces(request).body
        (eni,) = body.network_interface_sets.network_interface_set
        assert eni.instance_id == made["InstanceId"]
        ips = [p.private_ip_address for p in eni.private_ip_sets.private_ip_set]
        assert ips == ["10.0.6.2", *pods]
        request.vpc_id = "vpc-other"
        assert client.describe_network_interfaces(request).body.total_count == 0
        found = eni_ids(parts(clean).rpc, VPC, ["10.0.6.20", "10.0.9.9"])
        assert found == {ip: eni.network_interface_id for ip in ["10.0.6.2", *pods]}
