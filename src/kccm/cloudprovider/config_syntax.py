"""The parsed form of a cloud config file, whatever its syntax: headers and entries with their
line numbers. :mod:`.config_gcfg` (gcfg, git-config syntax, what upstream providers read with
``gopkg.in/gcfg.v1``) and :mod:`.config_yaml` produce it; :mod:`.config_schema` binds it to a
provider's schema."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConfigEntry", "ParsedConfig"]


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
