"""cloud-node-controller on the in-memory kube fake and the fake provider (upstream
node_controller_test.go: Test_syncNode)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from node_harness import (
    ALL_LABELS,
    EXTERNAL,
    INTERNAL,
    INTERNAL2,
    KUBELET_HOSTNAME,
    KUBELET_IP,
    OTHER_TAINT,
    PID,
    TYPE_LABELS,
    UNINIT,
    ZONE_LABELS,
    Env,
    ScriptedCloud,
    addr,
    fail,
    fails,
    initialized,
    kubelet_node,
    make_cloud,
    override,
)

from kccm.cloudprovider import InstanceMetadata, InstanceNotFound, NodeAddress
from kccm.cloudprovider.errors import NotImplementedByProvider
from kccm.controllers.node import SyncError
from kccm.kube.interface import Obj
from kccm.providers.fake import FakeInstance
from kccm.util.clock import FakeClock

# -- Test_syncNode ----------------------------------------------------------------------------


@dataclass
class SyncCase:
    node: Obj
    expected: Obj | None = None  # None: the node must be unchanged
    error: str | None = None
    instance: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[ScriptedCloud], None] | None = None


BOTH: dict[str, SyncCase] = {
    "node-initialized-with-provider-id": SyncCase(kubelet_node(), initialized()),
    "node-without-cloud-taint-ignored": SyncCase(kubelet_node(taints=[OTHER_TAINT])),
    "provider-id-already-set-kept": SyncCase(
        kubelet_node(provider_id=PID), initialized(provider_id=PID)
    ),
    "other-taints-kept-in-order-every-uninitialized-taint-removed": SyncCase(
        kubelet_node(taints=[OTHER_TAINT, UNINIT, {**UNINIT, "effect": "NoExecute"}]),
        initialized(taints=[OTHER_TAINT]),
    ),
    "uninitialized-taint-with-other-effect-triggers-init": SyncCase(
        kubelet_node(taints=[{**UNINIT, "effect": "PreferNoSchedule"}]), initialized()
    ),
    "no-zone-no-region-no-topology-labels": SyncCase(
        kubelet_node(), initialized(labels=TYPE_LABELS), instance={"zone": "", "region": ""}
    ),
    "zone-only": SyncCase(
        kubelet_node(),
        initialized(
            labels={**TYPE_LABELS, **{k: v for k, v in ZONE_LABELS.items() if "zone" in k}}
        ),
        instance={"region": ""},
    ),
    "no-instance-type-no-type-labels": SyncCase(
        kubelet_node(), initialized(labels=ZONE_LABELS), instance={"instance_type": ""}
    ),
    "node-ip-annotation-valid": SyncCase(
        kubelet_node(annotations={"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"}),
        initialized(annotations={"alpha.kubernetes.io/provided-node-ip": "10.0.0.1"}),
    ),
    "node-ip-annotation-selects-among-same-type": SyncCase(
        kubelet_node(annotations={"alpha.kubernetes.io/provided-node-ip": "10.0.0.2"}),
        initialized(
            annotations={"alpha.kubernetes.io/provided-node-ip": "10.0.0.2"},
            addresses=[INTERNAL2, EXTERNAL, KUBELET_HOSTNAME],
        ),
        instance={"addresses": (addr(INTERNAL), addr(INTERNAL2), addr(EXTERNAL))},
    ),
    "node-ip-annotation-not-among-cloud-addresses": SyncCase(
        kubelet_node(annotations={"alpha.kubernetes.io/provided-node-ip": "10.1.1.1"}),
        error='failed to get node modifiers from cloud provider: provided node ip for node "node0"'
        " is not valid: failed to get node address from cloud provider that matches ip: 10.1.1.1",
    ),
    "node-ip-annotation-unparsable": SyncCase(
        kubelet_node(annotations={"alpha.kubernetes.io/provided-node-ip": "10.0.0.1,10.0.0.2"}),
        error='provided node ip for node "node0" is not valid: failed to parse node IP '
        '"10.0.0.1,10.0.0.2": must contain either a single IP or a dual-stack pair of IPs',
    ),
    "cloud-hostname-replaces-kubelet-hostname": SyncCase(
        kubelet_node(),
        initialized(addresses=[INTERNAL, {"type": "Hostname", "address": "cloud-host"}]),
        instance={"addresses": (addr(INTERNAL), NodeAddress("Hostname", "cloud-host"))},
    ),
    "empty-cloud-addresses-keep-kubelet-addresses": SyncCase(
        kubelet_node(),
        initialized(addresses=[KUBELET_HOSTNAME, KUBELET_IP]),
        instance={"addresses": ()},
    ),
}

V2_ONLY: dict[str, SyncCase] = {
    "additional-labels-filtered-and-never-overwriting": SyncCase(
        kubelet_node(labels={"existing": "old"}),
        initialized(
            labels={**ALL_LABELS, "existing": "old", "my.org/team": "a", "app.k8snio/x": "z",
                    "k8snio/y": "w"}
        ),
        instance={
            "additional_labels": {
                "my.org/team": "a",
                "app.k8snio/x": "z",
                "k8snio/y": "w",
                "existing": "new",
                "topology.kubernetes.io/custom": "x",
                "kubernetes.io/x": "x",
                "k8s.io/x": "x",
                "topology.k8s.io/x": "x",
            }
        },
    ),
    "metadata-error-keeps-taint": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: boom",
        setup=fail("instance_metadata", RuntimeError("boom")),
    ),
    "cloud-sets-no-provider-id-and-node-has-none": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: "
        "cloud provider does not set node provider ID for node node0",
        setup=override(InstanceMetadata(instance_type="t1.micro")),
    ),
    "cloud-sets-no-provider-id-but-node-has-one": SyncCase(
        kubelet_node(provider_id="fake://preset"),
        initialized(
            provider_id="fake://preset", labels=TYPE_LABELS, addresses=[INTERNAL, KUBELET_HOSTNAME]
        ),
        setup=override(InstanceMetadata(instance_type="t1.micro", node_addresses=[addr(INTERNAL)])),
    ),
    "provider-id-never-changed": SyncCase(
        kubelet_node(provider_id="fake://old"),
        initialized(provider_id="fake://old", labels={}, addresses=[KUBELET_HOSTNAME, KUBELET_IP]),
        setup=override(InstanceMetadata(provider_id="fake://new")),
    ),
    "nil-metadata-no-change-no-error": SyncCase(kubelet_node(), setup=override(None)),
}  # fmt: skip

LEGACY_ONLY: dict[str, SyncCase] = {
    "instance-id-not-implemented-initialized-without-provider-id": SyncCase(
        kubelet_node(),
        initialized(provider_id=""),
        setup=fail("instance_id", NotImplementedByProvider()),
    ),
    "instance-not-found-keeps-taint": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: instance not found",
        setup=fail("instance_id", InstanceNotFound()),
    ),
    "instance-id-error-wrapped": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: "
        "failed to get instance ID from cloud provider: api down",
        setup=fail("instance_id", RuntimeError("api down")),
    ),
    "addresses-by-provider-id-fall-back-to-name": SyncCase(
        kubelet_node(),
        initialized(),
        setup=fail("node_addresses_by_provider_id", RuntimeError("x")),
    ),
    "both-address-lookups-fail": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: error fetching node by provider "
        "ID: e1, and error by node name: e2",
        setup=fails(
            ("node_addresses_by_provider_id", RuntimeError("e1")),
            ("node_addresses", RuntimeError("e2")),
        ),
    ),
    "both-zone-lookups-fail": SyncCase(
        kubelet_node(),
        error="failed to get instance metadata for node node0: failed to get zone from cloud "
        "provider: Zone: Error fetching by providerID: z1 Error fetching by NodeName: z2",
        setup=fails(
            ("get_zone_by_provider_id", RuntimeError("z1")),
            ("get_zone_by_node_name", RuntimeError("z2")),
        ),
    ),
    "both-instance-type-lookups-fail": SyncCase(
        kubelet_node(),
        error="InstanceType: Error fetching by providerID: t1 Error fetching by NodeName: t2",
        setup=fails(
            ("instance_type_by_provider_id", RuntimeError("t1")),
            ("instance_type", RuntimeError("t2")),
        ),
    ),
}


def sync_params() -> list[Any]:
    params = []
    for name, case in BOTH.items():
        params.append(pytest.param(False, case, id=name))
        params.append(pytest.param(True, case, id=f"instanceV2-{name}"))
    params += [pytest.param(True, c, id=f"instanceV2-{n}") for n, c in V2_ONLY.items()]
    params += [pytest.param(False, c, id=n) for n, c in LEGACY_ONLY.items()]
    return params


def _comparable(node: Obj) -> Obj:
    return {
        "providerID": node["spec"].get("providerID", ""),
        "taints": node["spec"].get("taints") or [],
        "labels": node["metadata"].get("labels") or {},
        "annotations": node["metadata"].get("annotations") or {},
        "addresses": node["status"].get("addresses") or [],
    }


@pytest.mark.parametrize(("v2", "case"), sync_params())
async def test_sync_node(
    v2: bool, case: SyncCase, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(v2, clock=clock, **case.instance)
    if case.setup:
        case.setup(cloud)
    env: Env = await env_factory(cloud, [copy.deepcopy(case.node)])
    before = await env.node()
    if case.error is not None:
        with pytest.raises(SyncError) as err:
            await env.ctrl.sync_node("node0")
        assert case.error in str(err.value)
    else:
        await env.ctrl.sync_node("node0")
    after = await env.node()
    events = await env.events_written()
    if case.expected is None:
        assert after == before
        assert env.writes() == []
        assert events == []
        return
    assert _comparable(after) == _comparable(case.expected)
    assert events == [
        ("cloud-node-controller", "node0", "Normal", "Synced", "Node synced successfully")
    ]
    # one write for the whole initialisation, then the address patch (status) when needed
    assert env.writes()[0] == ("patch", "nodes", "node0")
    assert "replace" not in [w[0] for w in env.writes()]


async def test_v2_never_calls_legacy_or_zones(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    await env.ctrl.sync_node("node0")
    assert env.cloud.calls == ["instance_metadata"]


async def test_legacy_calls_by_provider_id_then_zones(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(False, clock=clock), [kubelet_node()])
    await env.ctrl.sync_node("node0")
    assert env.cloud.call_log[0].method == "instance_id"
    assert [c.method for c in env.cloud.call_log[1:]] == [
        "node_addresses_by_provider_id",
        "instance_type_by_provider_id",
        "get_zone_by_provider_id",
    ]
    assert all(c.args == (PID,) for c in env.cloud.call_log[1:])


async def test_legacy_without_zones_gets_no_zone_labels(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = ScriptedCloud(clock=clock, enable_instances_v2=False, enable_zones=False)
    cloud.add_instance(FakeInstance(name="node0", instance_id="12345", instance_type="t1.micro"))
    env: Env = await env_factory(cloud, [kubelet_node()])
    await env.ctrl.sync_node("node0")
    node = await env.node()
    assert node["metadata"]["labels"] == TYPE_LABELS
    assert not any("zone" in c for c in cloud.calls)
