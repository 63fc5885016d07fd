"""The one reader of a Service's boolean, integer and duration annotations, for every provider.

Values are read with Go's rules (:mod:`kccm.util.gostrconv`: ``strconv.ParseBool``,
``strconv.ParseInt(s, 10, 64)``, ``time.ParseDuration``), exactly as the upstream providers
read them: no trimming, case-sensitive bool spellings. An absent annotation and an empty
value both mean "not set" (a Go map lookup returns ``""`` for both) and give the default;
``empty_is_unset=False`` follows upstream code that tests only presence (``v, ok :=
annotations[key]``): there an empty value is parsed, and so is invalid.

A value that does not parse is handled in one of two ways, chosen per call with
``on_invalid`` (follow what the upstream provider does with that annotation):

* :attr:`OnInvalid.REFUSE`: raise :class:`~kccm.cloudprovider.errors.InvalidServiceConfig`
  (or the provider's subclass given as ``error``) naming the annotation, the value and what
  is accepted. The service controller records it as a ``Warning`` Event and never reports
  the balancer as ensured. kccm's own annotations always refuse.
* :attr:`OnInvalid.FALLBACK`: use the default, as the upstream provider does, and report a
  ``Warning`` Event (reason :data:`INVALID_ANNOTATION`) naming the annotation, the value and
  the default used, through :func:`~kccm.cloudprovider.servicewarnings.warn_service`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Required, TypedDict, TypeVar, Unpack

from kccm.cloudprovider.errors import InvalidServiceConfig
from kccm.cloudprovider.servicewarnings import warn_service
from kccm.util.gostrconv import (
    format_bool,
    format_duration,
    go_quote,
    parse_bool,
    parse_duration,
    parse_int,
)

__all__ = [
    "INVALID_ANNOTATION",
    "AnnotationError",
    "OnInvalid",
    "ReadOptions",
    "annotations_of",
    "bool_annotation",
    "choice_annotation",
    "duration_annotation",
    "int_annotation",
]

T = TypeVar("T")
D = TypeVar("D")
AnnotationError = Callable[[str, str], InvalidServiceConfig]
"""Builds the refusal from (annotation key, message): InvalidServiceConfig or a subclass."""

INVALID_ANNOTATION = "InvalidAnnotation"
"""The reason of the Warning Event a fallback reports."""

BOOL_ACCEPTED = "true or false (also 1, t, T, TRUE, True, 0, f, F, FALSE, False)"
INT_ACCEPTED = "a base-10 integer"
DURATION_ACCEPTED = "a duration such as 300ms, 1.5h or 2h45m"


class OnInvalid(Enum):
    """What a value that does not parse does (see the module docstring)."""

    REFUSE = "refuse"
    FALLBACK = "fallback"


def annotations_of(service: Mapping[str, Any]) -> Mapping[str, str]:
    """A Service's (or any object's) annotations; empty when it has none."""
    return (service.get("metadata") or {}).get("annotations") or {}


class ReadOptions(TypedDict, total=False):
    """The keyword arguments every reader takes."""

    on_invalid: Required[OnInvalid]
    """What a value that does not parse does."""
    empty_is_unset: bool
    """``""`` gives the default (True, the usual Go ``!= ""`` test) or is parsed (False)."""
    error: AnnotationError
    """Builds the refusal: InvalidServiceConfig (the default) or the provider's subclass."""


def bool_annotation(
    annotations: Mapping[str, str], key: str, default: D, **options: Unpack[ReadOptions]
) -> bool | D:
    """Annotation ``key`` read with ``strconv.ParseBool``; ``default`` when not set."""
    return _read(annotations, key, default, parse_bool, BOOL_ACCEPTED, options)


def int_annotation(
    annotations: Mapping[str, str],
    key: str,
    default: D,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    **options: Unpack[ReadOptions],
) -> int | D:
    """Annotation ``key`` read with ``strconv.ParseInt(v, 10, 64)``; ``default`` when not set.
    ``minimum``/``maximum`` (inclusive) make values outside them invalid too."""

    def parse(text: str) -> int:
        value = parse_int(text)
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise ValueError(f"{value} is out of range")
        return value

    accepted = INT_ACCEPTED + _range_text(minimum, maximum)
    return _read(annotations, key, default, parse, accepted, options)


def duration_annotation(
    annotations: Mapping[str, str], key: str, default: D, **options: Unpack[ReadOptions]
) -> float | D:
    """Annotation ``key`` read with ``time.ParseDuration``, in seconds; ``default`` when not
    set."""
    return _read(annotations, key, default, parse_duration, DURATION_ACCEPTED, options)


def choice_annotation(
    annotations: Mapping[str, str],
    key: str,
    default: D,
    choices: Mapping[str, T],
    **options: Unpack[ReadOptions],
) -> T | D:
    """Annotation ``key`` read as exactly one of ``choices``' spellings (case-sensitive, no
    trimming), giving that spelling's value; ``default`` when not set. For upstream code that
    compares the text itself, such as OCCM's ``getBoolFromServiceAnnotation`` (only ``true``
    and ``false``) or its proxy-protocol ``switch``."""

    def parse(text: str) -> T:
        if text not in choices:
            raise ValueError(text)
        return choices[text]

    accepted = "one of " + ", ".join(choices)
    return _read(annotations, key, default, parse, accepted, options)


def _range_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum} to {maximum}"
    if minimum is not None:
        return f" of at least {minimum}"
    if maximum is not None:
        return f" of at most {maximum}"
    return ""


def _show(value: object) -> str:
    """A default as Go prints it (``false``, ``10``, ``5m0s``); ``unset`` for None."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return format_bool(value)
    if isinstance(value, float):
        return format_duration(value)
    return str(value)


def _read(
    annotations: Mapping[str, str],
    key: str,
    default: D,
    parse: Callable[[str], T],
    accepted: str,
    options: ReadOptions,
) -> T | D:
    if key not in annotations or (options.get("empty_is_unset", True) and not annotations[key]):
        return default
    text = str(annotations[key])
    try:
        return parse(text)
    except ValueError:
        problem = f"annotation {key}: invalid value {go_quote(text)}: want {accepted}"
    if options["on_invalid"] is OnInvalid.REFUSE:
        raise options.get("error", InvalidServiceConfig)(key, problem)
    warn_service(INVALID_ANNOTATION, f"{problem}; using the default {_show(default)}")
    return default
