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

import re
from typing import Literal, TextIO, TypeVar

from kccm.cloudprovider.config_gcfg import parse_gcfg, parse_gcfg_collecting
from kccm.cloudprovider.config_schema import bind_config, setting
from kccm.cloudprovider.config_syntax import ConfigEntry, ParsedConfig
from kccm.cloudprovider.config_yaml import parse_yaml

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
        parsed, syntax = parse_gcfg_collecting(text, name)
    return bind_config(parsed, schema, allow_unknown=allow_unknown, syntax_issues=syntax)
