"""The Alibaba Cloud NLB Python SDK (``alibabacloud-nlb20220430`` on ``alibabacloud-tea-openapi``)
as a judge of the emulator's NLB: every call kind cloud-provider-alibaba-cloud v2.14.0's nlb
provider makes, signed v3 (the SDK's default, as upstream's Go client) or v1; the answers parse
into the SDK's models; writes start jobs that answer ``Processing`` once, then ``Succeeded``,
while the resource shows its transitional status."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from alibaba_emu_support import VPC, seeded
from alibaba_nlb_support import (
    REGION,
    SIGNATURES,
    TAG,
    ZONES,
    attribute,
    client,
    make_group,
    make_nlb,
    settle,
)
from alibabacloud_nlb20220430 import models as m
from alibabacloud_nlb20220430.client import Client
from alibabacloud_tea_openapi.exceptions import ClientException

from kccm.emulators.alibabacloud import AlibabaEmulator


@pytest.fixture
def instance(clean: AlibabaEmulator) -> Iterator[str]:
    for made in seeded(clean, "10.0.8.1"):
        yield str(made["InstanceId"])


def _balancer_goes_active(nlb: Client, lb_id: str) -> None:
    first, second = attribute(nlb, lb_id), attribute(nlb, lb_id)
    assert (first.load_balancer_status, second.load_balancer_status) == ("Provisioning", "Active")
    assert second.dnsname == f"{lb_id}.{REGION}.nlb.aliyuncsslb.com"
    assert [(z.zone_id, z.v_switch_id) for z in second.zone_mappings] == ZONES
    addresses = [z.load_balancer_addresses[0] for z in second.zone_mappings]
    assert all(a.private_ipv_4address and a.public_ipv_4address for a in addresses)
    assert {(t.tag_key, t.tag_value) for t in second.tags} == set(TAG.items())


def _servers_join(nlb: Client, group: str, instance: str) -> None:
    job = nlb.add_servers_to_server_group(
        m.AddServersToServerGroupRequest(
            server_group_id=group,
            servers=[
                m.AddServersToServerGroupRequestServers(
                    server_id=instance, server_type="Ecs", port=30080, weight=100
                )
            ],
        )
    ).body.job_id
    listed = nlb.list_server_group_servers(m.ListServerGroupServersRequest(server_group_id=group))
    server = listed.body.servers[0]
    assert (server.server_id, server.server_ip, server.port, server.status) == (
        instance,
        "10.0.8.1",
        30080,
        "Adding",
    )
    assert settle(nlb, job) == ["Succeeded"]


def _listener_runs(nlb: Client, lb_id: str, group: str) -> str:
    made = nlb.create_listener(
        m.CreateListenerRequest(
            load_balancer_id=lb_id,
            listener_protocol="TCP",
            listener_port=80,
            listener_description="k8s/80/svc-a/default/c1",
            server_group_id=group,
        )
    ).body
    request = m.ListListenersRequest(load_balancer_ids=[lb_id], max_results=100, next_token="")
    statuses = [nlb.list_listeners(request).body.listeners[0].listener_status for _ in range(2)]
    assert statuses == ["Provisioning", "Running"]
    assert settle(nlb, made.job_id) == ["Succeeded"]
    return str(made.listener_id)


def _changes(nlb: Client, lb_id: str, listener: str, group: str, instance: str) -> list[str]:
    """Every update upstream makes; the job of each."""
    return [
        nlb.update_listener_attribute(
            m.UpdateListenerAttributeRequest(
                listener_id=listener, idle_timeout=60, server_group_id=group
            )
        ).body.job_id,
        nlb.update_server_group_attribute(
            m.UpdateServerGroupAttributeRequest(server_group_id=group, scheduler="Sch")
        ).body.job_id,
        nlb.update_server_group_servers_attribute(
            m.UpdateServerGroupServersAttributeRequest(
                server_group_id=group,
                servers=[
                    m.UpdateServerGroupServersAttributeRequestServers(
                        server_id=instance, server_type="Ecs", port=30080, weight=50
                    )
                ],
            )
        ).body.job_id,
        nlb.update_load_balancer_attribute(
            m.UpdateLoadBalancerAttributeRequest(load_balancer_id=lb_id, load_balancer_name="nlb-b")
        ).body.job_id,
        nlb.update_load_balancer_zones(
            m.UpdateLoadBalancerZonesRequest(
                load_balancer_id=lb_id,
                zone_mappings=[
                    m.UpdateLoadBalancerZonesRequestZoneMappings(zone_id=z, v_switch_id=v)
                    for z, v in [*ZONES, ("cn-hangzhou-j", "vsw-j")]
                ],
            )
        ).body.job_id,
        nlb.load_balancer_join_security_group(
            m.LoadBalancerJoinSecurityGroupRequest(
                load_balancer_id=lb_id, security_group_ids=["sg-1", "sg-2"]
            )
        ).body.job_id,
        nlb.load_balancer_leave_security_group(
            m.LoadBalancerLeaveSecurityGroupRequest(
                load_balancer_id=lb_id, security_group_ids=["sg-1"]
            )
        ).body.job_id,
        nlb.stop_listener(m.StopListenerRequest(listener_id=listener)).body.job_id,
        nlb.start_listener(m.StartListenerRequest(listener_id=listener)).body.job_id,
        nlb.update_load_balancer_address_type_config(
            m.UpdateLoadBalancerAddressTypeConfigRequest(
                load_balancer_id=lb_id, address_type="Intranet"
            )
        ).body.job_id,
    ]


def _changed(nlb: Client, lb_id: str, listener: str, group: str) -> None:
    lb = attribute(nlb, lb_id)
    assert (lb.load_balancer_name, lb.address_type, lb.security_group_ids) == (
        "nlb-b",
        "Intranet",
        ["sg-2"],
    )
    assert len(lb.zone_mappings) == 3
    assert not any(z.load_balancer_addresses[0].public_ipv_4address for z in lb.zone_mappings)
    found = nlb.list_listeners(m.ListListenersRequest(listener_ids=[listener])).body.listeners[0]
    assert (found.idle_timeout, found.listener_status) == (60, "Running")
    groups = nlb.list_server_groups(m.ListServerGroupsRequest(server_group_ids=[group])).body
    assert (
        groups.server_groups[0].scheduler,
        groups.server_groups[0].related_load_balancer_ids,
    ) == ("Sch", [lb_id])
    assert groups.server_groups[0].health_check.health_check_connect_port == 30080
    servers = nlb.list_server_group_servers(m.ListServerGroupServersRequest(server_group_id=group))
    assert servers.body.servers[0].weight == 50


def _taken_down(nlb: Client, lb_id: str, listener: str, group: str, instance: str) -> None:
    jobs = [
        nlb.delete_listener(m.DeleteListenerRequest(listener_id=listener)).body.job_id,
        nlb.remove_servers_from_server_group(
            m.RemoveServersFromServerGroupRequest(
                server_group_id=group,
                servers=[
                    m.RemoveServersFromServerGroupRequestServers(
                        server_id=instance, server_type="Ecs", port=30080
                    )
                ],
            )
        ).body.job_id,
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group)).body.job_id,
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id)).body.job_id,
    ]
    done = nlb.list_asyn_jobs(m.ListAsynJobsRequest(job_ids=jobs)).body.jobs
    assert [(j.id, j.status) for j in done] == [(j, "Processing") for j in jobs]
    assert [settle(nlb, j) for j in jobs] == [["Succeeded"]] * 4


@pytest.mark.parametrize("signature", list(SIGNATURES), ids=list(SIGNATURES))
def test_an_nlb_from_creation_to_deletion(
    clean: AlibabaEmulator, instance: str, signature: str
) -> None:
    algorithm, sent = SIGNATURES[signature]
    nlb = client(clean, algorithm)
    since = clean.admin.last_seq()
    group = make_group(nlb)
    assert [r["action"] for r in clean.admin.requests(since)][1:] == ["GetJobStatus"] * 2
    lb_id = make_nlb(nlb)
    _balancer_goes_active(nlb, lb_id)
    _servers_join(nlb, group, instance)
    listener = _listener_runs(nlb, lb_id, group)
    assert {s for j in _changes(nlb, lb_id, listener, group, instance) for s in settle(nlb, j)} == {
        "Processing",
        "Succeeded",
    }
    _changed(nlb, lb_id, listener, group)
    _taken_down(nlb, lb_id, listener, group, instance)
    assert {r["signature"] for r in clean.admin.requests(since)} == {sent}
    assert {r["service"] for r in clean.admin.requests(since)} == {"nlb"}


def test_finding_by_tag_and_name_and_paging(clean: AlibabaEmulator) -> None:
    nlb = client(clean)
    made = [make_nlb(nlb, name) for name in ("nlb-p1", "nlb-p2", "nlb-p3")]
    by_tag = m.ListLoadBalancersRequest(
        tag=[m.ListLoadBalancersRequestTag(key=k, value=v) for k, v in TAG.items()], max_results=2
    )
    first = nlb.list_load_balancers(by_tag).body
    by_tag.next_token = first.next_token
    second = nlb.list_load_balancers(by_tag).body
    assert [b.load_balancer_id for b in first.load_balancers + second.load_balancers] == sorted(
        made
    )
    assert (first.total_count, second.next_token) == (3, "")
    assert {(t.key, t.value) for t in first.load_balancers[0].tags} == set(TAG.items())
    by_name = nlb.list_load_balancers(
        m.ListLoadBalancersRequest(load_balancer_names=["nlb-p2"])
    ).body
    assert [b.load_balancer_name for b in by_name.load_balancers] == ["nlb-p2"]
    for lb_id in made:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))


def test_tags_on_balancers(clean: AlibabaEmulator) -> None:
    nlb = client(clean)
    lb_id = make_nlb(nlb)
    try:
        nlb.tag_resources(
            m.TagResourcesRequest(
                resource_type="loadbalancer",
                resource_id=[lb_id],
                tag=[m.TagResourcesRequestTag(key="k2", value="v2")],
            )
        )
        nlb.untag_resources(
            m.UntagResourcesRequest(
                resource_type="loadbalancer", resource_id=[lb_id], tag_key=[*TAG]
            )
        )
        listed = nlb.list_tag_resources(
            m.ListTagResourcesRequest(resource_type="loadbalancer", resource_id=[lb_id])
        )
        assert [(t.resource_id, t.tag_key, t.tag_value) for t in listed.body.tag_resources] == [
            (lb_id, "k2", "v2")
        ]
    finally:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))


def test_regions_and_zones(clean: AlibabaEmulator) -> None:
    nlb = client(clean)
    regions = nlb.describe_regions(m.DescribeRegionsRequest()).body.regions
    zones = nlb.describe_zones(m.DescribeZonesRequest(region_id=REGION)).body.zones
    assert [r.region_id for r in regions] == [REGION]
    assert {z for z, _ in ZONES} <= {z.zone_id for z in zones}


def _one_zone(nlb: Client) -> Any:
    return nlb.create_load_balancer(
        m.CreateLoadBalancerRequest(
            address_type="Internet",
            vpc_id=VPC,
            zone_mappings=[
                m.CreateLoadBalancerRequestZoneMappings(
                    zone_id="cn-hangzhou-h", v_switch_id="vsw-h"
                )
            ],
        )
    )


def _protected(nlb: Client) -> Any:
    lb_id = make_nlb(
        nlb,
        deletion_protection_config=m.CreateLoadBalancerRequestDeletionProtectionConfig(
            enabled=True
        ),
    )
    try:
        return nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
    finally:
        nlb.update_load_balancer_protection(
            m.UpdateLoadBalancerProtectionRequest(
                load_balancer_id=lb_id, deletion_protection_enabled=False
            )
        )
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))


def _group_in_use(nlb: Client) -> Any:
    group, lb_id = make_group(nlb), make_nlb(nlb)
    nlb.create_listener(
        m.CreateListenerRequest(
            load_balancer_id=lb_id, listener_protocol="TCP", listener_port=80, server_group_id=group
        )
    )
    try:
        return nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))
    finally:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


def _udp_on_a_tcp_group(nlb: Client) -> Any:
    group, lb_id = make_group(nlb), make_nlb(nlb)
    try:
        return nlb.create_listener(
            m.CreateListenerRequest(
                load_balancer_id=lb_id,
                listener_protocol="UDP",
                listener_port=53,
                server_group_id=group,
            )
        )
    finally:
        nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


def _unknown_instance(nlb: Client) -> Any:
    group = make_group(nlb)
    try:
        return nlb.add_servers_to_server_group(
            m.AddServersToServerGroupRequest(
                server_group_id=group,
                servers=[
                    m.AddServersToServerGroupRequestServers(
                        server_id="i-none", server_type="Ecs", port=1
                    )
                ],
            )
        )
    finally:
        nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


REFUSALS: dict[str, tuple[Callable[[Client], Any], str]] = {
    "unknown-balancer": (lambda c: attribute(c, "nlb-none"), "ResourceNotFound.loadBalancer"),
    "unknown-job": (
        lambda c: c.get_job_status(m.GetJobStatusRequest(job_id="job-none")),
        "ResourceNotFound.job",
    ),
    "one-zone": (_one_zone, "IllegalParam.ZoneMappings"),
    "deletion-protection": (_protected, "OperationDenied.DeletionProtection"),
    "group-in-use": (_group_in_use, "ResourceInUse.ServerGroup"),
    "udp-on-a-tcp-group": (_udp_on_a_tcp_group, "IllegalParam.ServerGroupId"),
    "unknown-instance": (_unknown_instance, "ResourceNotFound.BackendServer"),
}


@pytest.mark.parametrize("case", list(REFUSALS), ids=list(REFUSALS))
def test_refusals(clean: AlibabaEmulator, case: str) -> None:
    call, code = REFUSALS[case]
    clean.admin.set_job_reads(0)
    with pytest.raises(ClientException) as err:
        call(client(clean))
    assert err.value.code == code


def test_a_job_a_fault_fails_leaves_no_listener(clean: AlibabaEmulator) -> None:
    nlb = client(clean)
    group, lb_id = make_group(nlb), make_nlb(nlb)
    clean.admin.fault("nlb:CreateListener", job_status="Failed", job_reads=2)
    job = nlb.create_listener(
        m.CreateListenerRequest(
            load_balancer_id=lb_id, listener_protocol="TCP", listener_port=80, server_group_id=group
        )
    ).body.job_id
    assert settle(nlb, job) == ["Processing", "Processing", "Failed"]
    assert (
        nlb.list_listeners(m.ListListenersRequest(load_balancer_ids=[lb_id])).body.listeners == []
    )
    nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
    nlb.delete_server_group(m.DeleteServerGroupRequest(server_group_id=group))


def test_nlb_writes_are_mutating_and_its_reads_are_not(clean: AlibabaEmulator) -> None:
    nlb = client(clean)
    since = clean.admin.last_seq()
    lb_id = make_nlb(nlb)
    attribute(nlb, lb_id)
    nlb.delete_load_balancer(m.DeleteLoadBalancerRequest(load_balancer_id=lb_id))
    assert [r["action"] for r in clean.admin.mutating(since)] == [
        "CreateLoadBalancer",
        "DeleteLoadBalancer",
    ]
