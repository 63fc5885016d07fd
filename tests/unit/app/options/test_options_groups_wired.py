"""Every flag group is wired: each class in ``kccm.app.options.*`` that registers flags (has
``add_flags``) is the type of a :class:`KccmOptions` field, so ``KccmOptions.groups()`` (and
with it the flag set, validation and ``apply_to``) reaches it.

The groups are found by walking the package, not listed here: a new group module whose class
is never added to ``KccmOptions`` fails this test without the test being edited.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

import kccm.app.options
from kccm.app.options import KccmOptions


def flag_group_classes() -> dict[str, type]:
    """``module.Class`` -> class, for every class defined in a module of the package that
    has an ``add_flags`` method (the :class:`FlagGroup` Protocol itself left out)."""
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(kccm.app.options.__path__, "kccm.app.options."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or getattr(cls, "_is_protocol", False):
                continue
            if callable(getattr(cls, "add_flags", None)):
                found[f"{module.__name__}.{name}"] = cls
    return found


def test_the_walk_finds_the_known_groups() -> None:
    """Not vacuous: the walk sees groups of several shapes (own defaults, wired in
    ``__post_init__``, sharing another group's object)."""
    names = {cls.__name__ for cls in flag_group_classes().values()}
    assert {
        "GenericOptions",
        "ServiceControllerFlags",
        "WebhookOptions",
        "LogsOptions",
        "GlobalOptions",
    } <= names


def test_every_flag_group_is_a_field_of_kccm_options() -> None:
    field_types = set(typing.get_type_hints(KccmOptions).values())
    unwired = sorted(name for name, cls in flag_group_classes().items() if cls not in field_types)
    assert not unwired, (
        f"flag groups no KccmOptions field holds: {unwired}; their flags are never registered, "
        "validated or applied: add a field for each to KccmOptions (app/options/kccm.py)"
    )
