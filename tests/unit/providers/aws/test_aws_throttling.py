"""AWS throttling: botocore retries absorb short bursts; what remains becomes Throttled, which
the call gate turns into a pause of the whole method group. Also: credentials never logged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import Throttled
from kccm.cloudprovider.gate import CallGate
from kccm.emulators.aws import FaultProxy, World, every_nth, node_for
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config
from kccm.util.clock import FakeClock


@pytest.fixture
def proxy(world: World) -> Iterator[FaultProxy]:
    fault = FaultProxy(world.url).start()
    yield fault
    fault.stop()


def _cloud(world: World, proxy: FaultProxy, attempts: int) -> AWSCloud:
    return AWSCloud(load_aws_config(world.cloud_config(proxy.url, APIMaxAttempts=str(attempts))))


def test_throttling_beyond_the_retries_is_the_contracts_throttled(
    world: World, proxy: FaultProxy, aws_env: None
) -> None:
    proxy.throttle = lambda service, action, seq: True
    v2 = _cloud(world, proxy, attempts=2).instances_v2()
    assert v2 is not None
    with pytest.raises(Throttled, match="Throttling"):
        v2.instance_exists(node_for(world, next(iter(world.instances))))
    assert sum(proxy.throttled.values()) == 2  # botocore tried twice


def test_an_occasional_throttle_is_absorbed_by_the_sdk_retries(
    world: World, proxy: FaultProxy, aws_env: None
) -> None:
    proxy.throttle = every_nth(2)
    v2 = _cloud(world, proxy, attempts=3).instances_v2()
    assert v2 is not None
    for instance_id in world.instances:
        assert v2.instance_exists(node_for(world, instance_id)) is True
    assert sum(proxy.throttled.values()) >= 1


async def test_the_call_gate_pauses_the_group_on_throttled(
    world: World, proxy: FaultProxy, aws_env: None
) -> None:
    proxy.throttle = lambda service, action, seq: True
    cloud = _cloud(world, proxy, attempts=1)
    clock = FakeClock()
    gate = CallGate(registry=CollectorRegistry(), clock=clock)
    v2 = cloud.instances_v2()
    assert v2 is not None
    try:
        with pytest.raises(Throttled):
            await gate.call(
                "instance_exists", v2.instance_exists, node_for(world, next(iter(world.instances)))
            )
        assert gate.paused_until("instances") > clock.monotonic()
    finally:
        gate.close()


def test_credentials_are_never_logged(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "kccm-secret-key-do-not-log"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAKCCMTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    caplog.set_level(logging.DEBUG)
    cloud = AWSCloud(load_aws_config(world.cloud_config()))
    lb = cloud.load_balancer()
    assert lb is not None
    svc = {
        "metadata": {"name": "s", "namespace": "n", "uid": "1234"},
        "spec": {"ports": [{"port": 80, "protocol": "TCP", "nodePort": 30000}]},
    }
    lb.ensure_load_balancer("k", svc, [node_for(world, i) for i in world.instances])
    lb.ensure_load_balancer_deleted("k", svc)
    assert caplog.records  # the provider did log
    assert secret not in caplog.text
    assert "AKIAKCCMTEST" not in caplog.text
