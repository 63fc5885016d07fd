"""Resource tags as upstream reads and merges them (cloud-provider-azure v1.36.5
``pkg/provider/azure_utils.go``: ``parseTags``, ``reconcileTags``,
``findKeyInMapCaseInsensitive``, ``findKeyInMapWithPrefix``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

__all__ = ["find_key", "parse_tags", "reconcile_tags"]

log = logging.getLogger(__name__)


def find_key(tags: Mapping[str, str], key: str) -> str | None:
    """The key of ``tags`` equal to ``key`` ignoring case, or None."""
    for existing in tags:
        if existing.lower() == key.lower():
            return existing
    return None


def parse_tags(text: str, tags_map: Mapping[str, str] | None = None) -> dict[str, str]:
    """``k1=v1,k2=v2`` (each side trimmed, a ``null`` value kept as written), then the map,
    whose keys replace keys equal ignoring case."""
    found: dict[str, str] = {}
    for pair in text.split(",") if text else ():
        parts = pair.split("=")
        if len(parts) != 2:
            log.warning("azure: tags: %r is not key=value, ignored", pair)
            continue
        key, value = parts[0].strip(), parts[1].strip()
        if value.lower() == "null":
            value = parts[1]
        if key:
            found[key] = value
    for raw_key, raw_value in (tags_map or {}).items():
        key, value = raw_key.strip(), raw_value.strip()
        if value.lower() == "null":
            value = raw_value
        if not key:
            continue
        same = find_key(found, key)
        if same is not None and same != key:
            del found[same]
        found[key] = value
    return found


def reconcile_tags(
    current: dict[str, str], wanted: Mapping[str, str], system_tags: str = ""
) -> tuple[dict[str, str], bool]:
    """``reconcileTags``: add or update the wanted tags (keys and values compared ignoring
    case); with ``systemTags`` set, drop tags neither wanted nor matching a system prefix."""
    changed = False
    for key, value in wanted.items():
        same = find_key(current, key)
        if same is None:
            current[key] = value
            changed = True
        elif value.lower() != str(current[same]).lower():
            current[same] = value
            changed = True
    prefixes = [tag.strip().lower() for tag in system_tags.split(",")] if system_tags else []
    if prefixes:
        for key in list(current):
            if key not in wanted and not any(key.lower().startswith(p) for p in prefixes):
                del current[key]
                changed = True
    return current, changed
