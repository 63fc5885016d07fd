"""Cloud config files: gcfg (git-config syntax, what upstream providers use) or YAML.

The framework never interprets a cloud config; a provider declares its schema as frozen
dataclasses and calls :func:`load_cloud_config` on the stream its factory receives::

    @dataclass(frozen=True)
    class Global:
        zone: str = setting(required=True)
        api_key: str = setting(default="", secret=True)    # never in repr or error messages
        retries: int = 3
        subnets: list[str] = setting(default_factory=list)  # multi-valued: one line per value
        peers: list[Peer] = setting(default_factory=list, parse=Peer.parse)  # "name=ip"

    @dataclass(frozen=True)
    class LoadBalancerClass:
        scheme: str = "internet-facing"

    @dataclass(frozen=True)
    class MyConfig:
        global_: Global = setting(default_factory=Global)  # [Global]
        load_balancer: dict[str, LoadBalancerClass] = setting(default_factory=dict)
                                                            # [LoadBalancer "name"]

Names match case-insensitively, ignoring ``-`` and ``_`` (``load_balancer`` matches
``[LoadBalancer]``, ``node-ip`` matches ``node_ip``); ``setting(key=...)`` names a key
explicitly. Value types: ``str``, ``int``, ``float``, ``bool``, ``list[...]`` of those, and
``X | None``, and any type with ``setting(parse=fn)``: ``fn`` turns one written value into
it and raises ``ValueError("what is wrong")`` (the Python form of gcfg's
``encoding.TextUnmarshaler`` fields). gcfg rules: a bare variable is ``true``; in a list, an
empty value clears what came before; a repeated single-valued variable keeps the last value.
YAML: a list for a single-valued key is an error (naming the key), never "the last item
wins".

Every problem is collected and reported at once in one :class:`CloudConfigError`, each issue
naming ``file:line``, the section and the key.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TextIO, TypeVar

import yaml

from kccm.cloudprovider.errors import CloudConfigError

__all__ = [
    "ConfigEntry",
    "ParsedConfig",
    "load_cloud_config",
    "parse_gcfg",
    "parse_yaml",
    "setting",
]

C = TypeVar("C")
Format = Literal["auto", "gcfg", "yaml"]
_META = "kccm.cloudconfig"


@dataclass(frozen=True)
class _SettingMeta:
    key: str | None
    secret: bool
    required: bool
    parse: Callable[[str], Any] | None = None


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    key: str | None = None,
    secret: bool = False,
    required: bool = False,
    parse: Callable[[str], Any] | None = None,
) -> Any:
    """A schema field: ``key`` overrides the name, ``secret`` hides the value, ``required``
    makes its absence an error (a required field needs no default), ``parse`` converts each
    written value (raise ``ValueError`` saying what is wrong: it is reported with file, line,
    section and key, like the built-in types' errors)."""
    if required and default is dataclasses.MISSING and default_factory is dataclasses.MISSING:
        default = None
    meta = {_META: _SettingMeta(key, secret, required, parse)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta, repr=not secret)
    return dataclasses.field(default=default, metadata=meta, repr=not secret)


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
    parsed, issues = _parse_gcfg(text, source)
    if issues:
        raise CloudConfigError([issue for _, issue in issues])
    return parsed


@dataclass
class _State:
    current: tuple[str, str | None] | None = None
    sections: list[tuple[str, str | None, int]] = dataclasses.field(default_factory=list)
    entries: list[ConfigEntry] = dataclasses.field(default_factory=list)


_BROKEN_HEADER = ("", None)  # variables after an unreadable header are not reported again


def _parse_gcfg(text: str, source: str) -> tuple[ParsedConfig, list[tuple[int, str]]]:
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


# -- the schema ------------------------------------------------------------------------------------


def _norm(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


@dataclass(frozen=True)
class _Field:
    name: str
    key: str
    display: str
    kind: Any  # the scalar type
    convert: Callable[[str], Any]
    is_list: bool
    optional: bool
    secret: bool
    required: bool


@dataclass(frozen=True)
class _Section:
    name: str
    key: str
    display: str
    cls: type
    named: bool  # dict[str, cls]: [Key "name"] subsections
    fields: Mapping[str, _Field]


def _meta(field: dataclasses.Field[Any]) -> _SettingMeta:
    found = field.metadata.get(_META)
    return found if isinstance(found, _SettingMeta) else _SettingMeta(None, False, False)


def _field_key(field: dataclasses.Field[Any]) -> str:
    return _norm(_meta(field).key or field.name.rstrip("_"))


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return rest[0], True
    return tp, False


def _describe_field(field: dataclasses.Field[Any], tp: Any) -> _Field:
    tp, optional = _unwrap_optional(tp)
    is_list = typing.get_origin(tp) in (list, tuple, typing.get_origin(typing.Sequence[int]))
    kind = typing.get_args(tp)[0] if is_list else tp
    meta = _meta(field)
    convert = meta.parse or _CONVERTERS.get(kind)
    if convert is None:
        raise TypeError(
            f"cloud config field {field.name!r}: unsupported type {tp!r} "
            "(give setting(parse=...) a function from the written text to it)"
        )
    display = meta.key or field.name.rstrip("_").replace("_", "-")
    return _Field(
        field.name,
        _field_key(field),
        display,
        kind,
        convert,
        is_list,
        optional,
        meta.secret,
        meta.required,
    )


def _describe_section(field: dataclasses.Field[Any], tp: Any) -> _Section:
    named = typing.get_origin(tp) in (dict, Mapping, typing.get_origin(Mapping[str, int]))
    cls = typing.get_args(tp)[1] if named else tp
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        raise TypeError(
            f"cloud config section {field.name!r} must be a dataclass or "
            f"dict[str, dataclass], not {tp!r}"
        )
    hints = typing.get_type_hints(cls)
    described = [_describe_field(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init]
    display = _meta(field).key or field.name.rstrip("_").replace("_", "-")
    return _Section(
        field.name, _field_key(field), display, cls, named, {f.key: f for f in described}
    )


def _describe_schema(schema: type) -> dict[str, _Section]:
    hints = typing.get_type_hints(schema)
    sections = [_describe_section(f, hints[f.name]) for f in dataclasses.fields(schema) if f.init]
    return {s.key: s for s in sections}


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}
_INT = re.compile(r"[+-]?[0-9]+")


def _to_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("invalid bool (use true/false, yes/no, on/off or 1/0)")


def _to_int(text: str) -> int:
    if not _INT.fullmatch(text.strip()):
        raise ValueError("invalid int")
    return int(text)


def _to_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("invalid float") from None


_CONVERTERS: dict[Any, Callable[[str], Any]] = {
    str: str,
    int: _to_int,
    float: _to_float,
    bool: _to_bool,
}


# -- binding entries to the schema -----------------------------------------------------------------


class _Binder:
    def __init__(self, parsed: ParsedConfig, schema: type, allow_unknown: bool) -> None:
        self.parsed = parsed
        self.sections = _describe_schema(schema)
        self.allow_unknown = allow_unknown
        self.issues: list[tuple[int, str]] = []
        # section key -> subsection (or None) -> field name -> value
        self.values: dict[str, dict[str | None, dict[str, Any]]] = {}
        self.seen: dict[tuple[str, str | None], tuple[str, int]] = {}
        self.check_required = True
        self.attempted: set[tuple[str, str | None, str]] = set()
        self.troubled: set[tuple[str, str | None]] = set()

    def where(self, line: int | None, section: str, subsection: str | None) -> str:
        sub = f' subsection "{subsection}"' if subsection is not None else ""
        at = f"{self.parsed.source}:{line}" if line else self.parsed.source
        return f'{at}: section "{section}"{sub}'

    def issue(self, line: int | None, text: str) -> None:
        self.issues.append((line or 0, text))

    def bind(self) -> None:
        for name, subsection, line in self.parsed.sections:
            section = self._section(name, subsection, line)
            if section is not None:
                self.values.setdefault(section.key, {}).setdefault(subsection, {})
                self.seen.setdefault((section.key, subsection), (name, line))
        for entry in self.parsed.entries:
            self._entry(entry)

    def _section(self, name: str, subsection: str | None, line: int) -> _Section | None:
        section = self.sections.get(_norm(name))
        where = self.where(line, name, subsection)
        if section is None:
            if not self.allow_unknown:
                self.issue(line, f"{where}: unknown section")
            return None
        if section.named and subsection is None:
            self.issue(line, f'{where}: needs a name, as in [{name} "name"]')
            self.troubled.add((section.key, None))
            return None
        if not section.named and subsection is not None:
            self.issue(line, f"{where}: takes no subsection name")
            self.troubled.add((section.key, None))
            return None
        return section

    def _entry(self, entry: ConfigEntry) -> None:
        section = self.sections.get(_norm(entry.section))
        if section is None or section.named != (entry.subsection is not None):
            return  # already reported on the header
        where = self.where(entry.line, entry.section, entry.subsection)
        field = section.fields.get(_norm(entry.name))
        if field is None:
            if not self.allow_unknown:
                self.issue(entry.line, f'{where}: key "{entry.name}": unknown key')
            return
        target = self.values.setdefault(section.key, {}).setdefault(entry.subsection, {})
        attempt = (section.key, entry.subsection, field.name)
        if entry.in_list and not field.is_list:
            if attempt not in self.attempted:  # one issue per list, not one per item
                self.issue(entry.line, f'{where}: key "{entry.name}": takes one value, not a list')
            self.attempted.add(attempt)
            return
        self.attempted.add(attempt)
        try:
            _assign(target, field, entry.value)
        except ValueError as err:
            shown = "" if field.secret or entry.value is None else f" {entry.value!r}"
            self.issue(entry.line, f'{where}: key "{entry.name}": {err}{shown}')

    def build(self, schema: type[C]) -> C:
        built: dict[str, Any] = {}
        for section in self.sections.values():
            found = self.values.get(section.key, {})
            if section.named:
                built[section.name] = {
                    sub: self._make(section, sub, vals) for sub, vals in found.items() if sub
                }
            else:
                built[section.name] = self._make(section, None, found.get(None, {}))
        return schema(**built)

    def _make(self, section: _Section, subsection: str | None, values: dict[str, Any]) -> Any:
        self._check_required(section, subsection, values)
        return section.cls(**values)

    def _check_required(
        self, section: _Section, subsection: str | None, values: dict[str, Any]
    ) -> None:
        if not self.check_required or (section.key, subsection) in self.troubled:
            return
        written, line = self.seen.get((section.key, subsection), (section.display, None))
        for field in section.fields.values():
            tried = (section.key, subsection, field.name) in self.attempted
            if field.required and field.name not in values and not tried:
                missing = "" if line else " (the section is missing)"
                where = self.where(line, written, subsection)
                self.issue(
                    line, f'{where}: key "{field.display}": required key is not set{missing}'
                )


def _assign(target: dict[str, Any], field: _Field, raw: str | None) -> None:
    if raw is None and field.kind is not bool:
        raise ValueError("needs a value (only bool keys may be written bare)")
    value = True if raw is None else field.convert(raw)
    if not field.is_list:
        target[field.name] = value
    elif raw == "":
        target[field.name] = []  # gcfg: an empty value clears a multi-valued variable
    else:
        target.setdefault(field.name, []).append(value)


# -- entry point ---------------------------------------------------------------------------------


def _source_name(stream: TextIO | str | None, source: str | None) -> str:
    if source:
        return source
    name = getattr(stream, "name", None)
    return name if isinstance(name, str) else "<cloud-config>"


_YAML_START = re.compile(r"(---|-\s|\{|[\w.\"'-]+\s*:(\s|$))")


def _detect(text: str, source: str) -> Format:
    if source.endswith((".yaml", ".yml", ".json")):
        return "yaml"
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", ";")):
            return "yaml" if _YAML_START.match(stripped) else "gcfg"
    return "gcfg"


def load_cloud_config(
    stream: TextIO | str | None,
    schema: type[C],
    *,
    source: str | None = None,
    format: Format = "auto",
    allow_unknown: bool = False,
) -> C:
    """Parse ``stream`` (a text stream, the text itself, or ``None``: no file) into ``schema``.

    ``format="auto"`` picks YAML for ``.yaml``/``.yml``/``.json`` files and for text whose
    first meaningful line is not a ``[section]`` header, gcfg otherwise. Raises
    :class:`~kccm.cloudprovider.errors.CloudConfigError` listing every problem found.
    """
    name = _source_name(stream, source)
    text = stream if isinstance(stream, str) else ("" if stream is None else stream.read())
    chosen = _detect(text, name) if format == "auto" else format
    if chosen == "yaml":
        parsed, syntax = parse_yaml(text, name), list[tuple[int, str]]()
    else:
        parsed, syntax = _parse_gcfg(text, name)
    binder = _Binder(parsed, schema, allow_unknown)
    binder.issues.extend(syntax)
    binder.check_required = not syntax  # a broken file would only add noise
    binder.bind()
    result = binder.build(schema)
    if binder.issues:
        ordered = sorted(binder.issues, key=lambda item: item[0])
        raise CloudConfigError([text for _, text in ordered])
    return result
