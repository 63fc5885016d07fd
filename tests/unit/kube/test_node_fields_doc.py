"""The Node fields a provider receives are the ones the docs list.

``NODE_KEPT`` / ``NODE_DROPPED`` (kccm.kube.projection) are the one written list: the Node
projection and the informer's slimming must keep and drop exactly those, and the provider
contract's docstring and docs/writing-a-provider.md must name each of them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kccm.cloudprovider import interface
from kccm.kube.projection import NODE_DROPPED, NODE_KEPT, NODE_PROJECTION
from kccm.runtime.informers import slim_node

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "writing-a-provider.md"
UNLISTED_STATUS = "declaredFeatures"  # a status field neither list names: dropped too
_KEY = re.compile(r'([A-Za-z]+)|\["([^"]+)"\]')


def keys(path: str) -> tuple[str, ...]:
    """``metadata.annotations["a/b"]`` -> ``("metadata", "annotations", "a/b")``."""
    return tuple(plain or quoted for plain, quoted in _KEY.findall(path))


def put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj.setdefault(path[-1], value)


def has(obj: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return False
        obj = obj[key]
    return True


def full_node() -> dict[str, Any]:
    """A Node carrying every listed field (and one unlisted status field)."""
    node: dict[str, Any] = {
        "metadata": {"name": "n1", "uid": "u-1", "annotations": {"keep": "me"}},
        "spec": {"providerID": "fake://n1"},
    }
    for path in (*NODE_KEPT, *NODE_DROPPED, f"status.{UNLISTED_STATUS}"):
        put(node, keys(path), {"x": 1})
    return node


@pytest.mark.parametrize(
    ("name", "slim"),
    [
        pytest.param(
            "projection", lambda n: NODE_PROJECTION.item(msgspec.json.encode(n)), id="projection"
        ),
        pytest.param("informer", lambda n: slim_node(copy.deepcopy(n)), id="informer-slim_node"),
    ],
)
@pytest.mark.parametrize("path", NODE_DROPPED)
def test_a_dropped_field_never_reaches_a_provider(name: str, slim: Any, path: str) -> None:
    node = full_node()
    assert has(node, keys(path))
    assert not has(slim(node), keys(path)), f"the {name} keeps {path}"


@pytest.mark.parametrize("path", NODE_KEPT)
def test_a_kept_field_reaches_a_provider(path: str) -> None:
    projected = NODE_PROJECTION.item(msgspec.json.encode(full_node()))
    assert has(projected, keys(path))


def test_the_projection_keeps_nothing_the_list_does_not_name() -> None:
    projected = NODE_PROJECTION.item(msgspec.json.encode(full_node()))
    top = {keys(p)[0] for p in NODE_KEPT if len(keys(p)) == 1}
    status = {keys(p)[1] for p in NODE_KEPT if keys(p)[0] == "status"}
    assert set(projected) == top | {"status"}
    assert set(projected["status"]) == status  # UNLISTED_STATUS is gone too
    assert projected["metadata"]["annotations"] == {"keep": "me"}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(interface.__doc__ or "", id="interface-docstring"),
        pytest.param(" ".join(GUIDE.read_text().split()), id="writing-a-provider"),
    ],
)
@pytest.mark.parametrize("path", [*NODE_KEPT, *NODE_DROPPED])
def test_the_docs_name_every_listed_field(text: str, path: str) -> None:
    assert f"`{path}`" in text
