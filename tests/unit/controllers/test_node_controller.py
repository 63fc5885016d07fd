"""cloud-node-controller on the in-memory kube fake and the fake provider (upstream
node_controller_test.go: Test_syncNode, Test_reconcileNodeLabels, TestNodeAddressesNotUpdate,
TestGetInstanceMetadata, TestUpdateNodeStatus)."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import InstanceMetadata, InstanceNotFound, NodeAddress
from kccm.cloudprovider.errors import NotImplementedByProvider
from kccm.cloudprovider.gate import CallGate
from kccm.cloudprovider.gated import GatedCloud
from kccm.controllers import node as node_controller
from kccm.controllers.base import ControllerContext
from kccm.controllers.node import CloudNodeController, NodeControllerOptions, SyncError
from kccm.kube.errors import Conflict
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj
from kccm.kube.resources import EVENTS, NODES, Resource
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.runtime.events import EventBroadcaster
from kccm.runtime.informers import SharedInformerFactory
from kccm.util.clock import FakeClock

UNINIT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
OTHER_TAINT = {"key": "example.com/other", "value": "x", "effect": "NoExecute"}
PID = "fake://12345"

INTERNAL = {"type": "InternalIP", "address": "10.0.0.1"}
INTERNAL2 = {"type": "InternalIP", "address": "10.0.0.2"}
EXTERNAL = {"type": "ExternalIP", "address": "132.143.154.163"}
KUBELET_HOSTNAME = {"type": "Hostname", "address": "node0.kubelet"}
KUBELET_IP = {"type": "InternalIP", "address": "192.168.0.9"}

TYPE_LABELS = {
    "beta.kubernetes.io/instance-type": "t1.micro",
    "node.kubernetes.io/instance-type": "t1.micro",
}
ZONE_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "us-west-1a",
    "topology.kubernetes.io/zone": "us-west-1a",
    "failure-domain.beta.kubernetes.io/region": "us-west",
    "topology.kubernetes.io/region": "us-west",
}
ALL_LABELS = {**TYPE_LABELS, **ZONE_LABELS}


def addr(d: dict[str, str]) -> NodeAddress:
    return NodeAddress.from_dict(d)


def kubelet_node(
    name: str = "node0",
    *,
    taints: list[Any] | None = None,
    provider_id: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    addresses: list[dict[str, str]] | None = None,
    ready: str | None = None,
) -> Obj:
    """A Node as a kubelet with --cloud-provider=external registers it."""
    spec: dict[str, Any] = {"taints": [UNINIT] if taints is None else taints}
    if provider_id:
        spec["providerID"] = provider_id
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any] = {
        "addresses": [KUBELET_HOSTNAME, KUBELET_IP] if addresses is None else addresses
    }
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"metadata": meta, "spec": spec, "status": status}


class ScriptedCloud(FakeCloud):
    """The fake cloud as upstream's fake: its ``OverrideInstanceMetadata`` knob, and no list
    call (so the periodic refresh asks ``instance_metadata`` per node, as upstream's tests
    describe)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.override: Callable[[Any], InstanceMetadata | None] | None = None

    def __getattribute__(self, name: str) -> Any:
        if name == "list_instance_metadata":
            raise AttributeError(name)
        return super().__getattribute__(name)

    async def instance_metadata(self, node: Any) -> InstanceMetadata | None:
        if self.override is None:
            return await super().instance_metadata(node)
        await self._enter("instance_metadata", node["metadata"]["name"])
        return self.override(node)


def make_cloud(v2: bool, *, clock: FakeClock, **instance: Any) -> ScriptedCloud:
    cloud = ScriptedCloud(clock=clock, enable_instances_v2=v2)
    fields: dict[str, Any] = {
        "name": "node0",
        "instance_id": "12345",
        "instance_type": "t1.micro",
        "addresses": (addr(INTERNAL), addr(EXTERNAL)),
        "zone": "us-west-1a",
        "region": "us-west",
    }
    fields.update(instance)
    cloud.add_instance(FakeInstance(**fields))
    return cloud


class ConflictOnceKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0
        self.sent: list[Any] = []

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> Obj:
        self.sent.append(patch)
        if self.conflicts > 0:
            self.conflicts -= 1
            self.requests.append(("patch", str(resource), name))
            raise Conflict("the object has been modified", reason="Conflict")
        return await super().patch(resource, name, patch, **kw)


@dataclass
class Env:
    kube: FakeKube
    cloud: ScriptedCloud
    clock: FakeClock
    registry: CollectorRegistry
    events: EventBroadcaster
    informers: SharedInformerFactory
    gate: CallGate
    ctrl: CloudNodeController
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    async def node(self, name: str = "node0") -> Obj:
        return await self.kube.get(NODES, name)

    async def events_written(self) -> list[tuple[str, str, str, str, str]]:
        await self.events.flush()
        return [
            (
                e["source"]["component"],
                e["involvedObject"]["name"],
                e["type"],
                e["reason"],
                e["message"],
            )
            for e in self.kube.objects(EVENTS)
        ]

    def writes(self) -> list[tuple[str, str, str]]:
        return [r for r in self.kube.requests if r[0] in ("patch", "replace", "delete")]

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(name) or 0.0


UPSTREAM_REFRESH = NodeControllerOptions(node_metadata_refresh_period=0)


@pytest.fixture
async def env_factory() -> AsyncIterator[Callable[..., Any]]:
    made: list[Env] = []

    async def factory(
        cloud: ScriptedCloud,
        nodes: list[Obj],
        *,
        kube: FakeKube | None = None,
        options: NodeControllerOptions | None = None,
    ) -> Env:
        kube = kube or FakeKube()
        clock = cloud._clock
        assert isinstance(clock, FakeClock)
        for n in nodes:
            await kube.create(NODES, n)
        registry = CollectorRegistry()
        gate = CallGate(registry=registry, clock=clock)
        informers = SharedInformerFactory(kube, clock=clock)
        events = EventBroadcaster(kube, clock=clock)
        context = ControllerContext(
            kube, informers, GatedCloud(cloud, gate), events, registry, clock
        )
        # Upstream's tests describe a refresh of every node at every tick: period 0.
        ctrl = node_controller.build(context, options or UPSTREAM_REFRESH)
        assert ctrl is not None
        informers.start()
        await informers.wait_for_sync()
        events.start()
        kube.requests.clear()
        cloud.clear_calls()
        env = Env(kube, cloud, clock, registry, events, informers, gate, ctrl)
        made.append(env)
        return env

    yield factory
    for env in made:
        for task in env.tasks:
            task.cancel()
        await asyncio.gather(*env.tasks, return_exceptions=True)
        await env.events.shutdown(grace=0)
        await env.informers.stop()
        env.gate.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- Test_syncNode ----------------------------------------------------------------------------


@dataclass
class SyncCase:
    node: Obj
    expected: Obj | None = None  # None: the node must be unchanged
    error: str | None = None
    instance: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[ScriptedCloud], None] | None = None


def initialized(
    *,
    provider_id: str = PID,
    labels: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    addresses: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    node = kubelet_node(
        taints=taints or [],
        provider_id=provider_id,
        labels=ALL_LABELS if labels is None else labels,
        annotations=annotations,
        addresses=[INTERNAL, EXTERNAL, KUBELET_HOSTNAME] if addresses is None else addresses,
    )
    return node


def fail(method: str, error: BaseException) -> Callable[[ScriptedCloud], None]:
    return lambda cloud: cloud.fail(method, error)


def fails(*failures: tuple[str, BaseException]) -> Callable[[ScriptedCloud], None]:
    def apply(cloud: ScriptedCloud) -> None:
        for method, error in failures:
            cloud.fail(method, error)

    return apply


def override(meta: InstanceMetadata | None) -> Callable[[ScriptedCloud], None]:
    def apply(cloud: ScriptedCloud) -> None:
        cloud.override = lambda _node: meta

    return apply


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


async def test_conflict_on_write_is_retried_with_a_fresh_read(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    kube = ConflictOnceKube()
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()], kube=kube)
    await kube.patch(NODES, "node0", {"metadata": {"labels": {"meanwhile": "x"}}})
    await eventually_cached(env, "meanwhile")
    cached_rv = env.ctrl.informer.get("node0")["metadata"]["resourceVersion"]  # type: ignore[index]
    kube.requests.clear()
    kube.sent.clear()
    kube.conflicts = 1
    task = asyncio.create_task(env.ctrl.sync_node("node0"))
    await clock.run_until_idle()
    await task
    assert kube.requests[:3] == [
        ("patch", "nodes", "node0"),  # from the cache: Conflict
        ("get", "nodes", "node0"),  # fresh read
        ("patch", "nodes", "node0"),
    ]
    assert kube.sent[0]["metadata"]["resourceVersion"] == cached_rv
    node = await env.node()
    assert node["metadata"]["labels"]["meanwhile"] == "x"
    assert node["spec"]["taints"] == []


async def eventually_cached(env: Env, label: str) -> None:
    for _ in range(100):
        cached = env.ctrl.informer.get("node0")
        if cached is not None and label in cached["metadata"].get("labels", {}):
            return
        await asyncio.sleep(0)
    raise AssertionError("informer never saw the change")


async def test_stale_resource_version_conflicts_then_succeeds(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """The informer cache lags a concurrent write: the first write conflicts for real."""
    kube = ConflictOnceKube()
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()], kube=kube)
    await env.informers.stop()  # the cache stops following the API server
    await kube.patch(NODES, "node0", {"metadata": {"annotations": {"x": "y"}}})
    kube.requests.clear()
    task = asyncio.create_task(env.ctrl.sync_node("node0"))
    await clock.run_until_idle()
    await task
    assert kube.requests[:3] == [
        ("patch", "nodes", "node0"),  # stale resourceVersion: a real Conflict
        ("get", "nodes", "node0"),
        ("patch", "nodes", "node0"),
    ]
    node = await env.node()
    assert node["spec"]["taints"] == []
    assert node["metadata"]["annotations"] == {"x": "y"}


async def test_init_keeps_fields_the_cache_drops(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """The informer cache drops the last-applied annotation; initialisation must not."""
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(annotations=last_applied)]
    )
    await env.ctrl.sync_node("node0")
    node = await env.node()
    assert node["metadata"]["annotations"] == last_applied
    assert node["spec"]["taints"] == []


async def test_nil_metadata_is_not_requeued(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.override = lambda _n: None
    env: Env = await env_factory(cloud, [kubelet_node()])
    env.ctrl.queue.add("node0")
    await env.ctrl.controller.process_next()
    await clock.advance(3600)
    assert len(env.ctrl.queue) == 0
    assert env.ctrl.queue.num_requeues("node0") == 0


async def test_failed_init_is_requeued_rate_limited(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.fail("instance_metadata", RuntimeError("boom"), times=1)
    env: Env = await env_factory(cloud, [kubelet_node()])
    env.ctrl.queue.add("node0")
    await env.ctrl.controller.process_next()
    assert env.ctrl.queue.num_requeues("node0") == 1
    await clock.advance(0.01)
    await env.ctrl.controller.process_next()  # second try succeeds
    assert (await env.node())["spec"]["taints"] == []


async def test_metrics_observed_on_init(env_factory: Callable[..., Any], clock: FakeClock) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    await env.ctrl.sync_node("node0")
    for name in (
        "node_controller_cloud_provider_taint_removal_delay_seconds",
        "node_controller_initial_node_sync_delay_seconds",
    ):
        assert env.metric(f"{name}_count") == 1
        assert env.registry.get_sample_value(f"{name}_bucket", {"le": "1024.0"}) == 1


# -- Test_reconcileNodeLabels -----------------------------------------------------------------

BETA = {
    "failure-domain.beta.kubernetes.io/zone": "foo",
    "failure-domain.beta.kubernetes.io/region": "bar",
    "beta.kubernetes.io/instance-type": "the-best-type",
}
GA = {
    "topology.kubernetes.io/zone": "foo",
    "topology.kubernetes.io/region": "bar",
    "node.kubernetes.io/instance-type": "the-best-type",
}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param(BETA, {**BETA, **GA}, id="requires-reconcile"),
        pytest.param({**BETA, **GA}, None, id="does-not-require-reconcile"),
        pytest.param(
            {**BETA, "topology.kubernetes.io/zone": "other",
             "topology.kubernetes.io/region": "other", "node.kubernetes.io/instance-type": "x"},
            {**BETA, **GA}, id="secondary-differs-beta-wins",
        ),
        pytest.param({}, None, id="no-labels"),
        pytest.param(GA, None, id="ga-only-untouched"),
        pytest.param(
            {"failure-domain.beta.kubernetes.io/zone": "foo"},
            {"failure-domain.beta.kubernetes.io/zone": "foo", "topology.kubernetes.io/zone": "foo"},
            id="partial",
        ),
    ],
)  # fmt: skip
async def test_reconcile_node_labels(
    labels: dict[str, str],
    expected: dict[str, str] | None,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(taints=[], labels=labels)]
    )
    await env.ctrl.sync_node("node0")  # an initialised node: label reconcile only
    node = await env.node()
    assert node["metadata"].get("labels", {}) == (labels if expected is None else expected)
    assert env.cloud.calls == []
    assert [w[0] for w in env.writes()] == ([] if expected is None else ["patch"])


async def test_every_update_event_enqueues(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node(taints=[])])
    await env.kube.patch(NODES, "node0", {"metadata": {"annotations": {"a": "b"}}})
    for _ in range(50):
        if len(env.ctrl.queue):
            break
        await asyncio.sleep(0)
    assert len(env.ctrl.queue) == 1


# -- TestNodeAddressesNotUpdate, addresses ----------------------------------------------------


@pytest.mark.parametrize(
    "v2", [pytest.param(False, id="legacy"), pytest.param(True, id="instanceV2")]
)
async def test_node_addresses_not_updated_when_unchanged(
    v2: bool, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    node = kubelet_node(
        taints=[], provider_id=PID, addresses=[EXTERNAL, KUBELET_HOSTNAME, INTERNAL]
    )
    env: Env = await env_factory(make_cloud(v2, clock=clock), [node])
    await env.ctrl.update_node_status()
    assert env.writes() == []


@pytest.mark.parametrize(
    ("annotation", "cloud_addresses", "expected"),
    [
        pytest.param(
            None, (INTERNAL, EXTERNAL), [INTERNAL, EXTERNAL, KUBELET_HOSTNAME],
            id="kubelet-hostname-appended",
        ),
        pytest.param(
            "10.0.0.1", (INTERNAL, EXTERNAL), [INTERNAL, EXTERNAL, KUBELET_HOSTNAME],
            id="node-ip-single",
        ),
        pytest.param(
            "10.0.0.2", (INTERNAL, INTERNAL2, EXTERNAL), [INTERNAL2, EXTERNAL, KUBELET_HOSTNAME],
            id="node-ip-drops-other-same-type",
        ),
        pytest.param(
            "2001:db8::1,10.0.0.2",
            (INTERNAL, {"type": "InternalIP", "address": "2001:db8::1"}, INTERNAL2, EXTERNAL),
            [{"type": "InternalIP", "address": "2001:db8::1"}, INTERNAL2, EXTERNAL,
             KUBELET_HOSTNAME],
            id="node-ip-dual-stack",
        ),
        pytest.param(
            "10.9.9.9", (INTERNAL, EXTERNAL), [KUBELET_HOSTNAME, KUBELET_IP],
            id="node-ip-not-in-cloud-skips-update",
        ),
        pytest.param(None, (), [KUBELET_HOSTNAME, KUBELET_IP], id="empty-cloud-list-no-change"),
    ],
)  # fmt: skip
async def test_periodic_address_refresh(
    annotation: str | None,
    cloud_addresses: tuple[dict[str, str], ...],
    expected: list[dict[str, str]],
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    annotations = {"alpha.kubernetes.io/provided-node-ip": annotation} if annotation else None
    node = kubelet_node(taints=[], provider_id=PID, annotations=annotations)
    cloud = make_cloud(True, clock=clock, addresses=tuple(addr(a) for a in cloud_addresses))
    env: Env = await env_factory(cloud, [node])
    await env.ctrl.update_node_status()
    assert (await env.node())["status"]["addresses"] == expected


async def test_periodic_refresh_touches_only_addresses(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """Instance type, zone and labels changed in the cloud: only addresses follow."""
    node = kubelet_node(taints=[OTHER_TAINT], provider_id=PID, labels=ALL_LABELS)
    cloud = make_cloud(
        True, clock=clock, instance_type="t2.big", zone="z9", region="r9",
        additional_labels={"my.org/new": "1"}, addresses=(addr(INTERNAL2),),
    )  # fmt: skip
    env: Env = await env_factory(cloud, [node])
    before = await env.node()
    await env.ctrl.update_node_status()
    after = await env.node()
    assert after["status"]["addresses"] == [INTERNAL2, KUBELET_HOSTNAME]
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"] == before["spec"]


async def test_periodic_refresh_skips_tainted_nodes(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(make_cloud(True, clock=clock), [kubelet_node()])
    await env.ctrl.update_node_status()
    assert env.cloud.calls == []
    assert env.writes() == []


async def test_periodic_refresh_legacy_uses_provider_id_else_name(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(False, clock=clock)
    cloud.add_instance(FakeInstance(name="node1", addresses=(addr(INTERNAL2),)))
    nodes = [kubelet_node(taints=[], provider_id=PID), kubelet_node("node1", taints=[])]
    env: Env = await env_factory(cloud, nodes)
    await env.ctrl.update_node_status()
    assert sorted((c.method, c.args) for c in cloud.call_log) == [
        ("node_addresses", ("node1",)),
        ("node_addresses_by_provider_id", (PID,)),
    ]


async def test_periodic_refresh_error_skips_node(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = make_cloud(True, clock=clock)
    cloud.fail("instance_metadata", RuntimeError("boom"))
    env: Env = await env_factory(cloud, [kubelet_node(taints=[], provider_id=PID)])
    await env.ctrl.update_node_status()
    assert env.writes() == []


# -- TestUpdateNodeStatus: parallel workers ---------------------------------------------------


@pytest.mark.parametrize("workers", [1, 5, 10, 30])
async def test_update_node_status_workers(
    workers: int, env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = ScriptedCloud(clock=clock)
    nodes = []
    for i in range(100):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL),)))
        nodes.append(kubelet_node(f"node{i}", taints=[], addresses=[]))
    cloud.set_latency("instance_metadata", 0.01)
    options = NodeControllerOptions(
        concurrent_node_syncs=1,
        concurrent_node_status_updates=workers,
        node_metadata_refresh_period=0,
    )
    env: Env = await env_factory(cloud, nodes, options=options)
    start = clock.monotonic()
    task = asyncio.create_task(env.ctrl.update_node_status())
    await clock.run_until_idle()
    await task
    assert cloud.calls.count("instance_metadata") == 100
    assert clock.monotonic() - start == pytest.approx(0.01 * -(-100 // workers))
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))


def test_status_update_workers_default_to_node_syncs() -> None:
    assert (
        NodeControllerOptions().concurrent_node_syncs
        == node_controller.DEFAULT_CONCURRENT_NODE_SYNCS
    )
    assert NodeControllerOptions(concurrent_node_syncs=7).status_update_workers == 7
    assert NodeControllerOptions(concurrent_node_status_updates=3).status_update_workers == 3
    assert NodeControllerOptions().node_status_update_frequency == 300.0


async def test_run_refreshes_status_every_period(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    env: Env = await env_factory(
        make_cloud(True, clock=clock), [kubelet_node(taints=[], provider_id=PID)]
    )
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(0)
    assert env.cloud.calls.count("instance_metadata") == 1
    assert (
        env.registry.get_sample_value(
            "running_managed_controllers",
            {"name": "cloud-node", "manager": "cloud-controller-manager"},
        )
        == 1
    )
    await clock.advance(299)
    assert env.cloud.calls.count("instance_metadata") == 1
    await clock.advance(1)
    assert env.cloud.calls.count("instance_metadata") == 2
    assert await env.ctrl.stop(grace=1)
    await run
    assert (
        env.registry.get_sample_value(
            "running_managed_controllers",
            {"name": "cloud-node", "manager": "cloud-controller-manager"},
        )
        == 0
    )


async def test_run_initialises_with_workers(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = ScriptedCloud(clock=clock)
    nodes = []
    for i in range(20):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL),)))
        nodes.append(kubelet_node(f"node{i}"))
    env: Env = await env_factory(cloud, nodes)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(100):
        await clock.advance(0.01)
        if all(not n["spec"].get("taints") for n in env.kube.objects(NODES)):
            break
    assert all(n["spec"].get("providerID") for n in env.kube.objects(NODES))
    assert env.ctrl.queue.name == "Nodes"
    await env.ctrl.stop(grace=1)


# -- kccm: spread refresh and list_instance_metadata ------------------------------------------


class PerNodeCloud(FakeCloud):
    """A provider without the optional list call (it hides the fake's)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "list_instance_metadata":
            raise AttributeError(name)
        return super().__getattribute__(name)


def many_nodes(cloud: FakeCloud, count: int, address: dict[str, str]) -> list[Obj]:
    nodes = []
    for i in range(count):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(address),)))
        nodes.append(kubelet_node(f"node{i}", taints=[], addresses=[]))
    return nodes


async def run_for(env: Env, clock: FakeClock, seconds: float) -> None:
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(int(seconds // 60)):
        await clock.advance(60)
    await env.ctrl.stop(grace=1)


@pytest.mark.parametrize(
    ("cloud_type", "period", "method", "expected_calls"),
    [
        pytest.param(PerNodeCloud, 3600.0, "instance_metadata", 120, id="per-node-once-an-hour"),
        pytest.param(FakeCloud, 3600.0, "list_instance_metadata", 12,
                     id="list-call-per-tick-for-due-nodes"),
        pytest.param(FakeCloud, 0.0, "list_instance_metadata", 13,
                     id="default-every-node-every-tick-in-one-list-call"),
        pytest.param(PerNodeCloud, 0.0, "instance_metadata", 13 * 120,
                     id="default-without-list-call-is-upstream-per-node"),
    ],
)  # fmt: skip
async def test_steady_state_cloud_calls_per_hour(
    cloud_type: type[FakeCloud],
    period: float,
    method: str,
    expected_calls: int,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    """One hour of the periodic loop (ticks at 0, 5, ..., 60 min) over 120 initialised nodes."""
    cloud = cloud_type(clock=clock)
    nodes = many_nodes(cloud, 120, INTERNAL)
    options = NodeControllerOptions(node_metadata_refresh_period=period)
    env: Env = await env_factory(cloud, nodes, options=options)
    await run_for(env, clock, 3600)
    assert cloud.calls.count(method) == expected_calls
    other = {"instance_metadata", "list_instance_metadata"} - {method}
    assert not [c for c in cloud.calls if c in other]
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))


async def test_spread_refresh_reads_each_node_once_per_period(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """200 nodes, period 1 h, ticks every 5 min: each node read once per hour, and no tick
    carries much more than its even share (200 / 12)."""
    cloud = PerNodeCloud(clock=clock)
    nodes = many_nodes(cloud, 200, INTERNAL)
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    per_tick = []
    for _ in range(24):
        before = len(cloud.calls)
        await clock.advance(300)
        per_tick.append(len(cloud.calls) - before)
    await env.ctrl.stop(grace=1)
    reads = Counter(c.args[0] for c in cloud.call_log if c.method == "instance_metadata")
    assert len(reads) == 200
    assert set(reads.values()) == {2}
    assert max(per_tick) <= 2 * 200 / 12


async def test_list_call_follows_cloud_address_changes(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 10, INTERNAL)
    env: Env = await env_factory(
        cloud, nodes, options=NodeControllerOptions(node_metadata_refresh_period=600)
    )
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(600)
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))
    for i in range(10):
        cloud.add_instance(FakeInstance(name=f"node{i}", addresses=(addr(INTERNAL2),)))
    await clock.advance(300)
    await clock.advance(300)
    await env.ctrl.stop(grace=1)
    assert all(n["status"]["addresses"] == [INTERNAL2] for n in env.kube.objects(NODES))


async def test_a_node_missing_from_the_list_answer_is_asked_again_next_tick(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """A node the list call leaves out is a failed read (the per-node call raises
    InstanceNotFound for it): it stays due, so it is in every following tick's list call,
    not read again only a refresh period later."""
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 10, INTERNAL)
    cloud.remove_instance("node3")
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    await run_for(env, clock, 3600)
    asked = ["node3" in c.args[0] for c in cloud.call_log if c.method == "list_instance_metadata"]
    first = asked.index(True)
    assert all(asked[first:]), asked
    assert first < len(asked) - 1, "asked once, then never again"


def addresses_of(env: Env, name: str) -> Any:
    (node,) = [n for n in env.kube.objects(NODES) if n["metadata"]["name"] == name]
    return node["status"]["addresses"]


async def test_default_refresh_reads_all_nodes_at_start_and_every_tick_in_one_call(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    """Upstream's cadence (at start, then every --node-status-update-frequency) with one list
    call per tick: an address changed in the cloud reaches its Node within one tick."""
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 50, INTERNAL)
    env: Env = await env_factory(cloud, nodes, options=NodeControllerOptions())
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    await clock.advance(0)
    assert cloud.calls.count("list_instance_metadata") == 1, "once at start"
    assert len(cloud.call_log[-1].args[0]) == 50, "for every node"
    assert all(n["status"]["addresses"] == [INTERNAL] for n in env.kube.objects(NODES))
    cloud.add_instance(FakeInstance(name="node7", addresses=(addr(INTERNAL2),)))
    await clock.advance(299)
    assert addresses_of(env, "node7") == [INTERNAL]
    await clock.advance(1)
    assert addresses_of(env, "node7") == [INTERNAL2]
    assert cloud.calls.count("list_instance_metadata") == 2
    assert "instance_metadata" not in cloud.calls
    await env.ctrl.stop(grace=1)


async def test_list_call_failure_is_logged_and_skipped(
    env_factory: Callable[..., Any], clock: FakeClock
) -> None:
    cloud = FakeCloud(clock=clock)
    nodes = many_nodes(cloud, 5, INTERNAL)
    cloud.fail("list_instance_metadata", RuntimeError("cloud down"))
    env: Env = await env_factory(
        cloud, nodes, options=NodeControllerOptions(node_metadata_refresh_period=300)
    )
    await run_for(env, clock, 300)
    assert cloud.calls.count("list_instance_metadata") >= 1
    assert env.writes() == []


# -- TestGetInstanceMetadata ------------------------------------------------------------------

FULL_META = InstanceMetadata(
    PID, "t1.micro", (addr(INTERNAL), addr(EXTERNAL)), "us-west-1a", "us-west"
)


@pytest.mark.parametrize(
    ("v2", "node", "expected"),
    [
        pytest.param(
            True, kubelet_node(),
            FULL_META,
            id="instanceV2",
        ),
        pytest.param(
            False, kubelet_node(),
            FULL_META,
            id="legacy-with-zones",
        ),
        pytest.param(
            False, kubelet_node(provider_id=PID),
            FULL_META,
            id="legacy-provider-id-from-spec",
        ),
    ],
)  # fmt: skip
async def test_get_instance_metadata(
    v2: bool,
    node: Obj,
    expected: InstanceMetadata,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    env: Env = await env_factory(make_cloud(v2, clock=clock), [node])
    assert await env.ctrl.get_instance_metadata(node) == expected
    if node["spec"].get("providerID"):
        assert "instance_id" not in env.cloud.calls


# -- checklist 57 -----------------------------------------------------------------------------


async def test_build_skips_without_instances(clock: FakeClock) -> None:
    cloud = FakeCloud(clock=clock, enable_instances=False, enable_instances_v2=False)
    registry = CollectorRegistry()
    gate = CallGate(registry=registry, clock=clock)
    kube = FakeKube()
    context = ControllerContext(
        kube, SharedInformerFactory(kube, clock=clock), GatedCloud(cloud, gate),
        EventBroadcaster(kube, clock=clock), registry, clock,
    )  # fmt: skip
    assert node_controller.build(context) is None
    assert (
        node_controller.build(
            ControllerContext(
                kube,
                SharedInformerFactory(kube),
                GatedCloud(FakeCloud(enable_instances=False), gate),
                EventBroadcaster(kube),
                registry,
                clock,
            )
        )
        is not None
    )
    gate.close()


@pytest.mark.parametrize(
    ("cloud_type", "method", "failures"),
    [
        pytest.param(FakeCloud, "list_instance_metadata", 1, id="failed-list-call"),
        pytest.param(PerNodeCloud, "instance_metadata", 3, id="failed-per-node-calls"),
    ],
)
async def test_a_failed_periodic_read_is_retried_at_the_next_tick(
    cloud_type: type[FakeCloud],
    method: str,
    failures: int,
    env_factory: Callable[..., Any],
    clock: FakeClock,
) -> None:
    cloud = cloud_type(clock=clock)
    nodes = many_nodes(cloud, 3, INTERNAL2)
    options = NodeControllerOptions(node_metadata_refresh_period=3600)
    env: Env = await env_factory(cloud, nodes, options=options)
    cloud.fail(method, RuntimeError("throttled"), times=failures)
    run = asyncio.create_task(env.ctrl.run())
    env.tasks.append(run)
    for _ in range(12):  # tick until the reads of the first due nodes have failed
        await clock.advance(300)
        if cloud.calls.count(method) >= failures:
            break
    failed: set[str] = set()
    for call in cloud.call_log:
        if call.method == method:
            names = call.args[0]
            failed |= set(names) if isinstance(names, tuple) else {names}
    assert failed, "some reads failed"
    assert all(not n["status"]["addresses"] for n in env.kube.objects(NODES))
    await clock.advance(300)  # the next tick, not a period (1 h) later, reads them again
    await env.ctrl.stop(grace=1)
    done = {n["metadata"]["name"]: n["status"]["addresses"] for n in env.kube.objects(NODES)}
    assert all(done[name] == [INTERNAL2] for name in failed)
