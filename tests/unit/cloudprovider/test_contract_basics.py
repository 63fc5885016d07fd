"""Errors, value types, helpers and the public surface of kccm.cloudprovider."""

from __future__ import annotations

import pytest

import kccm.cloudprovider as cp
from kccm.cloudprovider import (
    DiskNotFound,
    ImplementedElsewhere,
    InstanceMetadata,
    InstanceNotFound,
    InstancesUnsupported,
    LoadBalancerIngress,
    LoadBalancerStatus,
    NodeAddress,
    NotImplementedByProvider,
    PortStatus,
    RetryError,
    default_load_balancer_name,
    find_error,
    get_instance_provider_id,
    make_provider_id,
    split_provider_id,
)
from kccm.providers.fake import FakeCloud, FakeInstance


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(InstanceNotFound(), "instance not found", id="instance-not-found"),
        pytest.param(NotImplementedByProvider(), "unimplemented", id="not-implemented"),
        pytest.param(
            ImplementedElsewhere(),
            "implemented by alternate to cloud provider",
            id="implemented-elsewhere",
        ),
        pytest.param(DiskNotFound(), "disk is not found", id="disk-not-found"),
        pytest.param(RetryError("lb is provisioning", 42), "lb is provisioning", id="retry"),
    ],
)
def test_errors_carry_upstream_messages(error: Exception, message: str) -> None:
    assert str(error) == message


def test_retry_error_carries_its_delay() -> None:
    assert RetryError("later", 42).retry_after == 42.0


def test_find_error_looks_through_the_cause_chain() -> None:
    inner = InstanceNotFound()
    outer = RuntimeError("lookup failed")
    outer.__cause__ = inner
    assert find_error(outer, InstanceNotFound) is inner
    assert find_error(outer, RetryError) is None


@pytest.mark.parametrize(
    ("uid", "name"),
    [
        pytest.param(
            "8f1c2a34-5b6d-4e7f-8a9b-0c1d2e3f4a5b", "a8f1c2a345b6d4e7f8a9b0c1d2e3f4a5", id="uuid"
        ),
        pytest.param("abc-def", "aabcdef", id="short-uid"),
        pytest.param("", "a", id="no-uid"),
    ],
)
def test_default_load_balancer_name(uid: str, name: str) -> None:
    assert default_load_balancer_name({"metadata": {"uid": uid}}) == name
    assert len(name) <= 32


@pytest.mark.parametrize(
    ("provider_id", "parts"),
    [
        pytest.param("aws:///eu-west-1a/i-123", ("aws", "/eu-west-1a/i-123"), id="aws-style"),
        pytest.param("fake://node-a", ("fake", "node-a"), id="simple"),
    ],
)
def test_split_provider_id(provider_id: str, parts: tuple[str, str]) -> None:
    assert split_provider_id(provider_id) == parts
    assert make_provider_id(*parts) == provider_id


@pytest.mark.parametrize(
    "provider_id",
    [
        pytest.param("i-123", id="no-scheme"),
        pytest.param("fake://", id="no-instance"),
        pytest.param("://i-1", id="empty-scheme"),
    ],
)
def test_split_provider_id_rejects_malformed_ids(provider_id: str) -> None:
    with pytest.raises(ValueError, match="is not of the form"):
        split_provider_id(provider_id)


async def test_get_instance_provider_id_prefixes_the_provider_name() -> None:
    cloud = FakeCloud()
    cloud.add_instance(FakeInstance(name="n1", instance_id="i-1"))
    assert await get_instance_provider_id(cloud, "n1") == "fake://i-1"


async def test_get_instance_provider_id_passes_instance_not_found_through() -> None:
    with pytest.raises(InstanceNotFound):
        await get_instance_provider_id(FakeCloud(), "missing")


async def test_get_instance_provider_id_wraps_other_errors() -> None:
    cloud = FakeCloud()
    cloud.fail("instance_id", OSError("boom"))
    with pytest.raises(RuntimeError, match=r"^failed to get instance ID from cloud provider: boom"):
        await get_instance_provider_id(cloud, "n1")


async def test_get_instance_provider_id_needs_instances() -> None:
    with pytest.raises(InstancesUnsupported, match="failed to get instances from cloud provider"):
        await get_instance_provider_id(FakeCloud(enable_instances=False), "n1")


def test_load_balancer_status_round_trips_its_json_shape() -> None:
    status = LoadBalancerStatus(
        ingress=[
            LoadBalancerIngress(ip="192.0.2.1", ip_mode="VIP", ports=[PortStatus(80, "TCP")]),
            LoadBalancerIngress(hostname="lb.example.com"),
        ]
    )
    shape = status.to_dict()
    assert shape == {
        "ingress": [
            {"ip": "192.0.2.1", "ipMode": "VIP", "ports": [{"port": 80, "protocol": "TCP"}]},
            {"hostname": "lb.example.com"},
        ]
    }
    assert LoadBalancerStatus.from_dict(shape) == status
    assert LoadBalancerStatus().to_dict() == {}


def test_instance_metadata_is_frozen_and_compares_by_value() -> None:
    labels = {"team": "a"}
    meta = InstanceMetadata(
        provider_id="fake://1",
        node_addresses=[NodeAddress("InternalIP", "10.0.0.1")],
        additional_labels=labels,
    )
    labels["team"] = "b"  # the caller's dict is copied
    assert meta.additional_labels == {"team": "a"}
    assert meta == InstanceMetadata(
        provider_id="fake://1",
        node_addresses=(NodeAddress("InternalIP", "10.0.0.1"),),
        additional_labels={"team": "a"},
    )
    assert hash(meta)
    with pytest.raises(AttributeError):
        meta.zone = "z"  # type: ignore[misc]


def test_public_surface_is_explicit_and_importable() -> None:
    assert len(set(cp.__all__)) == len(cp.__all__)
    for name in cp.__all__:
        assert hasattr(cp, name), name
