"""The gcfg reader: git-config syntax, what upstream providers read with ``gopkg.in/gcfg.v1``,
into a :class:`~.config_syntax.ParsedConfig`."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from kccm.cloudprovider.config_syntax import ConfigEntry, ParsedConfig
from kccm.cloudprovider.errors import CloudConfigError

__all__ = ["parse_gcfg", "parse_gcfg_collecting"]


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
