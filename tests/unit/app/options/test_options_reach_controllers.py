"""Every flag bound to a controller's options reaches the controller: a non-default value on
the command line is in ``ManagerConfig.controller_options`` and in the object that controller's
builder (its row in ``controllers/table.py``) receives.

The flags are found by walking the flag set: a flag whose target is a controller's options
dataclass (the type of a ``ControllerOptions`` field) binds to that controller. A flag group
built with its own default object instead of ``KccmOptions.controller_options``' one (not wired
in ``KccmOptions.__post_init__``) parses, but its value never reaches the controller: this test
fails for it without being edited.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest
from options_support import BASE

from kccm.app.flags import (
    Flag,
    format_duration,
    parse_bool,
    parse_duration,
    parse_float,
    parse_int,
    parse_int_list,
    parse_map_bool,
    parse_map_float,
    parse_string_slice,
)
from kccm.app.options import KccmOptions
from kccm.controllers.table import CONTROLLERS, ControllerOptions

FIELD_OF_TYPE: dict[type, str] = {
    type(getattr(ControllerOptions(), f.name)): f.name
    for f in dataclasses.fields(ControllerOptions)
}
"""A controller's options dataclass -> its field in ``ControllerOptions``."""

SAMPLES: dict[str, str] = {"cluster-cidr": "10.1.0.0/16"}
"""Non-default values for the flags whose value has a syntax of its own."""
COMPANIONS: dict[str, list[str]] = {"load-balancer-class-only": ["--load-balancer-class=a.io/b"]}
"""Flags a flag is only valid with."""


def _flags() -> dict[str, Flag]:
    return KccmOptions().flag_set().flags


def _bound_to_a_controller(flag: Flag) -> bool:
    kind = type(flag.target)
    return kind in FIELD_OF_TYPE or kind.__module__.startswith("kccm.controllers.")


CONTROLLER_FLAGS = sorted(name for name, flag in _flags().items() if _bound_to_a_controller(flag))


def sample(flag: Flag) -> str:
    """A valid command-line value different from the flag's default."""
    if flag.name in SAMPLES:
        return SAMPLES[flag.name]
    default: Any = flag.default
    by_parser: dict[object, str] = {
        parse_bool: "false" if default else "true",
        parse_int: str(default + 1) if isinstance(default, int) else "",
        parse_float: f"{default + 0.5:g}" if isinstance(default, float) else "",
        parse_duration: format_duration(default + 1.5) if isinstance(default, float) else "",
        str: f"{default}x",
        parse_string_slice: "kccm-a,kccm-b",
        parse_int_list: "7,8",
        parse_map_bool: "KccmSample=true",
        parse_map_float: "kccm_sample=1.5",
    }
    text = by_parser.get(flag.parse, "")
    if not text:
        pytest.fail(f"--{flag.name}: no sample value for its type; add one to SAMPLES")
    return text


def test_the_walk_finds_the_controller_flags() -> None:
    """The generic walk is not vacuous: it sees the known controller flags."""
    assert {
        "concurrent-node-syncs",
        "concurrent-service-syncs",
        "node-monitor-period",
        "configure-cloud-routes",
        "node-status-update-frequency",
    } <= set(CONTROLLER_FLAGS)


@pytest.mark.parametrize("name", CONTROLLER_FLAGS)
def test_a_flag_bound_to_controller_options_binds_to_a_controller_options_field(name: str) -> None:
    flag = _flags()[name]
    assert type(flag.target) in FIELD_OF_TYPE, (
        f"--{name} binds to a {type(flag.target).__name__}, which is no field of "
        "ControllerOptions (controllers/table.py): add it there"
    )


def _builders_receive(options: ControllerOptions) -> dict[str, list[object]]:
    """For each row of the table, the options objects its builder hands to a controller
    module's ``build`` (every ``build`` the row's builder names is replaced by a recorder)."""
    received: dict[str, list[object]] = {}
    for spec in CONTROLLERS:
        builder: Any = spec.build
        modules = [
            value
            for name in builder.__code__.co_names
            if isinstance(value := builder.__globals__.get(name), types.ModuleType)
            and hasattr(value, "build")
        ]
        seen = received.setdefault(spec.name, [])
        with pytest.MonkeyPatch.context() as patch:
            for module in modules:
                patch.setattr(module, "build", lambda context, opts, seen=seen: seen.append(opts))
            spec.build(None, options)  # type: ignore[arg-type]  # the recorders ignore it
    return received


@pytest.mark.parametrize("name", CONTROLLER_FLAGS)
def test_a_controller_flag_reaches_the_controller(name: str) -> None:
    options = KccmOptions()
    fs = options.flag_set()
    flag = fs.flags[name]
    text = sample(flag)
    want = flag.parse(text)
    assert want != flag.default, f"the sample {text!r} for --{name} is its default"
    assert fs.parse([*BASE, *COMPANIONS.get(name, []), f"--{name}={text}"]) == []
    config = options.config()

    field = FIELD_OF_TYPE[type(flag.target)]
    got = getattr(getattr(config.controller_options, field), flag.attr)
    assert got == want, (
        f"--{name}={text} parsed, but ManagerConfig.controller_options.{field}.{flag.attr} is "
        f"{got!r}: its flag group binds to an object of its own; wire it to "
        f"self.controller_options.{field} in KccmOptions.__post_init__ (app/options/kccm.py)"
    )

    received = _builders_receive(config.controller_options)
    reached = [
        row
        for row, objects in received.items()
        for obj in objects
        if type(obj) is type(flag.target) and getattr(obj, flag.attr) == want
    ]
    assert reached, (
        f"--{name}={text}: no row of CONTROLLERS hands ControllerOptions.{field} to its "
        f"controller's build() (received: {received})"
    )
