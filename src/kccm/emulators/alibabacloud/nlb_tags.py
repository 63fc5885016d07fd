"""NLB tags: ``TagResources``, ``UntagResources`` and ``ListTagResources`` on balancers
(``ResourceType`` ``loadbalancer``), listeners (``listener``) and server groups
(``servergroup``), by ``ResourceId.N`` (``ListTagResources`` without ids: every resource of the
type, filtered by ``Tag.N``). At most 20 tags a resource (``QuotaExceeded.TagsPerResource``);
``UntagResources`` with ``All=true`` removes every tag."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kccm.emulators.alibabacloud.nlbwire import MAX_TAGS, flag, not_found, register, strings, tags
from kccm.emulators.alibabacloud.rpc import RpcError, required, token_listing
from kccm.emulators.alibabacloud.world import World

__all__: list[str] = []

_KINDS = {"loadbalancer": "loadBalancer", "listener": "listener", "servergroup": "serverGroup"}


def _table(world: World, kind: str) -> Mapping[str, Any]:
    tables: dict[str, Mapping[str, Any]] = {
        "loadbalancer": world.nlb.balancers,
        "listener": world.nlb.listeners,
        "servergroup": world.nlb.groups,
    }
    if kind not in tables:
        raise RpcError(
            "IllegalParam.ResourceType", f"ResourceType {kind!r} is not one of {sorted(tables)}"
        )
    return tables[kind]


def _resources(
    world: World, params: Mapping[str, str], *, all_when_none: bool = False
) -> list[Any]:
    kind = required(params, "ResourceType").lower()
    table = _table(world, kind)
    ids = strings(params, "ResourceId")
    if not ids and not all_when_none:
        raise RpcError("MissingParameter", "The input parameter 'ResourceId' that is mandatory")
    for resource_id in ids:
        if resource_id not in table:
            raise not_found(_KINDS[kind], resource_id)
    return [table[i] for i in ids] if ids else [v for _, v in sorted(table.items())]


def tag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    wanted = tags(params)
    if not wanted:
        raise RpcError("MissingParameter", "The input parameter 'Tag' that is mandatory")
    found = _resources(world, params)
    if any(len({**r.tags, **wanted}) > MAX_TAGS for r in found):
        raise RpcError("QuotaExceeded.TagsPerResource", f"at most {MAX_TAGS} tags a resource")
    for resource in found:
        resource.tags.update(wanted)
    return {}


def untag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    keys, every = strings(params, "TagKey"), bool(flag(params, "All"))
    if not keys and not every:
        raise RpcError("MissingParameter", "TagKey or All=true is needed")
    for resource in _resources(world, params):
        for key in list(resource.tags) if every else keys:
            resource.tags.pop(key, None)
    return {}


def list_tag_resources(world: World, params: Mapping[str, str]) -> dict[str, Any]:
    kind = required(params, "ResourceType").lower()
    wanted = tags(params)
    items = [
        {"ResourceId": r.id, "ResourceType": kind, "TagKey": k, "TagValue": v, "Category": "Custom"}
        for r in _resources(world, params, all_when_none=True)
        if all(r.tags.get(wk) == wv for wk, wv in wanted.items())
        for k, v in sorted(r.tags.items())
    ]
    return token_listing(params, items, "TagResources", default=50)


register(
    {
        "TagResources": tag_resources,
        "UntagResources": untag_resources,
        "ListTagResources": list_tag_resources,
    }
)
