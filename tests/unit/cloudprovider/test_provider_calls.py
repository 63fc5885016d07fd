"""Each provider method is declared once (``@provider_call`` on its Protocol); the call gate's
tables derive from it and every gated twin matches its Protocol method for method."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from kccm.cloudprovider import gated as gated_module
from kccm.cloudprovider import gated_sharing, interface, sharing
from kccm.cloudprovider.calls import CallKind, call_kind, declared_calls, provider_call
from kccm.cloudprovider.gate import METHOD_GROUPS, READ_METHODS
from kccm.cloudprovider.interface import CALL_PROTOCOLS

TWINS = sorted(
    {
        cls
        for module in (gated_module, gated_sharing)
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, gated_module._Gated) and cls.protocols
    },
    key=lambda cls: cls.__name__,
)


def protocol_calls(protocols: tuple[type, ...]) -> dict[str, Callable[..., Any]]:
    return {
        name: fn
        for protocol in protocols
        for name, fn in vars(protocol).items()
        if call_kind(fn) is not None
    }


def twin_calls(twin: type) -> dict[str, Callable[..., Any]]:
    return {
        name: fn
        for name, fn in vars(twin).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(fn)
    }


# -- every provider-facing method is a declared call, or a documented exception ------------------

NOT_CALLS: dict[str, str] = {
    "Interface.load_balancer": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.instances": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.instances_v2": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.zones": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.clusters": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.routes": "capability lookup: GatedCloud asks once and wraps the answer",
    "Interface.provider_name": "a constant of the provider (the providerID scheme), no cloud call",
    "Interface.has_cluster_id": "a check of the provider's own configuration, no cloud call",
    "BalancerSharer.sharing_settings": "read from the Service alone, no cloud call",
}
"""Public methods of :data:`CALL_PROTOCOLS` that are not provider calls, and why. The gated
twin passes each one straight through (same name, no gate)."""

NOT_CALL_PROTOCOLS: dict[str, str] = {
    "ControllerClientBuilder": "implemented by the framework and handed to the provider",
    "InformerUser": "a one-time hand-off of the informer factory, before any controller runs",
    "EndpointsUser": "a hand-off of the endpoints reader before the service workers run, and a "
    "question answered from the Service alone (no cloud call)",
}
"""Protocols of ``interface.py`` outside :data:`CALL_PROTOCOLS`, and why."""


def interface_protocols() -> list[type]:
    """The Protocols of the provider contract: interface.py's and the capability modules'."""
    return [
        cls
        for module in (interface, sharing)
        for cls in vars(module).values()
        if isinstance(cls, type)
        and cls.__module__ == module.__name__
        and getattr(cls, "_is_protocol", False)
    ]


def public_methods(protocol: type) -> dict[str, object]:
    return {
        f"{protocol.__name__}.{name}": member
        for name, member in vars(protocol).items()
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    }


PROTOCOL_METHODS = {
    qualified: member
    for protocol in CALL_PROTOCOLS
    for qualified, member in public_methods(protocol).items()
}


def test_every_protocol_of_the_interface_is_a_call_protocol_or_a_documented_exception() -> None:
    names = sorted(cls.__name__ for cls in interface_protocols())
    expected = sorted([*(p.__name__ for p in CALL_PROTOCOLS), *NOT_CALL_PROTOCOLS])
    assert names == expected, (
        "a Protocol in kccm/cloudprovider/interface.py is neither in CALL_PROTOCOLS nor in "
        "NOT_CALL_PROTOCOLS (or a listed one is gone)"
    )


@pytest.mark.parametrize("qualified", sorted(PROTOCOL_METHODS))
def test_every_protocol_method_is_declared_with_provider_call(qualified: str) -> None:
    declared = call_kind(PROTOCOL_METHODS[qualified]) is not None
    if qualified in NOT_CALLS:
        assert not declared, f"{qualified} is declared with @provider_call: drop it from NOT_CALLS"
    else:
        assert declared, (
            f"{qualified} has no @provider_call: declare its budget group and whether it only "
            'reads (DEVELOPMENT.md, "Adding a provider method"), or, if it is no provider '
            "call, list it with its reason in NOT_CALLS"
        )


@pytest.mark.parametrize("qualified", sorted(NOT_CALLS))
def test_every_exception_is_a_protocol_method_passed_through_by_its_twin(qualified: str) -> None:
    assert qualified in PROTOCOL_METHODS, f"NOT_CALLS names {qualified}, which no Protocol has"
    protocol_name, name = qualified.split(".")
    (twin,) = [t for t in TWINS if protocol_name in (p.__name__ for p in t.protocols)]
    passthrough = vars(twin).get(name)
    assert inspect.isfunction(passthrough), f"{twin.__name__} has no {name}()"
    assert not inspect.iscoroutinefunction(passthrough), f"{twin.__name__}.{name} is gated"


def test_every_call_protocol_has_exactly_one_gated_twin() -> None:
    wrapped = [p for twin in TWINS for p in twin.protocols]
    assert sorted(p.__name__ for p in wrapped) == sorted(p.__name__ for p in CALL_PROTOCOLS)


def test_gate_tables_are_the_declarations() -> None:
    calls = declared_calls(CALL_PROTOCOLS)
    assert dict(METHOD_GROUPS) == {name: kind.group for name, kind in calls.items()}
    assert {name for name, kind in calls.items() if kind.read} == READ_METHODS


@pytest.mark.parametrize("twin", TWINS, ids=lambda twin: twin.__name__)
def test_twin_has_the_protocol_methods_and_parameters(twin: type) -> None:
    declared = protocol_calls(twin.protocols)
    wrapped = twin_calls(twin)
    assert sorted(wrapped) == sorted(declared)
    for name, fn in declared.items():
        want = inspect.signature(fn)
        got = inspect.signature(wrapped[name])
        assert [p for p in got.parameters if p != "priority"] == list(want.parameters), name
        assert f"MaybeAwaitable[{got.return_annotation}]" == want.return_annotation, name


class _Recorder:
    """A call gate that only records which method name and callable each call used."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    async def call(self, method: str, fn: object, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((method, fn))
        return None


class _Impl:
    """Every attribute is a distinct callable named after itself."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        def fn(*args: Any) -> None:
            return None

        fn.__name__ = name
        self.__dict__[name] = fn
        return fn


@pytest.mark.parametrize("twin", TWINS, ids=lambda twin: twin.__name__)
def test_twin_passes_its_own_name_and_the_impl_method_to_the_gate(twin: type) -> None:
    gate, impl = _Recorder(), _Impl()
    wrapper = object.__new__(twin)
    wrapper._gate = gate
    wrapper.impl = wrapper.cloud = impl
    for name, fn in twin_calls(twin).items():
        params = [p for p in inspect.signature(fn).parameters if p not in ("self", "priority")]
        asyncio.run(getattr(wrapper, name)(*[()] * len(params)))
        method, called = gate.calls[-1]
        assert (method, getattr(called, "__name__", None)) == (name, name)


def test_one_name_declared_two_ways_is_refused() -> None:
    class A:
        @provider_call("routes", read=True)
        def m(self) -> None: ...

    class B:
        @provider_call("instances", read=True)
        def m(self) -> None: ...

    assert declared_calls([A, A]) == {"m": CallKind("routes", read=True)}
    with pytest.raises(TypeError, match="'m' is declared twice"):
        declared_calls([A, B])
