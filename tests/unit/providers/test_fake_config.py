from __future__ import annotations

import io

import pytest

from kccm.cloudprovider import CloudConfigError
from kccm.cloudprovider.types import NodeAddress
from kccm.providers.fake import new_fake_cloud

CONFIG = """
[Global]
zone = z1
region = r1
disable = routes
latency = 0.25

[Instance "node-a"]
address = InternalIP=10.0.0.5
address = Hostname=node-a
instance-type = fake.large
"""


def test_cloud_config_declares_instances_and_capabilities() -> None:
    cloud = new_fake_cloud(io.StringIO(CONFIG))
    instance = cloud.instances_by_name["node-a"]
    assert instance.addresses == (
        NodeAddress(type="InternalIP", address="10.0.0.5"),
        NodeAddress(type="Hostname", address="node-a"),
    )
    assert (instance.instance_type, instance.zone, instance.region) == ("fake.large", "z1", "r1")
    assert cloud.routes() is None
    assert cloud.load_balancer() is not None


def test_no_config_is_an_empty_cloud() -> None:
    assert new_fake_cloud(None).instances_by_name == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '[Instance "a"]\naddress = 10.0.0.1\n',
            "is not <Type>=<address>",
            id="address-without-type",
        ),
        pytest.param(
            "[Global]\ndisable = teleport\n",
            "unknown capability 'teleport'",
            id="unknown-capability",
        ),
        pytest.param("[Global]\nlatency = soon\n", "latency", id="bad-number"),
    ],
)
def test_bad_config_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(CloudConfigError, match=message):
        new_fake_cloud(io.StringIO(text))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("nan", "nan is not a finite number of seconds", id="nan"),
        pytest.param("inf", "inf is not a finite number of seconds", id="infinite"),
        pytest.param("-0.5", "-0.5 s is outside 0 to 300 s", id="negative"),
        pytest.param("1e9", "1000000000.0 s is outside 0 to 300 s", id="huge"),
    ],
)
def test_a_bad_latency_is_a_config_error(value: str, message: str) -> None:
    with pytest.raises(CloudConfigError, match=rf"\[Global\] latency: {message}"):
        new_fake_cloud(io.StringIO(f"[Global]\nlatency = {value}\n"))


@pytest.mark.parametrize(
    ("seconds", "message"),
    [
        pytest.param(float("nan"), "nan is not a finite number", id="nan"),
        pytest.param(-1.0, "-1.0 s is outside 0 to 300 s", id="negative"),
        pytest.param(301, "301 s is outside 0 to 300 s", id="huge"),
        pytest.param("1", "'1' is not a number of seconds", id="a-string"),
    ],
)
def test_set_latency_rejects(seconds: float, message: str) -> None:
    cloud = new_fake_cloud(None)
    with pytest.raises(ValueError, match=f"latency of 'get_zone': {message}"):
        cloud.set_latency("get_zone", seconds)


@pytest.mark.parametrize("seconds", [0, 0.25, 300])
def test_set_latency_accepts(seconds: float) -> None:
    cloud = new_fake_cloud(None)
    cloud.set_latency("*", seconds)
    assert cloud._latency == {"*": seconds}
