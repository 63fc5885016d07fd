"""One declaration per provider method: its budget group and whether it only reads.

A provider method is declared once, on its Protocol in :mod:`kccm.cloudprovider.interface`::

    @provider_call("routes", read=True)
    def list_routes(self, cluster_name: str) -> MaybeAwaitable[Sequence[Route]]: ...

The call gate's tables (:data:`kccm.cloudprovider.gate.METHOD_GROUPS`, ``READ_METHODS``) are
derived from these markers by :func:`declared_calls`; the gated twins in
:mod:`kccm.cloudprovider.gated` name the Protocol they wrap, and a unit test
(``tests/unit/cloudprovider/test_provider_calls.py``) checks that each twin has exactly the
Protocol's methods with the same parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

__all__ = ["CallKind", "MaybeAwaitable", "declared_calls", "provider_call"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]
"""A provider method's result: the value itself (plain ``def``) or an awaitable of it."""

_MARK = "__kccm_call__"


@dataclass(frozen=True)
class CallKind:
    """How the call gate treats one provider method."""

    group: str
    """The budget (method group) it draws from: ``load_balancer``, ``instances``, ..."""
    read: bool
    """No side effects: identical concurrent calls may share one provider call."""


def provider_call(group: str, *, read: bool) -> Callable[[F], F]:
    """Mark a Protocol method as a provider call drawing from budget ``group``."""

    def mark(fn: F) -> F:
        setattr(fn, _MARK, CallKind(group, read))
        return fn

    return mark


def call_kind(fn: object) -> CallKind | None:
    """The declaration on ``fn``, or ``None`` when it is not a marked provider call."""
    kind = getattr(fn, _MARK, None)
    return kind if isinstance(kind, CallKind) else None


def declared_calls(protocols: Iterable[type]) -> Mapping[str, CallKind]:
    """Every marked method of ``protocols`` by name; one name must mean one declaration."""
    calls: dict[str, CallKind] = {}
    for protocol in protocols:
        for name, member in vars(protocol).items():
            kind = call_kind(member)
            if kind is None:
                continue
            if calls.setdefault(name, kind) != kind:
                raise TypeError(f"provider method {name!r} is declared twice, differently")
            calls[name] = kind
    return calls
