"""The schema binder of cloud config files: :func:`setting` declares a field of a provider's
schema (frozen dataclasses), :func:`bind_config` binds a :class:`~.config_syntax.ParsedConfig`
to it, collecting every problem with its line. :mod:`kccm.cloudprovider.config` is the front
door (it says how schemas are written)."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from kccm.cloudprovider.config_syntax import (
    ConfigEntry,
    ParsedConfig,
)
from kccm.cloudprovider.errors import CloudConfigError

__all__ = ["bind_config", "setting"]

C = TypeVar("C")
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


def bind_config(
    parsed: ParsedConfig,
    schema: type[C],
    *,
    allow_unknown: bool,
    syntax_issues: list[tuple[int, str]],
) -> C:
    """``parsed`` as an instance of ``schema``; raises :class:`CloudConfigError` listing every
    issue (``syntax_issues`` first collected by the reader, then the schema's) by line."""
    binder = _Binder(parsed, schema, allow_unknown)
    binder.issues.extend(syntax_issues)
    binder.check_required = not syntax_issues  # a broken file would only add noise
    binder.bind()
    result = binder.build(schema)
    if binder.issues:
        ordered = sorted(binder.issues, key=lambda item: item[0])
        raise CloudConfigError([text for _, text in ordered])
    return result
