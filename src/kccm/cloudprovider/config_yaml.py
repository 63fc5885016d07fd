"""The YAML front end of cloud config files: ``section: {key: value}`` or
``section: {name: {key: value}}`` into a :class:`~.config_syntax.ParsedConfig`."""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from kccm.cloudprovider.config_syntax import ConfigEntry, ParsedConfig
from kccm.cloudprovider.errors import CloudConfigError

__all__ = ["parse_yaml"]


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
