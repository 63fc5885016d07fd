"""A throttled ECS or VPC call pauses its method group in kccm's call gate, and `kccm
explain`'s reason is `throttled`; no credential reaches the log."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ali_stub import StubRPC
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import Throttled
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.reasons import Reason, classify
from kccm.providers.alibabacloud.config import load_alibaba_config
from kccm.providers.alibabacloud.errors import api_error
from kccm.providers.alibabacloud.instances import EcsInstances
from kccm.providers.alibabacloud.provider import build_parts
from kccm.providers.alibabacloud.routes import Tables, VpcRoutes
from kccm.util.clock import FakeClock


def throttle(code: str) -> Any:
    def answer(params: Mapping[str, Any]) -> dict[str, Any]:
        raise api_error(
            400, {"Code": code, "Message": "Request was denied due to flow control."}, "x"
        )

    return answer


@pytest.mark.parametrize("code", ["Throttling.User", "Throttling", "ServiceUnavailable"])
async def test_a_throttled_instance_call_pauses_the_instances_group(code: str) -> None:
    rpc = StubRPC({"ecs:DescribeInstances": throttle(code)})
    instances = EcsInstances(rpc, load_alibaba_config("Global: {}\n"), "vpc-1")  # type: ignore[arg-type]
    clock = FakeClock()
    gate = CallGate(registry=CollectorRegistry(), clock=clock)
    node = {"metadata": {"name": "n"}, "spec": {"providerID": "cn-hangzhou.i-1"}}
    try:
        with pytest.raises(Throttled) as caught:
            await gate.call("instance_exists", instances.instance_exists, node)
        assert classify(caught.value) is Reason.THROTTLED
        assert gate.paused_until("instances") > clock.monotonic()
        assert gate.paused_until("routes") <= clock.monotonic()
    finally:
        gate.close()


async def test_a_throttled_route_call_pauses_the_routes_group() -> None:
    rpc = StubRPC({"vpc:DescribeRouteTableList": throttle("Throttling.Api")})
    routes = VpcRoutes(Tables(rpc, load_alibaba_config("Global: {}\n"), "vpc-1"), "cn-hangzhou")  # type: ignore[arg-type]
    clock = FakeClock()
    gate = CallGate(registry=CollectorRegistry(), clock=clock)
    try:
        with pytest.raises(Throttled):
            await gate.call("list_routes", routes.list_routes, "kubernetes")
        assert gate.paused_until("routes") > clock.monotonic()
        assert gate.paused_until("instances") <= clock.monotonic()
    finally:
        gate.close()


def test_no_credential_in_the_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = "kccm-alibaba-secret-do-not-log"
    text = (
        "Global:\n  region: cn-hangzhou\n  vpcid: vpc-1\n  vswitchid: vsw-1\n"
        f"  accessKeyID: {base64.b64encode(b'LTAIkccm').decode()}\n"
        f"  accessKeySecret: {base64.b64encode(secret.encode()).decode()}\n"
    )
    caplog.set_level(logging.DEBUG)
    parts = build_parts(load_alibaba_config(text), {}, addon_token=tmp_path / "absent")
    assert parts.credentials.get().secret == secret
    assert secret not in caplog.text
    assert base64.b64encode(secret.encode()).decode() not in caplog.text
    assert secret not in repr(parts)
