"""A small pflag-compatible command-line layer.

Upstream's binary parses its flags with spf13/pflag (through cobra and component-base's
named flag sets). Users pass those flags in Go syntax, which argparse and click do not accept
as they are, so this module reproduces the parts of pflag that matter:

* ``--name=value`` and ``--name value``; a bool flag never consumes the next argument
  (``--leader-elect``, ``--leader-elect=false``);
* shorthands: ``-v=2``, ``-v 2``, ``-v2``, ``-h``; ``--`` ends the flags;
* ``_`` in a flag name is read as ``-`` (component-base ``WordSepNormalizeFunc``);
* values parsed as Go parses them: ``strconv.ParseBool``/``ParseInt``/``ParseFloat`` and
  ``time.ParseDuration``, with Go's error texts (:mod:`kccm.util.gostrconv`);
* list flags (pflag ``StringSlice``): comma-separated; the first use replaces the default and
  repeated uses append; map flags (``k=v,k2=v2``) merge.

Unlike pflag, parsing does not stop at the first error: every problem is collected, so the
caller can report them all at once.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kccm.util import gostrconv
from kccm.util.gostrconv import format_duration, go_quote, parse_bool, parse_duration

__all__ = [
    "Flag",
    "FlagSet",
    "Section",
    "format_duration",
    "go_quote",
    "parse_bool",
    "parse_duration",
    "parse_float",
    "parse_int",
    "parse_int_list",
    "parse_map_bool",
    "parse_map_float",
    "parse_string_slice",
    "render_help",
    "render_markdown",
]

Parser = Callable[[str], Any]


def parse_int(text: str) -> int:
    """``strconv.ParseInt(text, 0, 64)``, which pflag's int flags use."""
    return gostrconv.parse_int(text, 0)


_FLOAT = re.compile(
    r"[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[iI][nN][fF]([iI][nN][iI][tT][yY])?"
    r"|[nN][aA][nN])"
)


def parse_float(text: str) -> float:
    """``strconv.ParseFloat`` for decimal syntax (pflag's float32/float64 flags)."""
    if not _FLOAT.fullmatch(text):
        raise ValueError(f"strconv.ParseFloat: parsing {go_quote(text)}: invalid syntax")
    return float(text)


def parse_string_slice(text: str) -> list[str]:
    """pflag ``StringSlice``: comma-separated, entries trimmed; ``""`` is the empty list."""
    if text == "":
        return []
    return [part.strip() for part in text.split(",")]


def parse_int_list(text: str) -> list[int]:
    """pflag ``Int32Slice``: comma-separated Go integers; ``""`` is the empty list."""
    return [parse_int(part.strip()) for part in parse_string_slice(text)]


def _pairs(text: str) -> Iterator[tuple[str, str]]:
    for part in text.split(","):
        item = part.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item} must be formatted as key=value")
        yield key.strip(), value.strip()


def parse_map_bool(text: str) -> dict[str, bool]:
    """``k=true,k2=false`` (``--feature-gates`` syntax)."""
    out: dict[str, bool] = {}
    for key, value in _pairs(text):
        try:
            out[key] = parse_bool(value)
        except ValueError as err:
            raise ValueError(f"invalid value of {key}={value}, err: {err}") from None
    return out


def parse_map_float(text: str) -> dict[str, float]:
    """``k=5,k2=0.5``: a map of names to numbers."""
    return {key: parse_float(value) for key, value in _pairs(text)}


# -- flags ---------------------------------------------------------------------------------------


@dataclass
class Flag:
    """One flag, bound to ``target.attr``."""

    name: str
    type_name: str
    parse: Parser
    target: object
    attr: str
    usage: str
    section: str
    shorthand: str = ""
    is_bool: bool = False
    merge: str = ""  # "" replace, "append" (slices), "update" (maps)
    show_default: Callable[[Any], str] = str
    changed: bool = False
    default: Any = None

    def set(self, text: str) -> None:
        value = self.parse(text)
        if self.merge and self.changed:
            current = getattr(self.target, self.attr)
            value = current + value if self.merge == "append" else {**current, **value}
        setattr(self.target, self.attr, value)
        self.changed = True

    @property
    def value(self) -> Any:
        return getattr(self.target, self.attr)

    def default_text(self) -> str:
        """The default as pflag prints it; ``""`` when pflag would print none."""
        if self.default in (False, 0, 0.0, "", [], {}, None):
            return ""
        if isinstance(self.default, str):
            return go_quote(self.default)
        return self.show_default(self.default)

    def display_name(self) -> str:
        if self.shorthand:
            return f"-{self.shorthand}, --{self.name}"
        return f"--{self.name}"


def _show_slice(value: list[str]) -> str:
    return "[" + ",".join(value) + "]"


def _show_map(value: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(value.items()))


class Section:
    """Registers flags into one named section of a :class:`FlagSet`."""

    def __init__(self, flagset: FlagSet, name: str) -> None:
        self._fs = flagset
        self.name = name

    def _add(self, flag: Flag, parses_to: object) -> Flag:
        _check_field_type(flag, parses_to)
        flag.default = _copy(getattr(flag.target, flag.attr))
        self._fs.add(flag)
        return flag

    def boolean(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "", parse_bool, target, attr, usage, self.name, is_bool=True)
        flag.show_default = lambda v: "true" if v else "false"
        return self._add(flag, bool)

    def string(self, target: object, attr: str, name: str, usage: str) -> Flag:
        return self._add(Flag(name, "string", str, target, attr, usage, self.name), str)

    def integer(
        self, target: object, attr: str, name: str, usage: str, *, type_name: str = "int32"
    ) -> Flag:
        return self._add(Flag(name, type_name, parse_int, target, attr, usage, self.name), int)

    def number(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "float32", parse_float, target, attr, usage, self.name)
        flag.show_default = _show_number
        return self._add(flag, float)

    def duration(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "duration", parse_duration, target, attr, usage, self.name)
        flag.show_default = format_duration
        return self._add(flag, float)

    def strings(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "strings", parse_string_slice, target, attr, usage, self.name)
        flag.merge, flag.show_default = "append", _show_slice
        return self._add(flag, list[str])

    def int_list(self, target: object, attr: str, name: str, usage: str) -> Flag:
        """pflag ``Int32Slice``: comma-separated integers; a repeated flag appends."""
        flag = Flag(name, "int32Slice", parse_int_list, target, attr, usage, self.name)
        flag.merge, flag.show_default = "append", _show_slice_any
        return self._add(flag, list[int])

    def repeated(self, target: object, attr: str, name: str, usage: str, *, type_name: str) -> Flag:
        """A flag whose every use adds one entry, commas included (``NamedCertKeyArray``)."""
        flag = Flag(name, type_name, lambda text: [text], target, attr, usage, self.name)
        flag.merge, flag.show_default = "append", _show_slice
        return self._add(flag, list[str])

    def map_bool(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "mapStringBool", parse_map_bool, target, attr, usage, self.name)
        flag.merge, flag.show_default = "update", _show_map
        return self._add(flag, dict[str, bool])

    def map_float(self, target: object, attr: str, name: str, usage: str) -> Flag:
        flag = Flag(name, "mapStringFloat", parse_map_float, target, attr, usage, self.name)
        flag.merge, flag.show_default = "update", _show_map
        return self._add(flag, dict[str, float])


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _check_field_type(flag: Flag, parses_to: object) -> None:
    """A flag binds only to a field declared with the type its parser gives (checked when the
    flag is bound, so a wrong ``Section`` method fails every command line, not one value)."""
    owner = type(flag.target)
    if owner not in _FIELD_TYPES:
        _FIELD_TYPES[owner] = typing.get_type_hints(owner)
    declared = _FIELD_TYPES[owner].get(flag.attr)
    if declared == parses_to:
        return
    where = f"{owner.__name__}.{flag.attr}"
    parser = f"--{flag.name}: its {flag.type_name or 'bool'} parser gives {_type_text(parses_to)}"
    if declared is None:
        raise TypeError(f"{parser}, but {where} is not a declared field")
    raise TypeError(
        f"{parser}, but {where} is declared {_type_text(declared)}: bind it with the Section "
        f"method for {_type_text(declared)}, or change the field's type"
    )


def _type_text(kind: object) -> str:
    return kind.__name__ if isinstance(kind, type) else str(kind)


def _show_slice_any(value: list[Any]) -> str:
    return "[" + ",".join(str(item) for item in value) + "]"


def _show_number(value: float) -> str:
    return f"{value:g}"


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


@dataclass
class FlagSet:
    """Flags grouped in named sections (component-base ``NamedFlagSets``)."""

    name: str
    flags: dict[str, Flag] = field(default_factory=dict)
    shorthands: dict[str, Flag] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)

    def section(self, name: str) -> Section:
        if name not in self.order:
            self.order.append(name)
        return Section(self, name)

    def add(self, flag: Flag) -> None:
        if flag.name in self.flags:
            raise ValueError(f"flag redefined: {flag.name}")
        self.flags[flag.name] = flag

    def set_shorthand(self, name: str, shorthand: str) -> None:
        flag = self.flags[name]
        flag.shorthand = shorthand
        self.shorthands[shorthand] = flag

    def lookup(self, name: str) -> Flag | None:
        return self.flags.get(name.replace("_", "-"))

    def changed(self, name: str) -> bool:
        flag = self.lookup(name)
        return flag is not None and flag.changed

    def in_section(self, section: str) -> list[Flag]:
        return sorted(
            (f for f in self.flags.values() if f.section == section), key=lambda f: f.name
        )

    def parse(self, arguments: Sequence[str]) -> list[str]:
        """Parse ``arguments``; positional ones land in :attr:`args`. Returns every error."""
        errors: list[str] = []
        pending = list(arguments)
        while pending:
            arg = pending.pop(0)
            if arg == "--":
                self.args.extend(pending)
                break
            if not arg.startswith("-") or arg == "-":
                self.args.append(arg)
            elif arg.startswith("--"):
                self._long(arg, pending, errors)
            else:
                self._shorts(arg, pending, errors)
        return errors

    def _long(self, arg: str, pending: list[str], errors: list[str]) -> None:
        body = arg[2:]
        if not body or body[0] in "-=":
            errors.append(f"bad flag syntax: {arg}")
            return
        name, has_value, value = body.partition("=")
        flag = self.lookup(name)
        if flag is None:
            errors.append(f"unknown flag: --{name}")
            return
        if not has_value:
            if flag.is_bool:
                value = "true"
            elif pending:
                value = pending.pop(0)
            else:
                errors.append(f"flag needs an argument: {arg}")
                return
        self._set(flag, value, errors)

    def _shorts(self, arg: str, pending: list[str], errors: list[str]) -> None:
        rest = arg[1:]
        while rest:
            char, rest = rest[0], rest[1:]
            flag = self.shorthands.get(char)
            if flag is None:
                errors.append(f"unknown shorthand flag: {char!r} in {arg}")
                return
            if flag.is_bool and not rest.startswith("="):
                self._set(flag, "true", errors)
                continue
            if rest.startswith("="):
                value = rest[1:]
            elif rest:
                value = rest
            elif pending:
                value = pending.pop(0)
            else:
                errors.append(f"flag needs an argument: {char!r} in {arg}")
                return
            self._set(flag, value, errors)
            return

    def _set(self, flag: Flag, value: str, errors: list[str]) -> None:
        try:
            flag.set(value)
        except ValueError as err:
            errors.append(
                f"invalid argument {go_quote(value)} for {go_quote(flag.display_name())} "
                f"flag: {err}"
            )


# -- help and docs -------------------------------------------------------------------------------


def _usage_line(flag: Flag) -> tuple[str, str]:
    left = "  -" + flag.shorthand + ", --" + flag.name if flag.shorthand else "      --" + flag.name
    if flag.type_name:
        left += " " + flag.type_name
    default = flag.default_text()
    usage = flag.usage + (f" (default {default})" if default else "")
    return left, usage


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, current] if current else lines


def render_help(fs: FlagSet, header: str, columns: int = 100) -> str:
    """cobra/cliflag-style help: ``header``, then one block per section, flags sorted."""
    out = [header.rstrip("\n"), ""]
    for section in fs.order:
        rows = [_usage_line(flag) for flag in fs.in_section(section)]
        out += [f"{section[:1].upper()}{section[1:]} flags:", ""]
        indent = max(len(left) for left, _ in rows) + 3
        for left, usage in rows:
            wrapped = _wrap(usage, max(columns - indent, 30)) or [""]
            out.append(left.ljust(indent) + wrapped[0])
            out += [" " * indent + line for line in wrapped[1:]]
        out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(fs: FlagSet, intro: str) -> str:
    """One Markdown table per section: flag, type, default, description."""
    out = [intro.rstrip("\n"), ""]
    for section in fs.order:
        out += [f"## {section[:1].upper()}{section[1:]}", ""]
        out += ["| flag | type | default | description |", "|---|---|---|---|"]
        for flag in fs.in_section(section):
            name = f"`-{flag.shorthand}`, `--{flag.name}`" if flag.shorthand else f"`--{flag.name}`"
            default = flag.default_text() or (
                "false" if flag.is_bool else '""' if flag.type_name == "string" else ""
            )
            if flag.type_name == "duration" and not default:
                default = "0s"
            shown = f"`{default}`" if default else ""
            kind = flag.type_name or "bool"
            out.append(f"| {name} | {kind} | {_cell(shown)} | {_cell(flag.usage)} |")
        out.append("")
    return "\n".join(out)
