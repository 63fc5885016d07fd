"""Every built-in provider's capability objects are checked by mypy against their Protocols.

The rule (docs/writing-a-provider.md): the provider class's capability accessors
(``load_balancer()``, ``instances_v2()``, ``routes()``, ...) return their concrete classes, not
the Protocol (an ``Any`` attribute returned as ``LoadBalancer`` is never compared with it), and
a never-called ``_implements()`` beside the provider class binds the provider to ``Interface``
and each capability class to every Protocol it serves, the optional ones (``describe_*``,
``list_instance_metadata``, ``get_labels_for_volume``) included. mypy then names the provider
when a Protocol grows. This test fails when a binding is missing."""

from __future__ import annotations

import ast
import inspect
import textwrap
import tomllib
import types
import typing
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from kccm.cloudprovider import (
    AddressRetainer,
    BalancerSharer,
    Clusters,
    EndpointsUser,
    InstanceDescriber,
    InstanceMetadataLister,
    Instances,
    InstancesV2,
    Interface,
    LoadBalancer,
    LoadBalancerDescriber,
    PVLabeler,
    Routes,
    ServiceMarker,
    TargetDrainer,
    Zones,
)
from kccm.cloudprovider.interface import CALL_PROTOCOLS

ROOT = Path(__file__).resolve().parents[3]
ENTRY_POINTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "entry-points"
]["kccm.cloud_providers"]

ACCESSORS: dict[str, tuple[type, tuple[type, ...]]] = {
    "load_balancer": (
        LoadBalancer,
        (
            LoadBalancerDescriber,
            AddressRetainer,
            TargetDrainer,
            BalancerSharer,
            EndpointsUser,
            ServiceMarker,
        ),
    ),
    "instances": (Instances, (InstanceDescriber, InstanceMetadataLister)),
    "instances_v2": (InstancesV2, (InstanceDescriber, InstanceMetadataLister)),
    "zones": (Zones, ()),
    "clusters": (Clusters, ()),
    "routes": (Routes, ()),
}
"""Capability accessor -> (its Protocol, the optional Protocols found on the same object)."""
ON_THE_CLOUD = (PVLabeler,)
"""Optional Protocols the framework looks for on the provider object itself."""


def _provider_class(entry: str) -> type:
    module, _, name = entry.partition(":")
    factory = getattr(import_module(module), name)
    cls = typing.get_type_hints(factory)["return"]
    assert isinstance(cls, type), f"{entry}: the factory's return annotation is not a class"
    return cls


def _bindings(cls: type) -> set[tuple[type, type]]:
    """(class, Protocol) pairs of the ``_implements()`` beside ``cls``: its parameters' classes
    against its return annotation's tuple, matched through the returned tuple's names."""
    module = import_module(cls.__module__)
    check = getattr(module, "_implements", None)
    assert check is not None, f"{module.__name__} has no _implements() beside {cls.__name__}"
    hints = typing.get_type_hints(check)
    protocols = typing.get_args(hints["return"])
    tree = ast.parse(textwrap.dedent(inspect.getsource(check)))
    returns = [node for node in ast.walk(tree) if isinstance(node, ast.Return)]
    assert len(returns) == 1, f"{module.__name__}._implements() must have one return"
    assert isinstance(returns[0].value, ast.Tuple), (
        f"{module.__name__}._implements() must return a tuple of its parameters"
    )
    names = [element.id for element in returns[0].value.elts if isinstance(element, ast.Name)]
    assert len(names) == len(protocols), (
        f"{module.__name__}._implements(): tuple and annotation differ"
    )
    return {(hints[name], protocol) for name, protocol in zip(names, protocols, strict=True)}


def _returned_classes(cls: type, accessor: str) -> list[Any]:
    hint = typing.get_type_hints(getattr(cls, accessor))["return"]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return [arg for arg in args if arg is not type(None)]


def _is_protocol(tp: Any) -> bool:
    return bool(getattr(tp, "_is_protocol", False))


def missing_bindings(cls: type) -> list[str]:
    """What mypy is not asked to check for the provider class ``cls`` (empty: all of it)."""
    bound = _bindings(cls)
    missing = [] if (cls, Interface) in bound else [f"{cls.__name__} as Interface"]
    for accessor, (protocol, optional) in ACCESSORS.items():
        for served in _returned_classes(cls, accessor):
            if _is_protocol(served) or served is Any:
                missing.append(
                    f"{cls.__name__}.{accessor}() returns {getattr(served, '__name__', served)}:"
                    " return the concrete class"
                )
                continue
            wanted = [protocol] + [p for p in optional if issubclass(served, p)]
            missing += [
                f"{served.__name__} as {p.__name__}" for p in wanted if (served, p) not in bound
            ]
    for protocol in ON_THE_CLOUD:
        if issubclass(cls, protocol) and (cls, protocol) not in bound:
            missing.append(f"{cls.__name__} as {protocol.__name__}")
    return list(dict.fromkeys(missing))


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS), ids=sorted(ENTRY_POINTS))
def test_every_capability_is_bound_to_its_protocol(name: str) -> None:
    assert missing_bindings(_provider_class(ENTRY_POINTS[name])) == []


def test_the_optional_protocols_are_all_known() -> None:
    """A new Protocol in CALL_PROTOCOLS must be placed in ACCESSORS or ON_THE_CLOUD."""
    known = {Interface, *ON_THE_CLOUD}
    for protocol, optional in ACCESSORS.values():
        known |= {protocol, *optional}
    assert set(CALL_PROTOCOLS) <= known


class _Balancer:
    def ensure_load_balancer(self) -> None: ...


class _Cloud:
    """Returns its balancer's class but binds only itself (the bug this test guards)."""

    def load_balancer(self) -> _Balancer | None:
        return None

    def instances(self) -> None:
        return None

    instances_v2 = zones = clusters = routes = instances


class _ProtocolCloud(_Cloud):
    """Returns the Protocol: whatever it hands out, mypy compares nothing."""

    def load_balancer(self) -> LoadBalancer | None:
        return None


def _implements(cloud: _Cloud) -> tuple[Interface]:
    """Not checked by mypy (tests are not in its files): the incomplete binding under test."""
    return (cloud,)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("cls", "wanted"),
    [
        (_Cloud, ["_Balancer as LoadBalancer"]),
        (
            _ProtocolCloud,
            [
                "_ProtocolCloud as Interface",
                "_ProtocolCloud.load_balancer() returns LoadBalancer: return the concrete class",
            ],
        ),
    ],
    ids=["unbound-capability", "protocol-return"],
)
def test_a_missing_binding_is_named(cls: type, wanted: list[str]) -> None:
    assert missing_bindings(cls) == wanted
