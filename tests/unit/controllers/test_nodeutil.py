"""Node helpers (upstream node/helpers and component-helpers/node/util) on the in-memory fake."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kccm.controllers import nodeutil
from kccm.controllers.nodeutil import (
    NodeIPError,
    add_or_update_labels_on_node,
    add_or_update_taint_on_node,
    get_node_addresses_from_node_ip,
    get_node_condition,
    node_addresses_change_detected,
    parse_node_ip_annotation,
    patch_node_status,
    remove_taint_off_node,
    set_node_condition,
)
from kccm.kube.errors import Conflict, NotFound
from kccm.kube.fake import FakeKube
from kccm.kube.interface import Obj, PatchType
from kccm.kube.resources import NODES, Resource
from kccm.util.clock import FakeClock

SHUTDOWN = {"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}
UNINIT = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}


def ip(kind: str, address: str) -> dict[str, str]:
    return {"type": kind, "address": address}


async def make_node(kube: FakeKube, name: str = "node0", **spec: Any) -> Obj:
    return await kube.create(NODES, {"metadata": {"name": name}, "spec": dict(spec)})


def writes(kube: FakeKube) -> list[tuple[str, str, str]]:
    return [r for r in kube.requests if r[0] in ("patch", "replace", "create", "delete")][1:]


class ConflictingKube(FakeKube):
    """Raises Conflict on the first ``conflicts`` patches (a concurrent writer)."""

    def __init__(self, conflicts: int) -> None:
        super().__init__()
        self.conflicts = conflicts

    async def patch(self, resource: Resource, name: str, patch: Any, **kw: Any) -> Obj:
        if self.conflicts > 0:
            self.conflicts -= 1
            self.requests.append(("patch", str(resource), name))
            raise Conflict("the object has been modified", reason="Conflict")
        return await super().patch(resource, name, patch, **kw)


# -- taints -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("initial", "add", "expected", "patched"),
    [
        pytest.param([], [SHUTDOWN], [SHUTDOWN], True, id="add-to-empty"),
        pytest.param([UNINIT], [SHUTDOWN], [UNINIT, SHUTDOWN], True, id="append-keeps-order"),
        pytest.param([SHUTDOWN], [SHUTDOWN], [SHUTDOWN], False, id="already-there-no-write"),
        pytest.param(
            [{**SHUTDOWN, "value": ""}], [SHUTDOWN], [{**SHUTDOWN, "value": ""}], False,
            id="empty-value-equals-absent-value",
        ),
        pytest.param(
            [{**SHUTDOWN, "value": "old"}, UNINIT], [SHUTDOWN], [SHUTDOWN, UNINIT], True,
            id="key-effect-match-replaced-in-place",
        ),
        pytest.param(
            [{**SHUTDOWN, "effect": "NoExecute"}], [SHUTDOWN],
            [{**SHUTDOWN, "effect": "NoExecute"}, SHUTDOWN], True,
            id="other-effect-is-another-taint",
        ),
    ],
)  # fmt: skip
async def test_add_or_update_taint(
    initial: list[Any], add: list[Any], expected: list[Any], patched: bool
) -> None:
    kube = FakeKube()
    await make_node(kube, taints=initial)
    assert await add_or_update_taint_on_node(kube, "node0", *add) is patched
    node = await kube.get(NODES, "node0")
    assert node["spec"].get("taints", []) == expected
    assert (("patch", "nodes", "node0") in kube.requests) is patched


@pytest.mark.parametrize(
    ("initial", "remove", "expected", "patched"),
    [
        pytest.param([SHUTDOWN], [SHUTDOWN], [], True, id="remove-only-taint"),
        pytest.param([UNINIT, SHUTDOWN], [SHUTDOWN], [UNINIT], True, id="others-kept"),
        pytest.param(
            [{**SHUTDOWN, "value": "x"}], [SHUTDOWN], [], True, id="value-ignored-on-match"
        ),
        pytest.param([UNINIT], [SHUTDOWN], [UNINIT], False, id="absent-no-write"),
        pytest.param(
            [{**SHUTDOWN, "effect": "NoExecute"}], [SHUTDOWN],
            [{**SHUTDOWN, "effect": "NoExecute"}], False, id="effect-must-match",
        ),
    ],
)  # fmt: skip
async def test_remove_taint(
    initial: list[Any], remove: list[Any], expected: list[Any], patched: bool
) -> None:
    kube = FakeKube()
    await make_node(kube, taints=initial)
    assert await remove_taint_off_node(kube, "node0", None, *remove) is patched
    node = await kube.get(NODES, "node0")
    assert (node["spec"].get("taints") or []) == expected


async def test_remove_taint_with_cached_node_without_taint_makes_no_api_call() -> None:
    kube = FakeKube()
    node = await make_node(kube, taints=[UNINIT])
    kube.requests.clear()
    assert await remove_taint_off_node(kube, "node0", node, SHUTDOWN) is False
    assert kube.requests == []


async def test_taint_patch_carries_resource_version() -> None:
    kube = FakeKube()
    await make_node(kube)
    sent: list[Any] = []
    original = kube.patch

    async def spy(resource: Resource, name: str, patch: Any, **kw: Any) -> Obj:
        sent.append((patch, kw.get("patch_type")))
        return await original(resource, name, patch, **kw)

    kube.patch = spy  # type: ignore[method-assign]
    node = await kube.get(NODES, "node0")
    await add_or_update_taint_on_node(kube, "node0", SHUTDOWN)
    patch, kind = sent[0]
    assert kind is PatchType.STRATEGIC
    assert patch["metadata"]["resourceVersion"] == node["metadata"]["resourceVersion"]
    assert patch["spec"]["taints"] == [SHUTDOWN]


async def test_taint_retries_conflicts_on_the_clock() -> None:
    clock = FakeClock()
    kube = ConflictingKube(conflicts=2)
    await make_node(kube)
    task = asyncio.create_task(add_or_update_taint_on_node(kube, "node0", SHUTDOWN, clock=clock))
    await clock.run_until_idle()
    assert await task is True
    assert [r[0] for r in kube.requests].count("get") == 3  # re-read before every attempt
    assert (await kube.get(NODES, "node0"))["spec"]["taints"] == [SHUTDOWN]
    assert clock.monotonic() - 1000.0 >= 0.2  # two waits of 100-200 ms


async def test_taint_gives_up_after_five_conflicts() -> None:
    clock = FakeClock()
    kube = ConflictingKube(conflicts=99)
    await make_node(kube)
    task = asyncio.create_task(add_or_update_taint_on_node(kube, "node0", SHUTDOWN, clock=clock))
    await clock.run_until_idle()
    with pytest.raises(Conflict):
        await task
    assert [r[0] for r in kube.requests].count("patch") == 5


async def test_taint_on_missing_node_is_not_found() -> None:
    with pytest.raises(NotFound):
        await add_or_update_taint_on_node(FakeKube(), "nope", SHUTDOWN)


# -- labels -----------------------------------------------------------------------------------


async def test_labels_added_and_updated_others_kept() -> None:
    kube = FakeKube()
    await kube.create(NODES, {"metadata": {"name": "node0", "labels": {"a": "1", "b": "2"}}})
    await add_or_update_labels_on_node(kube, "node0", {"b": "3", "c": "4"})
    node = await kube.get(NODES, "node0")
    assert node["metadata"]["labels"] == {"a": "1", "b": "3", "c": "4"}


async def test_labels_retry_on_conflict() -> None:
    clock = FakeClock()
    kube = ConflictingKube(conflicts=1)
    await make_node(kube)
    task = asyncio.create_task(add_or_update_labels_on_node(kube, "node0", {"x": "y"}, clock=clock))
    await clock.run_until_idle()
    await task
    assert (await kube.get(NODES, "node0"))["metadata"]["labels"] == {"x": "y"}


# -- status -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param([], [ip("InternalIP", "10.0.0.1")], id="from-empty"),
        pytest.param(
            [ip("InternalIP", "10.0.0.1"), ip("InternalIP", "10.0.0.2"), ip("Hostname", "h")],
            [ip("InternalIP", "10.0.0.2"), ip("Hostname", "h")],
            id="same-type-duplicates-replaced-not-merged",
        ),
        pytest.param(
            [ip("ExternalIP", "1.1.1.1"), ip("Hostname", "h")],
            [ip("InternalIP", "10.0.0.9")],
            id="stale-types-dropped",
        ),
    ],
)
async def test_patch_node_status_replaces_addresses(old: list[Any], new: list[Any]) -> None:
    kube = FakeKube()
    await make_node(kube)
    await kube.patch(
        NODES,
        "node0",
        {"status": {"addresses": old, "conditions": [{"type": "Ready", "status": "True"}]}},
        patch_type=PatchType.MERGE,
        subresource="status",
    )
    node = await kube.get(NODES, "node0")
    wanted = {**node, "status": {**node["status"], "addresses": new}}
    await patch_node_status(kube, "node0", node, wanted)
    got = await kube.get(NODES, "node0")
    assert got["status"]["addresses"] == new
    assert got["status"]["conditions"] == [{"type": "Ready", "status": "True"}]


async def test_set_node_condition_stamps_heartbeat_and_merges_by_type() -> None:
    clock = FakeClock()
    kube = FakeKube()
    await make_node(kube)
    await set_node_condition(kube, "node0", {"type": "Ready", "status": "True"}, clock=clock)
    await clock.advance(60)
    cond = {"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}
    await set_node_condition(kube, "node0", cond, clock=clock)
    node = await kube.get(NODES, "node0")
    assert node["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"},
        {**cond, "lastHeartbeatTime": "2026-01-01T00:01:00Z"},
    ]
    assert get_node_condition(node, "NetworkUnavailable") == node["status"]["conditions"][1]
    assert get_node_condition(node, "MemoryPressure") is None
    assert get_node_condition({}, "Ready") is None


# -- node IP annotation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("10.0.0.1", ["10.0.0.1"], id="ipv4"),
        pytest.param("2001:db8::1", ["2001:db8::1"], id="ipv6"),
        pytest.param("10.0.0.1,2001:db8::1", ["10.0.0.1", "2001:db8::1"], id="dual-stack"),
        pytest.param("2001:db8::1,10.0.0.1", ["2001:db8::1", "10.0.0.1"], id="dual-stack-v6-first"),
        pytest.param("010.000.000.001", ["10.0.0.1"], id="sloppy-leading-zeros"),
        pytest.param("0.0.0.0", ["0.0.0.0"], id="single-unspecified-allowed"),
    ],
)
def test_parse_node_ip_annotation_accepts(value: str, expected: list[str]) -> None:
    assert [str(a) for a in parse_node_ip_annotation(value)] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", 'could not parse ""', id="empty"),
        pytest.param("not-an-ip", 'could not parse "not-an-ip"', id="garbage"),
        pytest.param("10.0.0.1, 2001:db8::1", 'could not parse " 2001:db8::1"', id="no-trim"),
        pytest.param(
            "10.0.0.1,10.0.0.2",
            "must contain either a single IP or a dual-stack pair of IPs",
            id="same-family-pair",
        ),
        pytest.param(
            "10.0.0.1,2001:db8::1,10.0.0.2",
            "must contain either a single IP or a dual-stack pair of IPs",
            id="three-ips",
        ),
        pytest.param(
            "0.0.0.0,2001:db8::1",
            "dual-stack node IP cannot include '0.0.0.0' or '::'",
            id="dual-with-unspecified-v4",
        ),
        pytest.param(
            "10.0.0.1,::",
            "dual-stack node IP cannot include '0.0.0.0' or '::'",
            id="dual-with-unspecified-v6",
        ),
    ],
)
def test_parse_node_ip_annotation_rejects(value: str, message: str) -> None:
    with pytest.raises(NodeIPError) as err:
        parse_node_ip_annotation(value)
    assert str(err.value) == message


CLOUD = [
    ip("InternalIP", "10.0.0.1"),
    ip("InternalIP", "10.0.0.2"),
    ip("ExternalIP", "132.143.154.163"),
    ip("InternalIP", "2001:db8::1"),
]


@pytest.mark.parametrize(
    ("annotation", "cloud", "expected"),
    [
        pytest.param(
            "10.0.0.2", CLOUD,
            [ip("InternalIP", "10.0.0.2"), ip("ExternalIP", "132.143.154.163")],
            id="matched-type-keeps-only-node-ip",
        ),
        pytest.param(
            "132.143.154.163", CLOUD,
            [ip("ExternalIP", "132.143.154.163"), ip("InternalIP", "10.0.0.1"),
             ip("InternalIP", "10.0.0.2"), ip("InternalIP", "2001:db8::1")],
            id="external-ip-first-rest-in-cloud-order",
        ),
        pytest.param(
            "2001:db8::1,10.0.0.1", CLOUD,
            [ip("InternalIP", "2001:db8::1"), ip("InternalIP", "10.0.0.1"),
             ip("ExternalIP", "132.143.154.163")],
            id="dual-stack-in-annotation-order",
        ),
        pytest.param(
            "10.0.0.1", [ip("InternalIP", "10.0.0.1"), ip("ExternalIP", "10.0.0.1")],
            [ip("InternalIP", "10.0.0.1"), ip("ExternalIP", "10.0.0.1")],
            id="every-cloud-match-kept",
        ),
    ],
)  # fmt: skip
def test_get_node_addresses_from_node_ip(
    annotation: str, cloud: list[Any], expected: list[Any]
) -> None:
    assert get_node_addresses_from_node_ip(annotation, cloud) == expected


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        pytest.param(
            "10.1.1.1",
            "failed to get node address from cloud provider that matches ip: 10.1.1.1",
            id="not-among-cloud-addresses",
        ),
        pytest.param(
            "bogus", 'failed to parse node IP "bogus": could not parse "bogus"', id="unparsable"
        ),
    ],
)
def test_get_node_addresses_from_node_ip_errors(annotation: str, message: str) -> None:
    with pytest.raises(NodeIPError) as err:
        get_node_addresses_from_node_ip(annotation, CLOUD)
    assert str(err.value) == message


# TestNodeAddressesChangeDetected (upstream node_controller_test.go)
@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        pytest.param([ip("InternalIP", "10.0.0.1")], [ip("InternalIP", "10.0.0.1")], False,
                     id="same"),
        pytest.param(
            [ip("InternalIP", "10.0.0.1"), ip("ExternalIP", "132.143.154.163")],
            [ip("ExternalIP", "132.143.154.163"), ip("InternalIP", "10.0.0.1")],
            False, id="reordered-is-not-a-change",
        ),
        pytest.param([ip("InternalIP", "10.0.0.1")],
                     [ip("InternalIP", "10.0.0.1"), ip("ExternalIP", "1.1.1.1")], True,
                     id="added"),
        pytest.param([ip("InternalIP", "10.0.0.1"), ip("ExternalIP", "1.1.1.1")],
                     [ip("InternalIP", "10.0.0.1")], True, id="removed"),
        pytest.param([ip("InternalIP", "10.0.0.1")], [ip("InternalIP", "10.0.0.2")], True,
                     id="address-changed"),
        pytest.param([ip("InternalIP", "10.0.0.1")], [ip("ExternalIP", "10.0.0.1")], True,
                     id="type-changed"),
        pytest.param(
            [ip("InternalIP", "10.0.0.1"), ip("InternalIP", "10.0.0.2")],
            [ip("InternalIP", "10.0.0.2"), ip("InternalIP", "10.0.0.2")],
            False, id="last-old-value-per-type-wins",
        ),
        pytest.param([], [], False, id="both-empty"),
    ],
)  # fmt: skip
def test_node_addresses_change_detected(old: list[Any], new: list[Any], changed: bool) -> None:
    assert node_addresses_change_detected(old, new) is changed


def test_backoff_delay_is_jittered_within_bounds() -> None:
    delays = [nodeutil.UPDATE_TAINT_BACKOFF.delay() for _ in range(200)]
    assert all(0.1 <= d <= 0.2 for d in delays)
    assert len(set(delays)) > 1
