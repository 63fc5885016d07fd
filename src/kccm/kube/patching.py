"""Patch semantics for the in-memory fake: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and a strategic-merge subset covering the list fields kccm writes."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kccm.kube.errors import BadRequest, Invalid, StatusCause

__all__ = ["apply_json_patch", "merge_patch", "strategic_merge_patch"]

# (parent key, list key) -> merge key; None means "merge as a set of primitives".
_MERGE_KEYS: dict[tuple[str, str], str | None] = {
    ("status", "conditions"): "type",
    ("status", "addresses"): "type",
    ("metadata", "finalizers"): None,
    ("spec", "ports"): "port",
    ("metadata", "ownerReferences"): "uid",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, parent: str = "") -> Any:
    """Merge patch plus merge-by-key for the list fields in the table above, and the
    directives kccm sends: ``$patch: replace`` (on a map, or as a list element),
    ``$patch: delete`` list elements, ``$deleteFromPrimitiveList/<key>`` and
    ``$setElementOrder/<key>``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif (parent, key) in _MERGE_KEYS and isinstance(value, list):
            result[key] = _merge_list(result.get(key) or [], value, _MERGE_KEYS[(parent, key)])
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    _apply_list_directives(result, patch)
    return result


def _apply_list_directives(result: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        directive, _, field = key.partition("/")
        if directive == "$deleteFromPrimitiveList" and isinstance(value, list):
            kept = [v for v in result.get(field) or [] if v not in value]
            if kept:
                result[field] = kept
            else:
                result.pop(field, None)
        elif directive == "$setElementOrder" and isinstance(value, list):
            _reorder(result, field, value)


def _reorder(result: dict[str, Any], field: str, order: list[Any]) -> None:
    """Sort the list so elements named in ``order`` come in that order (stable)."""
    current = result.get(field)
    if not isinstance(current, list):
        return

    def matches(item: Any, want: Any) -> bool:
        if isinstance(want, Mapping) and isinstance(item, Mapping):
            return all(item.get(k) == v for k, v in want.items())
        return bool(item == want)

    def rank(item: Any) -> int:
        return next((i for i, want in enumerate(order) if matches(item, want)), len(order))

    result[field] = sorted(current, key=rank)


def _merge_list(current: list[Any], patch: list[Any], merge_key: str | None) -> list[Any]:
    if any(isinstance(i, Mapping) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    if merge_key is None:
        return list(current) + [v for v in patch if v not in current]
    merged = [copy.deepcopy(item) for item in current]
    index = {item.get(merge_key): i for i, item in enumerate(merged)}
    for item in patch:
        key = item.get(merge_key)
        if item.get("$patch") == "delete":
            merged = [m for m in merged if m.get(merge_key) != key]
            index = {m.get(merge_key): i for i, m in enumerate(merged)}
        elif key in index:
            merged[index[key]] = strategic_merge_patch(merged[index[key]], item)
        else:
            index[key] = len(merged)
            merged.append(copy.deepcopy(item))
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise BadRequest(f"JSON pointer {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _add(doc: Any, parts: list[str], value: Any) -> None:
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts), parts[-1]
    return parent.pop(int(last)) if isinstance(parent, list) else parent.pop(last)


def _get(doc: Any, parts: list[str]) -> Any:
    parent = _parent(doc, parts)
    return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]


def _apply_op(doc: Any, op: Mapping[str, Any]) -> None:
    kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
    if kind == "add":
        _add(doc, parts, copy.deepcopy(op["value"]))
    elif kind == "remove":
        _remove(doc, parts)
    elif kind == "replace":
        _remove(doc, parts)
        _add(doc, parts, copy.deepcopy(op["value"]))
    elif kind == "test":
        if _get(doc, parts) != op.get("value"):
            raise Invalid(
                f"the server rejected our request due to an error in our request: "
                f"test failed at {op.get('path')}",
                causes=(StatusCause(str(op.get("path")), "FieldValueInvalid", "test failed"),),
            )
    elif kind in ("move", "copy"):
        source = _pointer(str(op["from"]))
        value = _remove(doc, source) if kind == "move" else copy.deepcopy(_get(doc, source))
        _add(doc, parts, value)
    else:
        raise BadRequest(f"unknown JSON patch operation {kind!r}")


def apply_json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902, all-or-nothing."""
    if not isinstance(ops, list):
        raise BadRequest("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    try:
        for op in ops:
            _apply_op(doc, op)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise Invalid(f"JSON patch failed: {exc!r}") from exc
    return doc
