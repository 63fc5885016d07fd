"""The emulator's own NLB rules beyond the SDK judge: idempotent creation, dry runs, a port taken
twice, tags on every resource type, faults by product, and an instance released leaving its
server groups."""

from __future__ import annotations

import pytest
from alibaba_nlb_support import TAG, client, make_group, make_nlb
from alibabacloud_nlb20220430 import models as m
from alibabacloud_slb20140515 import models as slb_models
from alibabacloud_slb20140515.client import Client as SlbClient
from alibabacloud_tea_openapi.exceptions import ClientException
from test_alibaba_emulator_sdk import config as slb_config

from kccm.emulators.alibabacloud import AlibabaEmulator


@pytest.fixture
def settled(clean: AlibabaEmulator) -> AlibabaEmulator:
    """Jobs settle at once (the ``clean`` check puts the default back)."""
    clean.admin.set_job_reads(0)
    return clean


def test_a_client_token_sent_again_gives_the_first_balancer(settled: AlibabaEmulator) -> None:
    nlb = client(settled)
    first = make_nlb(nlb, client_token="token-1")
    assert make_nlb(nlb, client_token="token-1") == first
    assert settled.state()["nlb_balancers"] == [first]
    nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=first))


def test_a_dry_run_changes_nothing(settled: AlibabaEmulator) -> None:
    with pytest.raises(ClientException) as err:
        make_nlb(client(settled), dry_run=True)
    assert err.value.code == "DryRunOperation"
    assert settled.state()["nlb_balancers"] == []


@pytest.mark.parametrize(
    ("second", "code"),
    [("TCP", "Conflict.Port"), ("TCPSSL", "Conflict.Port"), ("UDP", "")],
    ids=["tcp-again", "tcpssl-shares-tcps-ports", "udp-has-its-own"],
)
def test_a_port_space_a_protocol_family(settled: AlibabaEmulator, second: str, code: str) -> None:
    nlb = client(settled)
    group, lb_id = make_group(nlb, protocol="TCPUDP"), make_nlb(nlb)
    listener = m.CreateListenerRequest(
        load_balancer_id=lb_id, listener_protocol="TCP", listener_port=443, server_group_id=group
    )
    nlb.create_listener(listener)
    listener.listener_protocol, listener.certificate_ids = second, ["cert-1"]
    try:
        if code:
            with pytest.raises(ClientException) as err:
                nlb.create_listener(listener)
            assert err.value.code == code
        else:
            nlb.create_listener(listener)
            assert len(settled.state()["nlb_listeners"]) == 2
    finally:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


def test_tags_on_listeners_and_server_groups(settled: AlibabaEmulator) -> None:
    nlb = client(settled)
    group, lb_id = make_group(nlb), make_nlb(nlb)
    listener = nlb.create_listener(
        m.CreateListenerRequest(
            load_balancer_id=lb_id,
            listener_protocol="TCP",
            listener_port=80,
            server_group_id=group,
            tag=[m.CreateListenerRequestTag(key="port", value="80")],
        )
    ).body.listener_id
    try:
        by_id = m.ListTagResourcesRequest(resource_type="listener", resource_id=[listener])
        listed = nlb.list_tag_resources(by_id).body.tag_resources
        assert [(t.resource_id, t.tag_key, t.tag_value) for t in listed] == [
            (listener, "port", "80")
        ]
        by_type = m.ListTagResourcesRequest(resource_type="servergroup")
        listed = nlb.list_tag_resources(by_type).body.tag_resources
        assert {(t.resource_id, t.tag_key, t.tag_value) for t in listed} == {
            (group, k, v) for k, v in TAG.items()
        }
    finally:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


def test_a_fault_named_for_the_nlb_spares_the_slb(settled: AlibabaEmulator) -> None:
    settled.admin.fault("nlb:CreateLoadBalancer", code="Throttling.User", times=0)
    slb = SlbClient(slb_config(settled, None))
    made = slb.create_load_balancer(slb_models.CreateLoadBalancerRequest(region_id="cn-hangzhou"))
    slb.delete_load_balancer(
        slb_models.DeleteLoadBalancerRequest(
            region_id="cn-hangzhou", load_balancer_id=made.body.load_balancer_id
        )
    )
    with pytest.raises(ClientException) as err:
        make_nlb(client(settled))
    assert err.value.code == "Throttling.User"


def test_an_instance_deleted_leaves_its_server_groups(settled: AlibabaEmulator) -> None:
    nlb = client(settled)
    group = make_group(nlb)
    made = settled.admin.add_instance(vpc="vpc-kccm", vswitch="vsw-kccm", private_ip="10.0.8.10")
    server = m.AddServersToServerGroupRequestServers(
        server_id=made["InstanceId"], server_type="Ecs", port=30080
    )
    nlb.add_servers_to_server_group(
        m.AddServersToServerGroupRequest(server_group_id=group, servers=[server])
    )
    settled.admin.delete_instance(made["InstanceId"])
    listed = nlb.list_server_group_servers(m.ListServerGroupServersRequest(server_group_id=group))
    assert listed.body.servers == []
    nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))
