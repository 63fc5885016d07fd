"""Network topology labels from DescribeInstanceTopology (upstream ``topology.go`` and
``instances_v2.go`` ``getAdditionalLabels``), against moto taught the call
(kccm.emulators.aws.topology)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kccm.cloudprovider import CloudProviderError, Throttled
from kccm.emulators.aws import (
    World,
    add_instances,
    clients,
    html_500,
    network_nodes_of,
    node_for,
    topology_fault,
)
from kccm.providers.aws import AWSCloud
from kccm.providers.aws.config import load_aws_config
from kccm.providers.aws.instances import LABEL_ZONE_ID
from kccm.providers.aws.topology import (
    CACHE_TTL,
    LABEL_NETWORK_NODE_PREFIX,
    InstanceTopologies,
)
from kccm.util.clock import FakeClock

TOPOLOGY_CALL = "ec2:describe_instance_topology"
GPU = "p5.48xlarge"
"""A type upstream's default pattern expects to answer, and AWS documents as supported."""
PLAIN = "m5.large"
"""A type neither expects nor has a topology."""


def _v2(cloud: AWSCloud) -> Any:
    v2 = cloud.instances_v2()
    assert v2 is not None
    return v2


def _started(world: World, instance_type: str, count: int = 1) -> list[str]:
    return add_instances(world, count, instance_type=instance_type)


def _topology_calls(cloud: AWSCloud, action: Any) -> tuple[Any, int]:
    before = cloud.cloud_api_calls().snapshot()
    result = action()
    calls = cloud.cloud_api_calls().snapshot().since(before)
    assert calls.writes == {}
    return result, calls.reads.get(TOPOLOGY_CALL, 0)


def _layers(labels: dict[str, str]) -> list[str]:
    return [labels[k] for k in sorted(labels) if k.startswith(LABEL_NETWORK_NODE_PREFIX)]


def _zone(world: World, instance_id: str) -> str:
    ec2, _ = clients(world.url)
    found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return str(found["Placement"]["AvailabilityZone"])


def test_a_supported_instance_gets_its_network_nodes_in_order(
    cloud: AWSCloud, world: World
) -> None:
    [instance_id] = _started(world, GPU)
    meta, calls = _topology_calls(
        cloud, lambda: _v2(cloud).instance_metadata(node_for(world, instance_id))
    )
    expected = network_nodes_of(instance_id, _zone(world, instance_id), GPU)
    assert {k: v for k, v in meta.additional_labels.items() if k != LABEL_ZONE_ID} == {
        "topology.k8s.aws/network-node-layer-1": expected[0],
        "topology.k8s.aws/network-node-layer-2": expected[1],
        "topology.k8s.aws/network-node-layer-3": expected[2],
    }
    assert LABEL_ZONE_ID in meta.additional_labels
    assert calls == 1


@pytest.mark.parametrize(
    ("instance_type", "stop", "existing", "calls", "layers"),
    [
        pytest.param(GPU, False, {}, 1, 3, id="supported-type-labelled"),
        pytest.param(
            GPU,
            False,
            {f"{LABEL_NETWORK_NODE_PREFIX}1": "mine"},
            0,
            0,
            id="layer-1-already-set-no-call",
        ),
        pytest.param(
            GPU,
            False,
            {f"{LABEL_NETWORK_NODE_PREFIX}2": "mine"},
            1,
            3,
            id="only-layer-1-decides-other-layers-do-not",
        ),
        pytest.param(PLAIN, False, {}, 1, 0, id="unsupported-type-asked-once-no-labels"),
        pytest.param(GPU, True, {}, 1, 0, id="stopped-supported-instance-no-labels"),
    ],
)
def test_which_nodes_are_asked_and_labelled(
    cloud: AWSCloud,
    world: World,
    instance_type: str,
    stop: bool,
    existing: dict[str, str],
    calls: int,
    layers: int,
) -> None:
    [instance_id] = _started(world, instance_type)
    if stop:
        clients(world.url)[0].stop_instances(InstanceIds=[instance_id])
    node = node_for(world, instance_id)
    node["metadata"]["labels"] = dict(existing)
    meta, made = _topology_calls(cloud, lambda: _v2(cloud).instance_metadata(node))
    assert made == calls
    assert len(_layers(dict(meta.additional_labels))) == layers


@pytest.mark.parametrize(
    ("first_type", "stop_first", "second_type", "second_calls"),
    [
        pytest.param(PLAIN, False, PLAIN, 0, id="unsupported-type-remembered"),
        pytest.param(GPU, True, GPU, 1, id="silent-supported-type-blames-the-instance-only"),
        pytest.param(PLAIN, False, "c5.large", 1, id="another-type-is-still-asked"),
    ],
)
def test_what_an_empty_answer_is_remembered_for(
    cloud: AWSCloud,
    world: World,
    first_type: str,
    stop_first: bool,
    second_type: str,
    second_calls: int,
) -> None:
    [first] = _started(world, first_type)
    [second] = _started(world, second_type)
    if stop_first:
        clients(world.url)[0].stop_instances(InstanceIds=[first])
    v2 = _v2(cloud)
    _, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, first)))
    assert made == 1
    _, again = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, first)))
    assert again == 0  # the instance (or its type) is remembered either way
    _, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, second)))
    assert made == second_calls


@pytest.mark.parametrize(
    ("code", "instance_type", "outcome", "later_calls"),
    [
        pytest.param("UnsupportedOperation", GPU, "initialised", 0, id="unsupported-region"),
        pytest.param("UnauthorizedOperation", GPU, "initialised", 0, id="permission-missing"),
        pytest.param("InvalidParameterValue", GPU, CloudProviderError, 1, id="error-fails-gpu"),
        pytest.param("InvalidParameterValue", PLAIN, "initialised", 1, id="error-ignored-plain"),
        pytest.param("RequestLimitExceeded", GPU, Throttled, 1, id="throttled-fails-gpu"),
        pytest.param("RequestLimitExceeded", PLAIN, "initialised", 1, id="throttled-ignored"),
    ],
)
def test_errors_back_off_or_fail_as_upstream(
    cloud: AWSCloud,
    world: World,
    code: str,
    instance_type: str,
    outcome: Any,
    later_calls: int,
) -> None:
    """``later_calls``: calls for another GPU instance after the error (0: the region is
    remembered as unsupported)."""
    [instance_id, other] = _started(world, instance_type, 2)
    v2 = _v2(cloud)
    with topology_fault(world.url, code):
        if outcome == "initialised":
            meta = v2.instance_metadata(node_for(world, instance_id))
            assert _layers(dict(meta.additional_labels)) == []
            assert LABEL_ZONE_ID in meta.additional_labels
        else:
            with pytest.raises(outcome, match=code):
                v2.instance_metadata(node_for(world, instance_id))
    [gpu] = _started(world, GPU) if instance_type != GPU else [other]
    meta, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, gpu)))
    assert made == later_calls
    assert len(_layers(dict(meta.additional_labels))) == 3 * later_calls


@pytest.mark.parametrize(
    ("instance_type", "outcome"),
    [
        pytest.param(PLAIN, "initialised", id="html-500-ignored-plain-zone-id-kept"),
        pytest.param(GPU, CloudProviderError, id="html-500-fails-gpu-as-any-error"),
    ],
)
def test_a_non_aws_error_is_a_topology_failure_like_any_other(
    cloud: AWSCloud, world: World, instance_type: str, outcome: Any
) -> None:
    """Issue 25: an HTML 500 (stock moto 5, a proxy) is an error upstream's
    ``getAdditionalLabels`` moves on from for a type not expected to answer; it used to
    escape as botocore's ResponseParserError and fail the whole metadata call."""
    [instance_id] = _started(world, instance_type)
    v2 = _v2(cloud)
    with html_500(world.url):
        if outcome == "initialised":
            meta = v2.instance_metadata(node_for(world, instance_id))
            assert _layers(dict(meta.additional_labels)) == []
            assert LABEL_ZONE_ID in meta.additional_labels
        else:
            with pytest.raises(outcome, match=r"describe_instance_topology: .*not an AWS answer"):
                v2.instance_metadata(node_for(world, instance_id))


def test_an_unsupported_region_is_asked_again_after_a_day(cloud: AWSCloud, world: World) -> None:
    clock = FakeClock()
    v2 = _v2(cloud)
    v2.topologies = InstanceTopologies(cloud.api, clock=clock)
    [first, second] = _started(world, GPU, 2)
    with topology_fault(world.url, "UnsupportedOperation"):
        v2.instance_metadata(node_for(world, first))
    asyncio.run(clock.advance(CACHE_TTL - 1))
    _, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, second)))
    assert made == 0
    asyncio.run(clock.advance(1))
    meta, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, second)))
    assert made == 1
    assert len(_layers(dict(meta.additional_labels))) == 3


def test_concurrent_initialisations_ask_once_per_unsupported_type(
    cloud: AWSCloud, world: World
) -> None:
    """kccm's 32 node-sync workers cost what upstream's one does: one call for the type."""
    nodes = [node_for(world, i) for i in _started(world, PLAIN, 8)]
    v2 = _v2(cloud)
    with ThreadPoolExecutor(max_workers=8) as pool:
        metas, made = _topology_calls(cloud, lambda: list(pool.map(v2.instance_metadata, nodes)))
    assert made == 1
    assert all(not _layers(dict(m.additional_labels)) for m in metas)


def test_the_periodic_refresh_asks_for_no_topology(cloud: AWSCloud, world: World) -> None:
    """Upstream's refresh uses the addresses only; kccm's listing asks for nothing more."""
    nodes = [node_for(world, i) for i in _started(world, GPU, 3)]
    found, made = _topology_calls(cloud, lambda: _v2(cloud).list_instance_metadata(nodes))
    assert made == 0
    assert len(found) == 3
    assert all(not meta.additional_labels for meta in found.values())


@pytest.mark.parametrize(
    ("pattern", "second_calls"),
    [
        pytest.param("", 0, id="default-pattern-m5-not-expected-type-remembered"),
        pytest.param(r"^m5\\.", 1, id="custom-pattern-m5-expected-gcfg-escaped-backslash"),
    ],
)
def test_the_supported_type_pattern_is_configurable(
    world: World, aws_env: None, pattern: str, second_calls: int
) -> None:
    extra = {"SupportedTopologyInstanceTypePattern": pattern} if pattern else {}
    cloud = AWSCloud(load_aws_config(world.cloud_config(APIMaxAttempts="1", **extra)))
    [first, second] = _started(world, PLAIN, 2)
    v2 = _v2(cloud)
    v2.instance_metadata(node_for(world, first))
    _, made = _topology_calls(cloud, lambda: v2.instance_metadata(node_for(world, second)))
    assert made == second_calls
