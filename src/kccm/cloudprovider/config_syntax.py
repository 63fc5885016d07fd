"""The syntax of cloud config files: gcfg (git-config syntax, what upstream providers read
with ``gopkg.in/gcfg.v1``) and YAML, both turned into the same :class:`ParsedConfig` (headers
and entries with their line numbers). :mod:`kccm.cloudprovider.config` binds it to a
provider's schema."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from kccm.cloudprovider.errors import CloudConfigError

__all__ = ["ConfigEntry", "ParsedConfig", "parse_gcfg", "parse_gcfg_collecting", "parse_yaml"]


# -- the gcfg syntax ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigEntry:
    """One variable as written: ``value`` is ``None`` for a bare (boolean) variable."""

    section: str
    subsection: str | None
    name: str
    value: str | None
    line: int
    in_list: bool = False
    """Written as an item of a YAML list (a list for a single-valued key is an error)."""


@dataclass(frozen=True)
class ParsedConfig:
    """The syntax of a config file: headers (with their lines) and entries, in file order."""

    source: str
    sections: tuple[tuple[str, str | None, int], ...]
    entries: tuple[ConfigEntry, ...]


class _Syntax(Exception):
    pass


_SECTION_NAME = re.compile(r"[A-Za-z0-9.-]+")
_VARIABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}
_BLANK = " \t\r\f\v"


class _Reader:
    """Cursor over the text with line tracking."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        self.pos += 1
        if char == "\n":
            self.line += 1
        return char

    def skip_blanks(self) -> None:
        while self.peek() and self.peek() in _BLANK:
            self.pos += 1

    def skip_line(self) -> None:
        while self.peek() not in ("", "\n"):
            self.pos += 1
        self.take()

    def rest_is_blank(self) -> bool:
        self.skip_blanks()
        return self.peek() in ("", "\n", "#", ";")

    def match(self, pattern: re.Pattern[str]) -> str:
        found = pattern.match(self.text, self.pos)
        if not found:
            return ""
        self.pos = found.end()
        return found.group()


def parse_gcfg(text: str, source: str = "<cloud-config>") -> ParsedConfig:
    """Parse gcfg text; syntax errors are all collected into one :class:`CloudConfigError`."""
    parsed, issues = parse_gcfg_collecting(text, source)
    if issues:
        raise CloudConfigError([issue for _, issue in issues])
    return parsed


@dataclass
class _State:
    current: tuple[str, str | None] | None = None
    sections: list[tuple[str, str | None, int]] = dataclasses.field(default_factory=list)
    entries: list[ConfigEntry] = dataclasses.field(default_factory=list)


_BROKEN_HEADER = ("", None)  # variables after an unreadable header are not reported again


def parse_gcfg_collecting(text: str, source: str) -> tuple[ParsedConfig, list[tuple[int, str]]]:
    """Parse gcfg text; the syntax errors are returned (line, message), not raised."""
    reader = _Reader(text.removeprefix("\ufeff"))
    state = _State()
    issues: list[tuple[int, str]] = []
    while reader.peek():
        line = reader.line
        try:
            _parse_line(reader, state)
        except _Syntax as err:
            section = state.current[0] if state.current else ""
            where = f' in section "{section}"' if section else ""
            issues.append((line, f"{source}:{line}: syntax error{where}: {err}"))
            if reader.line == line:
                reader.skip_line()
    parsed = ParsedConfig(source, tuple(state.sections), tuple(state.entries))
    return parsed, issues


def _parse_line(reader: _Reader, state: _State) -> None:
    reader.skip_blanks()
    char = reader.peek()
    if char in ("", "\n", "#", ";"):
        reader.skip_line()
        return
    line = reader.line
    if char == "[":
        state.current = _BROKEN_HEADER
        state.current = _parse_header(reader)
        state.sections.append((*state.current, line))
    else:
        if state.current is None:
            raise _Syntax("variable outside of any section (a [Section] header must come first)")
        name, value = _parse_variable(reader)
        state.entries.append(ConfigEntry(*state.current, name, value, line))
    if not reader.rest_is_blank():
        raise _Syntax(f"unexpected {reader.peek()!r} after {'header' if char == '[' else 'value'}")
    reader.skip_line()


def _parse_header(reader: _Reader) -> tuple[str, str | None]:
    reader.take()  # [
    reader.skip_blanks()
    name = reader.match(_SECTION_NAME)
    if not name:
        raise _Syntax("missing or invalid section name (letters, digits, '-' and '.')")
    reader.skip_blanks()
    subsection = None
    if reader.peek() == '"':
        subsection = _parse_subsection(reader)
        reader.skip_blanks()
    if reader.peek() != "]":
        raise _Syntax(f'expected "]" to close section "{name}"')
    reader.take()
    return name, subsection


def _parse_subsection(reader: _Reader) -> str:
    reader.take()  # "
    out: list[str] = []
    while (char := reader.take()) != '"':
        if char in ("", "\n"):
            raise _Syntax("unterminated subsection name (missing closing quote)")
        if char == "\\":
            escaped = reader.take()
            if escaped not in ('"', "\\"):
                raise _Syntax(f"invalid escape \\{escaped.strip()} in subsection name")
            char = escaped
        out.append(char)
    return "".join(out)


def _parse_variable(reader: _Reader) -> tuple[str, str | None]:
    name = reader.match(_VARIABLE_NAME)
    if not name:
        raise _Syntax(f"invalid variable name starting at {reader.peek()!r}")
    reader.skip_blanks()
    if reader.peek() in ("", "\n", "#", ";"):
        return name, None
    if reader.peek() != "=":
        raise _Syntax(f'expected "=" after variable "{name}"')
    reader.take()
    return name, _parse_value(reader, name)


def _parse_value(reader: _Reader, name: str) -> str:
    out: list[str] = []
    kept = 0  # length of out without trailing unquoted blanks
    quoted = False
    while True:
        char = reader.peek()
        if char in ("", "\n") or (char in "#;" and not quoted):
            if quoted:
                raise _Syntax(f'unterminated quoted value of "{name}"')
            return "".join(out[:kept])
        reader.take()
        if char == '"':
            quoted = not quoted
            kept = len(out)
        elif char == "\\":
            kept = _parse_escape(reader, out, kept, name)
        elif char in _BLANK and not quoted:
            if out:
                out.append(char)
        else:
            out.append(char)
            kept = len(out)


def _parse_escape(reader: _Reader, out: list[str], kept: int, name: str) -> int:
    escaped = reader.take()
    if escaped == "\n":
        return kept  # line continuation
    if escaped == "\r" and reader.peek() == "\n":
        reader.take()
        return kept
    if escaped not in _ESCAPES:
        shown = "end of file" if escaped == "" else f"\\{escaped}"
        raise _Syntax(f'invalid escape {shown} in value of "{name}"')
    out.append(_ESCAPES[escaped])
    return len(out)


# -- YAML ----------------------------------------------------------------------------------------


def parse_yaml(text: str, source: str = "<cloud-config>") -> ParsedConfig:
    """Read YAML (``section: {key: value}`` or ``section: {name: {key: value}}``) as entries."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(err, "problem", None) or str(err)
        raise CloudConfigError([f"{source}:{line}: YAML syntax error: {problem}"]) from err
    sections: list[tuple[str, str | None, int]] = []
    entries: list[ConfigEntry] = []
    issues: list[str] = []
    if root is not None and not isinstance(root, yaml.MappingNode):
        raise CloudConfigError([f"{source}:{_line(root)}: the document must be a mapping"])
    for key, body in root.value if root is not None else ():
        _yaml_section(source, str(key.value), key, body, sections, entries, issues)
    if issues:
        raise CloudConfigError(issues)
    return ParsedConfig(source, tuple(sections), tuple(entries))


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _yaml_section(
    source: str,
    name: str,
    key: yaml.Node,
    body: yaml.Node,
    sections: list[tuple[str, str | None, int]],
    entries: list[ConfigEntry],
    issues: list[str],
) -> None:
    if not isinstance(body, yaml.MappingNode):
        issues.append(f'{source}:{_line(body)}: section "{name}": expected a mapping of keys')
        return
    nested = body.value and all(isinstance(v, yaml.MappingNode) for _, v in body.value)
    groups = [(str(k.value), k, v) for k, v in body.value] if nested else [(None, key, body)]
    for subsection, header, mapping in groups:
        sections.append((name, subsection, _line(header)))
        for var, value in mapping.value:
            entries.extend(_yaml_values(source, name, subsection, str(var.value), value, issues))


def _yaml_values(
    source: str,
    section: str,
    subsection: str | None,
    name: str,
    node: yaml.Node,
    issues: list[str],
) -> Iterator[ConfigEntry]:
    in_list = isinstance(node, yaml.SequenceNode)
    items = node.value if in_list else [node]
    for item in items:
        if not isinstance(item, yaml.ScalarNode):
            issues.append(
                f'{source}:{_line(item)}: section "{section}": key "{name}": '
                "expected a scalar value or a list of scalars"
            )
        elif item.tag != "tag:yaml.org,2002:null":
            yield ConfigEntry(section, subsection, name, str(item.value), _line(item), in_list)
