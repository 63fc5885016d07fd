"""The pflag-compatible layer: Go value syntax and every argument form."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from kccm.app.flags import (
    FlagSet,
    format_duration,
    parse_bool,
    parse_duration,
    parse_float,
    parse_int,
    parse_map_bool,
    parse_map_float,
    parse_string_slice,
    render_help,
    render_markdown,
)

# -- Go values -----------------------------------------------------------------------------------

DURATIONS = [
    ("5m0s", 300.0),
    ("1h30m", 5400.0),
    ("300ms", 0.3),
    ("1.5s", 1.5),
    ("0", 0.0),
    ("+0", 0.0),
    ("-5s", -5.0),
    (".5s", 0.5),
    ("5.s", 5.0),
    ("1h2m3.5s", 3723.5),
    ("10us", 1e-5),
    ("10µs", 1e-5),
    ("7ns", 7e-9),
    ("12h0m0s", 43200.0),
]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS, ids=[t for t, _ in DURATIONS])
def test_parse_duration_accepts_go_syntax(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


BAD_DURATIONS = [
    ("5", 'time: missing unit in duration "5"'),
    ("1.5", 'time: missing unit in duration "1.5"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("", 'time: invalid duration ""'),
    ("-", 'time: invalid duration "-"'),
    (".s", 'time: invalid duration ".s"'),
    ("s", 'time: invalid duration "s"'),
    ("5 s", 'time: unknown unit " s" in duration "5 s"'),
    ("9999999999h", 'time: invalid duration "9999999999h"'),
]


@pytest.mark.parametrize(("text", "message"), BAD_DURATIONS, ids=[m for _, m in BAD_DURATIONS])
def test_parse_duration_rejects_like_go(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        parse_duration(text)


FORMATS = [
    (0.0, "0s"),
    (300.0, "5m0s"),
    (10.0, "10s"),
    (2.0, "2s"),
    (1.5, "1.5s"),
    (0.3, "300ms"),
    (43200.0, "12h0m0s"),
    (5400.0, "1h30m0s"),
    (1e-4, "100µs"),
    (-5.0, "-5s"),
]


@pytest.mark.parametrize(("seconds", "text"), FORMATS, ids=[t for _, t in FORMATS])
def test_format_duration_matches_go_string(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("1", True), ("T", True), ("TRUE", True), ("false", False), ("0", False)],
)
def test_parse_bool_like_strconv(text: str, value: bool) -> None:
    assert parse_bool(text) is value


@pytest.mark.parametrize(
    ("text", "value"),
    [("10", 10), ("-3", -3), ("+7", 7), ("0x10", 16), ("010", 8), ("0b11", 3), ("1_000", 1000)],
)
def test_parse_int_like_strconv_base_0(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize("text", ["abc", "1.5", "", " 1", "1_", "9223372036854775808"])
def test_parse_int_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"strconv\.ParseInt"):
        parse_int(text)


@pytest.mark.parametrize("text", ["x", "", " 1", "1,5", "1_0"])
def test_parse_float_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"strconv\.ParseFloat"):
        parse_float(text)


def test_lists_and_maps() -> None:
    assert parse_string_slice("") == []
    assert parse_string_slice("*, -route") == ["*", "-route"]
    assert parse_map_bool("A=true, B=false") == {"A": True, "B": False}
    assert parse_map_float("load_balancer=5,instances=0.5") == {
        "load_balancer": 5.0,
        "instances": 0.5,
    }
    with pytest.raises(ValueError, match="must be formatted as key=value"):
        parse_map_bool("A")
    with pytest.raises(ValueError, match="invalid value of A=maybe"):
        parse_map_bool("A=maybe")


# -- argument forms ------------------------------------------------------------------------------


@dataclass
class Target:
    name: str = ""
    flag: bool = True
    other: bool = False
    level: int = 0
    period: float = 5.0
    items: list[str] = field(default_factory=lambda: ["*"])
    gates: dict[str, bool] = field(default_factory=dict)


def _flagset() -> tuple[Target, FlagSet]:
    target, fs = Target(), FlagSet("test")
    s = fs.section("generic")
    s.string(target, "name", "name", "a string")
    s.boolean(target, "flag", "flag", "a bool, default true")
    s.boolean(target, "other", "other", "a bool, default false")
    s.duration(target, "period", "period", "a duration")
    s.strings(target, "items", "items", "a list")
    s.map_bool(target, "gates", "gates", "a map")
    logs = fs.section("logs")
    logs.integer(target, "level", "v", "verbosity", type_name="Level")
    fs.set_shorthand("v", "v")
    return target, fs


FORMS: list[tuple[str, list[str], dict[str, Any]]] = [
    ("equals", ["--name=x"], {"name": "x"}),
    ("space", ["--name", "x"], {"name": "x"}),
    ("value-with-equals", ["--name=a=b"], {"name": "a=b"}),
    ("empty-value", ["--name="], {"name": ""}),
    ("bool-bare", ["--other"], {"other": True}),
    ("bool-false", ["--flag=false"], {"flag": False}),
    ("bool-true", ["--other=true"], {"other": True}),
    ("bool-never-consumes-next", ["--other", "false"], {"other": True, "positional": ["false"]}),
    ("short-equals", ["-v=2"], {"level": 2}),
    ("short-space", ["-v", "2"], {"level": 2}),
    ("short-attached", ["-v3"], {"level": 3}),
    ("long-v", ["--v=4"], {"level": 4}),
    ("duration", ["--period=1m30s"], {"period": 90.0}),
    ("list-replaces-default", ["--items=a,b"], {"items": ["a", "b"]}),
    ("list-repeated-appends", ["--items=a", "--items", "b,c"], {"items": ["a", "b", "c"]}),
    ("list-empty", ["--items="], {"items": []}),
    ("map-merges", ["--gates=A=true", "--gates=B=false"], {"gates": {"A": True, "B": False}}),
    ("last-wins", ["--name=a", "--name=b"], {"name": "b"}),
    ("double-dash-ends-flags", ["--", "--name=x"], {"name": "", "positional": ["--name=x"]}),
    ("interspersed", ["a", "--name=x", "b"], {"name": "x", "positional": ["a", "b"]}),
    ("single-dash-is-positional", ["-"], {"positional": ["-"]}),
]


@pytest.mark.parametrize(("args", "expected"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_argument_forms(args: list[str], expected: dict[str, Any]) -> None:
    target, fs = _flagset()
    assert fs.parse(args) == []
    expected = dict(expected)
    assert fs.args == expected.pop("positional", [])
    for attr, value in expected.items():
        assert getattr(target, attr) == value


ERRORS = [
    ("unknown-long", ["--foo"], "unknown flag: --foo"),
    ("unknown-long-value", ["--foo=1"], "unknown flag: --foo"),
    ("unknown-short", ["-x"], "unknown shorthand flag: 'x' in -x"),
    ("single-dash-long-name", ["-name=x"], "unknown shorthand flag: 'n' in -name=x"),
    ("missing-value", ["--name"], "flag needs an argument: --name"),
    ("missing-short-value", ["-v"], "flag needs an argument: 'v' in -v"),
    ("triple-dash", ["---name"], "bad flag syntax: ---name"),
    (
        "bad-bool",
        ["--flag=maybe"],
        'invalid argument "maybe" for "--flag" flag: strconv.ParseBool: parsing "maybe": '
        "invalid syntax",
    ),
    (
        "bad-int",
        ["-v=abc"],
        'invalid argument "abc" for "-v, --v" flag: strconv.ParseInt: parsing "abc": '
        "invalid syntax",
    ),
    (
        "bare-number-duration",
        ["--period=5"],
        'invalid argument "5" for "--period" flag: time: missing unit in duration "5"',
    ),
]


@pytest.mark.parametrize(("args", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_argument_errors(args: list[str], message: str) -> None:
    _, fs = _flagset()
    assert fs.parse(args) == [message]


def test_every_error_is_collected() -> None:
    target, fs = _flagset()
    errors = fs.parse(["--foo", "--period=5", "--name=ok", "-v=x"])
    assert len(errors) == 3
    assert target.name == "ok"


def test_underscore_names_are_normalised() -> None:
    target = Target()
    fs = FlagSet("t")
    fs.section("g").string(target, "name", "cloud-provider", "x")
    assert fs.parse(["--cloud_provider=fake"]) == []
    assert target.name == "fake"
    assert fs.changed("cloud-provider")


def test_help_and_markdown_show_defaults_like_pflag() -> None:
    _, fs = _flagset()
    text = render_help(fs, "Usage:\n  test [flags]\n")
    assert "Generic flags:" in text
    assert "Logs flags:" in text
    assert "--name string" in text
    assert "a bool, default true (default true)" in text
    assert "(default 5s)" in text
    assert "(default [*])" in text
    assert "  -v, --v Level" in text
    markdown = render_markdown(fs, "# t")
    assert "| `--period` | duration | `5s` | a duration |" in markdown
    assert "| `--other` | bool | `false` | a bool, default false |" in markdown


# -- binding: the parser's type is the field's ---------------------------------------------------


@dataclass
class Typed:
    count: int = 0
    ratio: float = 0.5
    period: float = 5.0
    label: str = ""
    names: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    undeclared = 3  # a class attribute, no field


WRONG_BINDINGS = [
    pytest.param("duration", "count", "duration parser gives float", "declared int",
                 id="duration-to-int"),
    pytest.param("integer", "ratio", "int32 parser gives int", "declared float",
                 id="int-to-float"),
    pytest.param("integer", "label", "int32 parser gives int", "declared str", id="int-to-str"),
    pytest.param("string", "count", "string parser gives str", "declared int", id="str-to-int"),
    pytest.param("boolean", "count", "bool parser gives bool", "declared int", id="bool-to-int"),
    pytest.param("strings", "ports", "strings parser gives list[str]", "declared list[int]",
                 id="strings-to-int-list"),
    pytest.param("int_list", "names", "int32Slice parser gives list[int]",
                 "declared list[str]", id="int-list-to-strings"),
    pytest.param("number", "undeclared", "float32 parser gives float", "not a declared field",
                 id="not-a-field"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "attr", "parser", "declared"), WRONG_BINDINGS)
def test_a_flag_bound_to_a_field_of_another_type_fails_at_bind_time(
    method: str, attr: str, parser: str, declared: str
) -> None:
    section = FlagSet("test").section("generic")
    with pytest.raises(TypeError) as raised:
        getattr(section, method)(Typed(), attr, "the-flag", "usage")
    message = str(raised.value)
    assert message.startswith(f"--the-flag: its {parser}, but Typed.{attr} is {declared}")


RIGHT_BINDINGS = [
    pytest.param("integer", "count", id="int"),
    pytest.param("number", "ratio", id="float"),
    pytest.param("duration", "period", id="duration"),
    pytest.param("string", "label", id="str"),
    pytest.param("strings", "names", id="strings"),
    pytest.param("int_list", "ports", id="int-list"),
]


@pytest.mark.parametrize(("method", "attr"), RIGHT_BINDINGS)
def test_a_flag_binds_to_a_field_of_its_type(method: str, attr: str) -> None:
    fs = FlagSet("test")
    getattr(fs.section("generic"), method)(Typed(), attr, "the-flag", "usage")
    assert fs.flags["the-flag"].attr == attr
