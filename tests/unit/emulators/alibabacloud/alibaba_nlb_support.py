"""What the NLB tests of the Alibaba Cloud emulator share: the NLB Python SDK's client on a
running emulator, a job polled until it settles, a server group and an NLB made."""

from __future__ import annotations

import urllib.parse
from typing import Any

from alibaba_emu_support import VPC
from alibabacloud_nlb20220430 import models as m
from alibabacloud_nlb20220430.client import Client
from alibabacloud_tea_openapi.models import Config

from kccm.emulators.alibabacloud import AlibabaEmulator

REGION = "cn-hangzhou"
ZONES = [("cn-hangzhou-h", "vsw-h"), ("cn-hangzhou-i", "vsw-i")]
TAG = {"kubernetes.do.not.delete": "svc-a"}
SIGNATURES = {"v3-the-sdks-default": (None, "v3"), "v1-classic": ("v2", "v1")}


def client(emu: AlibabaEmulator, algorithm: str | None = None) -> Client:
    return Client(
        Config(
            access_key_id="kccm-ak",
            access_key_secret="kccm-secret",
            endpoint=urllib.parse.urlsplit(emu.url).netloc,
            protocol="http",
            region_id=REGION,
            signature_algorithm=algorithm,
        )
    )


def settle(nlb: Client, job_id: str) -> list[str]:
    """``GetJobStatus`` until the job is done: the statuses it answered."""
    seen = [nlb.get_job_status(m.GetJobStatusRequest(job_id=job_id)).body.status]
    while seen[-1] == "Processing":
        seen.append(nlb.get_job_status(m.GetJobStatusRequest(job_id=job_id)).body.status)
    return seen


def make_group(nlb: Client, name: str = "sg-80", protocol: str = "TCP") -> str:
    body = nlb.create_server_group(
        m.CreateServerGroupRequest(
            server_group_name=name,
            vpc_id=VPC,
            protocol=protocol,
            scheduler="Wrr",
            tag=[m.CreateServerGroupRequestTag(key=k, value=v) for k, v in TAG.items()],
            health_check_config=m.CreateServerGroupRequestHealthCheckConfig(
                health_check_enabled=True, health_check_connect_port=30080
            ),
        )
    ).body
    assert settle(nlb, body.job_id)[-1] == "Succeeded"
    return str(body.server_group_id)


def make_nlb(nlb: Client, name: str = "nlb-a", **extra: Any) -> str:
    lb_id = nlb.create_load_balancer(
        m.CreateLoadBalancerRequest(
            load_balancer_name=name,
            address_type="Internet",
            vpc_id=VPC,
            zone_mappings=[
                m.CreateLoadBalancerRequestZoneMappings(zone_id=z, v_switch_id=v) for z, v in ZONES
            ],
            tag=[m.CreateLoadBalancerRequestTag(key=k, value=v) for k, v in TAG.items()],
            **extra,
        )
    ).body.loadbalancer_id
    return str(lb_id)


def attribute(nlb: Client, lb_id: str) -> m.GetLoadBalancerAttributeResponseBody:
    request = m.GetLoadBalancerAttributeRequest(load_balancer_id=lb_id)
    return nlb.get_load_balancer_attribute(request).body
