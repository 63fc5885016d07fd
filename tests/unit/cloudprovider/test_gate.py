"""The call gate on fake time: budget, priorities, shared backoff, coalescing and metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from kccm.cloudprovider import InstanceNotFound, NotImplementedByProvider, RetryError, Throttled
from kccm.cloudprovider.gate import (
    RECENT_WINDOW,
    Budget,
    CallGate,
    GateConfig,
    Priority,
    Throttle,
    UnknownProviderMethod,
    error_kind,
)
from kccm.cloudprovider.gated import GatedCloud, GatedInstancesV2
from kccm.cloudprovider.types import Route
from kccm.providers.fake import FakeCloud, FakeInstance
from kccm.testing.conformance import make_node, make_service
from kccm.util.clock import FakeClock

PID = "fake://i-1"


class Env:
    def __init__(self, config: GateConfig | None = None) -> None:
        self.clock = FakeClock()
        self.registry = CollectorRegistry()
        self.cloud = FakeCloud(clock=self.clock)
        self.cloud.add_instance(FakeInstance(name="n1", instance_id="i-1"))
        self.gate = CallGate(config, registry=self.registry, clock=self.clock)
        self.gated = GatedCloud(self.cloud, self.gate)

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def v2(self) -> GatedInstancesV2:
        v2 = self.gated.instances_v2()
        assert v2 is not None
        return v2


@pytest.fixture
def env() -> Iterator[Env]:
    made = Env(GateConfig(budget=Budget(qps=10, burst=1)))
    yield made
    made.gate.close()


async def test_init_calls_are_all_served_before_periodic_ones_and_the_budget_holds(
    env: Env,
) -> None:
    """10 qps budget, 1000 periodic calls queued first, then 1000 node-initialisation calls."""
    done: list[tuple[Priority, float]] = []
    v1 = env.gated.instances()
    assert v1 is not None

    async def one(priority: Priority, node: int) -> None:
        await v1.instance_exists_by_provider_id(f"fake://i-{node}", priority=priority)
        done.append((priority, env.clock.monotonic()))

    start = env.clock.monotonic()
    tasks = [asyncio.create_task(one(Priority.PERIODIC, i)) for i in range(1000)]
    tasks += [asyncio.create_task(one(Priority.INITIALIZE, 1000 + i)) for i in range(1000)]
    await env.clock.run_until_idle(limit=1000)
    await asyncio.gather(*tasks)

    order = [priority for priority, _ in done]
    assert order == [Priority.INITIALIZE] * 1000 + [Priority.PERIODIC] * 1000
    times = [t - start for _, t in done]
    assert _max_calls_in_any_second(times) == 10
    assert times[999] == pytest.approx(99.9)  # the last init call, after 100 s of budget
    assert times[-1] == pytest.approx(199.9)
    assert env.cloud.calls.count("instance_exists_by_provider_id") == 2000


def _max_calls_in_any_second(times: list[float]) -> int:
    """The most calls in any window [t, t+1), t being any call's start."""
    ordered = sorted(times)
    best, j = 0, 0
    for i, start in enumerate(ordered):
        while j < len(ordered) and ordered[j] < start + 1 - 1e-6:
            j += 1
        best = max(best, j - i)
    return best


async def test_burst_is_spent_first_then_the_rate() -> None:
    env = Env(GateConfig(budget=Budget(qps=2, burst=5)))
    done: list[float] = []

    async def one() -> None:
        await env.v2().instance_exists(make_node(f"n{len(done)}"))
        done.append(env.clock.monotonic())

    start = env.clock.monotonic()
    tasks = [asyncio.create_task(one()) for _ in range(9)]
    await env.clock.run_until_idle()
    await asyncio.gather(*tasks)
    assert [round(t - start, 3) for t in done] == [0, 0, 0, 0, 0, 0.5, 1.0, 1.5, 2.0]
    env.gate.close()


async def test_identical_concurrent_reads_are_served_by_one_provider_call(env: Env) -> None:
    env.cloud.set_latency("instance_metadata", 2.0)
    node = make_node("n1", provider_id=PID)
    calls = [asyncio.create_task(env.v2().instance_metadata(node)) for _ in range(50)]
    await env.clock.run_until_idle()
    results = await asyncio.gather(*calls)
    assert env.cloud.calls.count("instance_metadata") == 1
    assert {r.provider_id for r in results if r is not None} == {PID}
    assert env.metric("cloudprovider_coalesced_calls_total", method="instance_metadata") == 49
    assert env.metric("cloudprovider_calls_total", method="instance_metadata") == 1


async def test_coalesced_callers_share_the_error(env: Env) -> None:
    env.cloud.fail("instance_metadata", InstanceNotFound(), times=1)
    env.cloud.set_latency("instance_metadata", 1.0)
    node = make_node("ghost")
    calls = [asyncio.create_task(env.v2().instance_metadata(node)) for _ in range(3)]
    await env.clock.run_until_idle()
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, InstanceNotFound) for r in results)
    assert env.cloud.calls.count("instance_metadata") == 1


@pytest.mark.parametrize("cancelled", ["first-caller", "second-caller"])
async def test_a_cancelled_caller_of_a_coalesced_read_leaves_the_others_their_answer(
    env: Env, cancelled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first caller runs the read in its own task; cancelling it hands the read to a
    waiting caller (one more provider call), cancelling a waiter changes nothing."""
    env.cloud.set_latency("instance_metadata", 1.0)
    under_way, enter = asyncio.Event(), env.cloud._enter

    async def entering(method: str, *args: object) -> None:
        under_way.set()
        await enter(method, *args)

    monkeypatch.setattr(env.cloud, "_enter", entering)
    node, v2 = make_node("n1", provider_id=PID), env.v2()
    calls = [asyncio.create_task(v2.instance_metadata(node)) for _ in range(3)]
    await under_way.wait()  # the first caller's provider call has started
    gone = calls.pop(0 if cancelled == "first-caller" else 1)
    gone.cancel()
    await env.clock.run_until_idle()
    results = await asyncio.gather(*calls)
    assert [r.provider_id for r in results if r is not None] == [PID, PID]
    assert gone.cancelled()
    assert env.cloud.calls.count("instance_metadata") == (2 if cancelled == "first-caller" else 1)


@pytest.mark.parametrize(
    ("first", "second", "provider_calls"),
    [
        pytest.param(make_node("n1"), make_node("n1"), 1, id="same-node-coalesced"),
        pytest.param(make_node("n1"), make_node("n2"), 2, id="different-nodes-not-coalesced"),
    ],
)
async def test_coalescing_is_keyed_by_object_identity(
    first: dict[str, object], second: dict[str, object], provider_calls: int
) -> None:
    env = Env()
    env.cloud.set_latency("instance_exists", 1.0)
    second["metadata"]["uid"] = first["metadata"]["uid"]  # type: ignore[index]
    calls = [asyncio.create_task(env.v2().instance_exists(n)) for n in (first, second)]
    await env.clock.run_until_idle()
    await asyncio.gather(*calls)
    assert env.cloud.calls.count("instance_exists") == provider_calls
    env.gate.close()


async def test_writes_are_never_coalesced(env: Env) -> None:
    lb = env.gated.load_balancer()
    assert lb is not None
    env.cloud.set_latency("ensure_load_balancer", 1.0)
    svc = make_service("web")
    calls = [asyncio.create_task(lb.ensure_load_balancer("c", svc, [])) for _ in range(3)]
    await env.clock.run_until_idle()
    await asyncio.gather(*calls)
    assert env.cloud.calls.count("ensure_load_balancer") == 3


async def test_a_waiting_read_joined_by_an_init_caller_moves_up(env: Env) -> None:
    """A periodic read already queued is promoted when an init call for the same node joins."""
    v2, order = env.v2(), []
    node = make_node("n1", provider_id=PID)
    others = [make_node(f"x{i}") for i in range(5)]

    async def one(n: dict[str, object], priority: Priority, tag: str) -> None:
        await v2.instance_exists(n, priority=priority)
        order.append(tag)

    tasks = [asyncio.create_task(one(n, Priority.NORMAL, f"x{i}")) for i, n in enumerate(others)]
    tasks.append(asyncio.create_task(one(node, Priority.PERIODIC, "periodic")))
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(one(node, Priority.INITIALIZE, "init")))
    await env.clock.run_until_idle()
    await asyncio.gather(*tasks)
    # x0 took the one token of the burst at once; one provider call served both others,
    # ahead of the four NORMAL calls queued before them.
    assert order == ["x0", "periodic", "init", "x1", "x2", "x3", "x4"]
    assert env.cloud.calls.count("instance_exists") == 6


async def test_throttling_pauses_the_whole_group_for_retry_after() -> None:
    env = Env()
    env.cloud.fail("instance_exists", Throttled("slow down", retry_after=5), times=1)
    v2 = env.v2()
    with pytest.raises(Throttled):
        await v2.instance_exists(make_node("n1"))
    assert env.gate.paused_until("instances") == pytest.approx(env.clock.monotonic() + 5)
    start = env.clock.monotonic()
    waiting = asyncio.create_task(v2.instance_shutdown(make_node("n1")))
    routes = env.gated.routes()
    assert routes is not None
    assert await routes.list_routes("c") == []  # another group is not paused
    await env.clock.advance(4.9)
    assert not waiting.done()
    await env.clock.advance(0.2)
    assert await waiting is False
    assert env.clock.monotonic() - start == pytest.approx(5.1)
    assert env.metric("cloudprovider_throttle_pauses_total", group="instances") == 1
    env.gate.close()


async def test_throttling_without_a_hint_backs_off_exponentially() -> None:
    env = Env(GateConfig(backoff_initial=1.0, backoff_max=3.0))
    env.cloud.fail("get_zone", Throttled(), times=3)
    zones = env.gated.zones()
    assert zones is not None
    pauses = []
    for _ in range(3):
        call = asyncio.create_task(zones.get_zone())
        await env.clock.run_until_idle()
        with pytest.raises(Throttled):
            await call
        pauses.append(env.gate.paused_until("instances") - env.clock.monotonic())
    assert pauses == [1.0, 2.0, 3.0]
    call = asyncio.create_task(zones.get_zone())
    await env.clock.run_until_idle()
    assert await call == env.cloud.zone
    env.gate.close()


async def test_throttled_pauses_retry_error_does_not_and_custom_signals_work() -> None:
    def signal(error: BaseException) -> Throttle | None:
        return Throttle(7) if "RequestLimitExceeded" in str(error) else None

    env = Env(GateConfig(throttle_signal=signal))
    env.cloud.fail("get_zone", OSError("RequestLimitExceeded"), times=1)
    zones = env.gated.zones()
    assert zones is not None
    with pytest.raises(OSError, match="RequestLimitExceeded"):
        await zones.get_zone()
    assert env.gate.paused_until("instances") - env.clock.monotonic() == 7
    env.gate.close()
    default = Env()
    default.cloud.fail("list_routes", Throttled("slow down", 3), times=1)
    default.cloud.fail("create_route", RetryError("not ready", 9), times=1)
    routes = default.gated.routes()
    assert routes is not None
    with pytest.raises(RetryError):
        await routes.create_route(
            "c", "hint", Route(target_node="n1", destination_cidr="10.0.0.0/24")
        )
    assert default.gate.paused_until("routes") <= default.clock.monotonic(), (
        "a RetryError is about one object: the group is not paused"
    )
    with pytest.raises(Throttled):
        await routes.list_routes("c")
    assert default.gate.paused_until("routes") - default.clock.monotonic() == 3
    default.gate.close()


async def test_group_budgets_override_the_default() -> None:
    env = Env(GateConfig(budget=Budget(qps=1), group_budgets={"routes": None}))
    routes, zones = env.gated.routes(), env.gated.zones()
    assert routes is not None
    assert zones is not None
    await asyncio.gather(*(routes.list_routes("c") for _ in range(20)))  # unlimited: no wait
    env.cloud.add_instance(FakeInstance(name="n2"))
    two = asyncio.gather(zones.get_zone_by_node_name("n1"), zones.get_zone_by_node_name("n2"))
    await env.clock.run_until_idle()
    await two
    assert env.clock.monotonic() == pytest.approx(1001.0)
    env.gate.close()


async def test_metrics_count_calls_errors_and_latency(env: Env) -> None:
    env.cloud.set_latency("instance_id", 0.3)
    env.cloud.fail("instance_id", NotImplementedByProvider(), times=1)
    v1 = env.gated.instances()
    assert v1 is not None
    for expected in (NotImplementedByProvider, None):
        call = asyncio.create_task(v1.instance_id("n1"))
        await env.clock.run_until_idle()
        if expected is None:
            assert await call == "i-1"
        else:
            with pytest.raises(expected):
                await call
    assert env.metric("cloudprovider_calls_total", method="instance_id") == 2
    assert (
        env.metric("cloudprovider_call_errors_total", method="instance_id", kind="not_implemented")
        == 1
    )
    assert env.metric("cloudprovider_call_duration_seconds_count", method="instance_id") == 2
    assert env.metric("cloudprovider_call_duration_seconds_sum", method="instance_id") == (
        pytest.approx(0.6)
    )


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        pytest.param(InstanceNotFound(), "instance_not_found", id="instance-not-found"),
        pytest.param(RetryError("x", 1), "retry", id="retry"),
        pytest.param(Throttled(), "throttled", id="throttled"),
        pytest.param(TimeoutError(), "timeout", id="timeout"),
        pytest.param(ValueError(), "other", id="other"),
    ],
)
def test_error_kinds(error: Exception, kind: str) -> None:
    assert error_kind(error) == kind


async def test_a_cancelled_waiter_gives_its_turn_away(env: Env) -> None:
    v2 = env.v2()
    first = asyncio.create_task(v2.instance_exists(make_node("n1")))
    second = asyncio.create_task(v2.instance_exists(make_node("n1"), priority=Priority.PERIODIC))
    third = asyncio.create_task(v2.instance_shutdown(make_node("n1")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    second.cancel()
    await env.clock.run_until_idle()
    assert await first is True
    assert await third is False
    assert second.cancelled()


async def test_sync_providers_run_through_the_gate() -> None:
    class Blocking:
        def master(self, cluster_name: str) -> str:
            return f"https://{cluster_name}"

    gate = CallGate(registry=CollectorRegistry())
    assert await gate.call("master", Blocking().master, "c1") == "https://c1"
    gate.close()


UNKNOWN = [
    pytest.param("instance_exist", None, id="typo-without-key"),
    pytest.param("instance_exist", ("n1",), id="typo-with-read-key"),
    pytest.param("frobnicate", ("n1",), id="made-up"),
    pytest.param("instances", None, id="a-group-name-is-not-a-method"),
    pytest.param("", None, id="empty"),
]


@pytest.mark.parametrize(("method", "key"), UNKNOWN)
async def test_an_undeclared_method_name_is_refused_before_anything_runs(
    method: str, key: tuple[str, ...] | None
) -> None:
    ran: list[str] = []
    registry = CollectorRegistry()
    gate = CallGate(GateConfig(budget=Budget(qps=1, burst=1)), registry=registry)
    try:
        with pytest.raises(UnknownProviderMethod, match=f"unknown provider method '{method}'"):
            await gate.call(method, lambda: ran.append(method), key=key)
    finally:
        gate.close()
    assert ran == []
    assert registry.get_sample_value("cloudprovider_calls_total", {"method": method}) is None
    assert (
        registry.get_sample_value("cloudprovider_call_wait_seconds_count", {"method": method})
        is None
    )


async def test_gated_cloud_exposes_every_capability(env: Env) -> None:
    gated = env.gated
    await gated.initialize(None, asyncio.Event())
    assert env.cloud.initialized
    assert gated.provider_name() == "fake"
    assert gated.has_cluster_id()
    clusters, pv = gated.clusters(), gated.pv_labeler()
    assert clusters is not None
    assert pv is not None
    assert await clusters.list_clusters() == ["kubernetes"]
    assert await pv.get_labels_for_volume({"metadata": {"name": "v"}}) == {}
    assert GatedCloud(FakeCloud(enable_routes=False), env.gate).routes() is None


async def test_snapshot_reports_recent_rate_budget_and_throttling_without_side_effects() -> None:
    env = Env(GateConfig(group_budgets={"instances": Budget(qps=5, burst=10)}))
    v2 = env.v2()
    for _ in range(3):
        await v2.instance_exists(make_node("n1", provider_id=PID))
    env.cloud.fail("instance_shutdown", Throttled("slow down", retry_after=7.0))
    with pytest.raises(Throttled):
        await v2.instance_shutdown(make_node("n1", provider_id=PID))
    (group,) = env.gate.snapshot()
    assert (group.group, group.recent_calls, group.budget_qps, group.budget_burst) == (
        "instances",
        4,
        5,
        10,
    )
    assert group.recent_rate == round(4 / RECENT_WINDOW, 3)
    assert (group.throttled_for, group.consecutive_throttles, group.waiting) == (7.0, 1, 0)
    assert env.gate.snapshot() == [group], "asking changes nothing"
    await env.clock.advance(RECENT_WINDOW + 8)
    (later,) = env.gate.snapshot()
    assert (later.recent_calls, later.throttled_for) == (0, 0.0)
    env.gate.close()
