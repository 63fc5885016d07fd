"""One table of API-server behaviours, run against the real kube-apiserver (integration
tests) and against :class:`kccm.kube.fake.FakeKube` (unit tests), so the fake cannot drift
from what controllers will meet in a cluster.

Each case is an async function taking a :class:`KubeCaseEnv`; it raises AssertionError when
the client under test behaves differently.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kccm.kube.errors import AlreadyExists, Conflict, Gone, InternalError, Invalid, NotFound
from kccm.kube.interface import KubeClient, Obj, PatchType, Preconditions, WatchEventType
from kccm.kube.resources import CONFIG_MAPS, NODES, SERVICES, Resource

__all__ = ["CASES", "KubeCase", "KubeCaseEnv"]

_WAIT = 60.0


@dataclass
class KubeCaseEnv:
    client: KubeClient
    namespace: str
    compact: Callable[[], Awaitable[None]]
    created_nodes: list[str] = field(default_factory=list)

    def name(self, prefix: str) -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    async def node(self, **status: Any) -> Obj:
        name = self.name("node")
        self.created_nodes.append(name)
        body: Obj = {"metadata": {"name": name, "labels": {"kccm-test": "1"}}}
        if status:
            body["status"] = status
        return await self.client.create(NODES, body)

    async def config_map(self, **data: str) -> Obj:
        body = {"metadata": {"name": self.name("cm"), "namespace": self.namespace}, "data": data}
        return await self.client.create(CONFIG_MAPS, body)

    async def service(self) -> Obj:
        body = {
            "metadata": {"name": self.name("svc"), "namespace": self.namespace},
            "spec": {
                "type": "LoadBalancer",
                "allocateLoadBalancerNodePorts": False,
                "ports": [{"port": 80, "protocol": "TCP"}],
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
        }
        return await self.client.create(SERVICES, body)


@dataclass(frozen=True)
class KubeCase:
    id: str
    run: Callable[[KubeCaseEnv], Awaitable[None]]


async def _raises(error: type[Exception], call: Awaitable[Any]) -> Exception:
    try:
        await call
    except error as exc:
        return exc
    raise AssertionError(f"expected {error.__name__}")


def _rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


# -- the cases -------------------------------------------------------------------------------


async def create_then_get(env: KubeCaseEnv) -> None:
    created = await env.config_map(a="1")
    assert created["metadata"]["uid"], "create assigns a uid"
    assert created["metadata"]["creationTimestamp"]
    got = await env.client.get(CONFIG_MAPS, created["metadata"]["name"], namespace=env.namespace)
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    assert _rv(got) == _rv(created)
    assert got["data"] == {"a": "1"}


async def create_duplicate_is_already_exists(env: KubeCaseEnv) -> None:
    created = await env.config_map()
    await _raises(InternalError, env.client.create(CONFIG_MAPS, created))  # carries an RV
    again = {"metadata": {"name": created["metadata"]["name"], "namespace": env.namespace}}
    error = await _raises(AlreadyExists, env.client.create(CONFIG_MAPS, again))
    assert isinstance(error, Conflict)
    assert error.code == 409


async def get_missing_is_not_found(env: KubeCaseEnv) -> None:
    error = await _raises(NotFound, env.client.get(CONFIG_MAPS, "absent", namespace=env.namespace))
    assert getattr(error, "code", 0) == 404


async def list_follows_pages(env: KubeCaseEnv) -> None:
    names = {(await env.config_map())["metadata"]["name"] for _ in range(5)}
    pages = []
    async for items, version in env.client.list_pages(
        CONFIG_MAPS, namespace=env.namespace, page_size=2
    ):
        pages.append(len(items))
        assert version, "every page carries the list resourceVersion"
    listed = await env.client.list(CONFIG_MAPS, namespace=env.namespace, page_size=2)
    assert names <= {o["metadata"]["name"] for o in listed.items}
    assert max(pages) <= 2
    assert sum(pages) >= 5
    assert int(listed.resource_version) > 0


async def strategic_patch_merges_conditions_by_type(env: KubeCaseEnv) -> None:
    node = await env.node(conditions=[{"type": "Ready", "status": "True"}])
    name = node["metadata"]["name"]
    patch = {"status": {"conditions": [{"type": "NetworkUnavailable", "status": "False"}]}}
    patched = await env.client.patch(NODES, name, patch, subresource="status")
    types = {c["type"]: c["status"] for c in patched["status"]["conditions"]}
    assert types == {"Ready": "True", "NetworkUnavailable": "False"}


async def merge_patch_sets_and_removes_labels(env: KubeCaseEnv) -> None:
    node = await env.node()
    name = node["metadata"]["name"]
    patch = {"metadata": {"labels": {"zone": "a", "kccm-test": None}}}
    patched = await env.client.patch(NODES, name, patch, patch_type=PatchType.MERGE)
    assert patched["metadata"]["labels"] == {"zone": "a"}
    assert int(_rv(patched)) > int(_rv(node))


async def json_patch_adds_taint_and_test_op_guards(env: KubeCaseEnv) -> None:
    node = await env.node()
    name = node["metadata"]["name"]
    taint = {"key": "example.com/t", "effect": "NoSchedule"}
    ops = [{"op": "add", "path": "/spec/taints", "value": [taint]}]
    patched = await env.client.patch(NODES, name, ops, patch_type=PatchType.JSON)
    assert patched["spec"]["taints"] == [taint]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "remove", "path": "/spec/taints"},
    ]
    await _raises(Invalid, env.client.patch(NODES, name, guarded, patch_type=PatchType.JSON))
    again = await env.client.get(NODES, name)
    assert again["spec"]["taints"] == [taint], "a failed JSON patch changes nothing"


async def apply_patch_owns_fields_per_manager(env: KubeCaseEnv) -> None:
    created = await env.config_map(a="1")
    name = created["metadata"]["name"]
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": env.namespace},
        "data": {"b": "2"},
    }
    applied = await env.client.patch(
        CONFIG_MAPS,
        name,
        body,
        patch_type=PatchType.APPLY,
        namespace=env.namespace,
        field_manager="kccm-test",
        force=True,
    )
    assert applied["data"] == {"a": "1", "b": "2"}


async def status_subresource_separates_spec_and_status(env: KubeCaseEnv) -> None:
    service = await env.service()
    name = service["metadata"]["name"]
    assert not service.get("status", {}).get("loadBalancer", {}).get("ingress"), (
        "a Service's status is dropped on create"
    )
    ingress = {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
    main = await env.client.patch(
        SERVICES, name, {"status": ingress}, namespace=env.namespace, patch_type=PatchType.MERGE
    )
    assert not main.get("status", {}).get("loadBalancer", {}).get("ingress"), (
        "status written through the main resource is ignored"
    )
    status = await env.client.patch(
        SERVICES,
        name,
        {"status": ingress, "metadata": {"labels": {"ignored": "yes"}}},
        namespace=env.namespace,
        patch_type=PatchType.MERGE,
        subresource="status",
    )
    ips = [entry["ip"] for entry in status["status"]["loadBalancer"]["ingress"]]
    assert ips == ["192.0.2.7"]
    assert status["metadata"]["labels"] == {"ignored": "yes"}, (
        "a Service's status subresource keeps metadata changes (only spec is reset)"
    )


async def node_status_survives_create(env: KubeCaseEnv) -> None:
    address = {"type": "InternalIP", "address": "10.1.2.3"}
    node = await env.node(addresses=[address])
    assert node["status"]["addresses"] == [address]


async def strategic_patch_directives(env: KubeCaseEnv) -> None:
    """The directives controllers send: replace a list, delete from a primitive list."""
    node = await env.node(
        addresses=[
            {"type": "InternalIP", "address": "10.1.1.1"},
            {"type": "Hostname", "address": "h"},
        ]
    )
    name = node["metadata"]["name"]
    replace = {
        "status": {
            "addresses": [{"type": "InternalIP", "address": "10.9.9.9"}, {"$patch": "replace"}]
        }
    }
    patched = await env.client.patch(NODES, name, replace, subresource="status")
    assert patched["status"]["addresses"] == [{"type": "InternalIP", "address": "10.9.9.9"}]
    service = await env.service()
    svc = service["metadata"]["name"]
    two = {"metadata": {"finalizers": ["example.com/other", "example.com/ours"]}}
    await env.client.patch(SERVICES, svc, two, namespace=env.namespace, subresource="status")
    drop = {
        "metadata": {
            "$deleteFromPrimitiveList/finalizers": ["example.com/ours"],
            "$setElementOrder/finalizers": ["example.com/other"],
        }
    }
    left = await env.client.patch(
        SERVICES, svc, drop, namespace=env.namespace, subresource="status"
    )
    assert left["metadata"]["finalizers"] == ["example.com/other"]
    await env.client.patch(
        SERVICES,
        svc,
        {"metadata": {"finalizers": None}},
        namespace=env.namespace,
        subresource="status",
    )


async def stale_resource_version_conflicts(env: KubeCaseEnv) -> None:
    created = await env.config_map(a="1")
    name = created["metadata"]["name"]
    await env.client.patch(
        CONFIG_MAPS, name, {"data": {"a": "2"}}, namespace=env.namespace, patch_type=PatchType.MERGE
    )
    stale = {"metadata": {"resourceVersion": _rv(created)}, "data": {"a": "3"}}
    await _raises(
        Conflict,
        env.client.patch(
            CONFIG_MAPS, name, stale, namespace=env.namespace, patch_type=PatchType.MERGE
        ),
    )
    await _raises(Conflict, env.client.replace(CONFIG_MAPS, {**created, "data": {"a": "4"}}))
    got = await env.client.get(CONFIG_MAPS, name, namespace=env.namespace)
    assert got["data"] == {"a": "2"}


async def delete_preconditions_guard(env: KubeCaseEnv) -> None:
    created = await env.config_map()
    name = created["metadata"]["name"]
    wrong = Preconditions(uid="00000000-0000-0000-0000-000000000000")
    await _raises(
        Conflict, env.client.delete(CONFIG_MAPS, name, namespace=env.namespace, preconditions=wrong)
    )
    right = Preconditions(uid=created["metadata"]["uid"], resource_version=_rv(created))
    result = await env.client.delete(
        CONFIG_MAPS, name, namespace=env.namespace, preconditions=right
    )
    assert result is None
    await _raises(NotFound, env.client.get(CONFIG_MAPS, name, namespace=env.namespace))


async def finalizer_holds_deletion(env: KubeCaseEnv) -> None:
    service = await env.service()
    name = service["metadata"]["name"]
    await env.client.patch(
        SERVICES,
        name,
        {"metadata": {"finalizers": ["example.com/hold"]}},
        namespace=env.namespace,
        patch_type=PatchType.MERGE,
    )
    held = await env.client.delete(SERVICES, name, namespace=env.namespace)
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]
    still = await env.client.get(SERVICES, name, namespace=env.namespace)
    assert still["metadata"]["finalizers"] == ["example.com/hold"]
    await env.client.patch(
        SERVICES,
        name,
        [{"op": "remove", "path": "/metadata/finalizers/0"}],
        namespace=env.namespace,
        patch_type=PatchType.JSON,
    )
    await _raises(NotFound, env.client.get(SERVICES, name, namespace=env.namespace))


async def _collect(
    client: KubeClient, resource: Resource, version: str, namespace: str, count: int
) -> list[tuple[WatchEventType, str]]:
    seen: list[tuple[WatchEventType, str]] = []
    async with asyncio.timeout(_WAIT):
        async for event in client.watch(resource, resource_version=version, namespace=namespace):
            if event.type is not WatchEventType.BOOKMARK:
                seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == count:
                break
    return seen


async def watch_reports_changes_in_order(env: KubeCaseEnv) -> None:
    start = await env.client.list(CONFIG_MAPS, namespace=env.namespace)
    created = await env.config_map(a="1")
    name = created["metadata"]["name"]
    await env.client.patch(
        CONFIG_MAPS, name, {"data": {"a": "2"}}, namespace=env.namespace, patch_type=PatchType.MERGE
    )
    await env.client.delete(CONFIG_MAPS, name, namespace=env.namespace)
    seen = await _collect(env.client, CONFIG_MAPS, start.resource_version, env.namespace, 3)
    assert seen == [
        (WatchEventType.ADDED, name),
        (WatchEventType.MODIFIED, name),
        (WatchEventType.DELETED, name),
    ]


async def watch_from_compacted_version_is_gone(env: KubeCaseEnv) -> None:
    start = await env.client.list(CONFIG_MAPS, namespace=env.namespace)
    for _ in range(3):
        await env.config_map()
    await env.compact()
    error = await _raises(
        Gone, _collect(env.client, CONFIG_MAPS, start.resource_version, env.namespace, 3)
    )
    assert getattr(error, "code", 0) == 410


CASES: tuple[KubeCase, ...] = tuple(
    KubeCase(fn.__name__.replace("_", "-"), fn)
    for fn in (
        create_then_get,
        create_duplicate_is_already_exists,
        get_missing_is_not_found,
        list_follows_pages,
        strategic_patch_merges_conditions_by_type,
        merge_patch_sets_and_removes_labels,
        json_patch_adds_taint_and_test_op_guards,
        apply_patch_owns_fields_per_manager,
        status_subresource_separates_spec_and_status,
        node_status_survives_create,
        strategic_patch_directives,
        stale_resource_version_conflicts,
        delete_preconditions_guard,
        finalizer_holds_deletion,
        watch_reports_changes_in_order,
        watch_from_compacted_version_is_gone,
    )
)
